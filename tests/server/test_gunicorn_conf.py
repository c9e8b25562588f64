"""gunicorn.conf.py: production defaults, each overridable from the environment."""

import os
import subprocess
import time
from pathlib import Path

import pytest
import requests

from tests.common.live import BIN, ROOT, LiveServer

OVERRIDES = (
    "HOST", "PORT", "GUNICORN_BIND", "WEB_CONCURRENCY", "GUNICORN_WORKER_CLASS", "GUNICORN_THREADS",
    "GUNICORN_TIMEOUT", "GUNICORN_GRACEFUL_TIMEOUT", "GUNICORN_KEEPALIVE", "GUNICORN_MAX_REQUESTS",
    "GUNICORN_MAX_REQUESTS_JITTER", "GUNICORN_CONTROL_SOCKET", "IDENTITY_LOG_LEVEL", "IDENTITY_RATELIMIT_STORAGE",
    "GUNICORN_CMD_ARGS",
)


def resolved_config(tmp_path, **env):
    """The settings gunicorn resolves from gunicorn.conf.py under `env`, as {name: printed value}."""
    clean = {name: value for name, value in os.environ.items() if name not in OVERRIDES}
    result = subprocess.run(
        [str(BIN / "gunicorn"), "-c", "gunicorn.conf.py", "--print-config", "app:app"],
        cwd=ROOT, env={**clean, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path), **env},
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return {
        name.strip(): value.strip()
        for name, _, value in (line.partition("=") for line in result.stdout.splitlines())
    }


def test_defaults_suit_production(tmp_path):
    config = resolved_config(tmp_path)
    assert config["bind"] == "['127.0.0.1:8000']"
    # One process per core (rate limits in memory are shared by them), gevent's worker (a greenlet per connection).
    assert (config["workers"], config["threads"], config["worker_class"]) == (str(os.cpu_count()), "1", "gevent")
    assert config["worker_connections"] == "4000"  # open event streams hold one each
    # The C parser, required: the Python one echoes a malformed header line, key and all.
    assert config["http_parser"] == "fast"
    assert (config["timeout"], config["graceful_timeout"], config["keepalive"]) == ("30", "30", "5")
    assert config["errorlog"] == "-" and config["accesslog"] == "None"
    assert config["loglevel"] == "info"
    assert "json_formatter" in config["logconfig_dict"]
    assert config["preload_app"] == "False"
    assert config["control_socket_disable"] == "True"


def test_with_a_shared_rate_limit_storage_workers_follow_the_cpu_count(tmp_path):
    config = resolved_config(tmp_path, IDENTITY_RATELIMIT_STORAGE="redis://127.0.0.1:6379/0")
    assert (config["workers"], config["threads"], config["worker_class"]) == (str(os.cpu_count()), "1", "gevent")


def test_threads_alone_select_the_threaded_worker(tmp_path):
    config = resolved_config(tmp_path, GUNICORN_THREADS="4")
    assert (config["worker_class"], config["threads"]) == ("gthread", "4")
    config = resolved_config(tmp_path, GUNICORN_WORKER_CLASS="gthread")
    assert (config["worker_class"], config["threads"]) == ("gthread", str(2 * os.cpu_count() + 1))


def test_threads_with_a_worker_class_that_has_none_refuse_to_start(tmp_path):
    clean = {name: value for name, value in os.environ.items() if name not in OVERRIDES}
    result = subprocess.run(
        [str(BIN / "gunicorn"), "-c", "gunicorn.conf.py", "--check-config", "app:app"],
        cwd=ROOT, env={**clean, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path), "GUNICORN_WORKER_CLASS": "sync",
                       "GUNICORN_THREADS": "4"},
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode != 0
    assert "GUNICORN_THREADS=4 needs GUNICORN_WORKER_CLASS=gthread" in result.stdout + result.stderr


@pytest.mark.parametrize(
    ("env", "worker", "processes"),
    [({"GUNICORN_WORKER_CLASS": "sync"}, "sync", os.cpu_count()), ({"WEB_CONCURRENCY": "3"}, "gevent", 3),
     ({}, "gevent", os.cpu_count())],
    ids=["sync", "3-workers", "default"],
)
def test_the_server_runs_the_worker_class_and_count_the_environment_asks_for(database_path, env, worker, processes):
    output = database_path.parent / "out"
    output.mkdir()
    # LiveServer sets WEB_CONCURRENCY from `workers` (None: leaves it unset).
    workers = env.pop("WEB_CONCURRENCY", None)
    server = LiveServer(f"sqlite:///{database_path}", workers=workers, env=env, output_dir=output)
    server.start()
    try:
        assert requests.get(server.url + "/healthz", timeout=10).status_code == 200
        children_file = Path(f"/proc/{server.process.pid}/task/{server.process.pid}/children")
        deadline = time.monotonic() + 20  # the first worker answers while the others still boot
        while len(children := children_file.read_text().split()) < processes and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(1)  # and no more come
        children = children_file.read_text().split()
    finally:
        server.stop()
    assert f"Using worker: {worker}" in server.stderr()
    assert len(children) == processes


def test_every_setting_is_read_from_the_environment(tmp_path):
    config = resolved_config(
        tmp_path,
        HOST="0.0.0.0", PORT="9123", WEB_CONCURRENCY="3", GUNICORN_WORKER_CLASS="gthread", GUNICORN_THREADS="4",
        GUNICORN_TIMEOUT="11", GUNICORN_GRACEFUL_TIMEOUT="7", GUNICORN_KEEPALIVE="2", GUNICORN_MAX_REQUESTS="1000",
        GUNICORN_CONTROL_SOCKET=str(tmp_path / "gunicorn.ctl"), IDENTITY_LOG_LEVEL="warning",
        # Anything else, or any of these again, from GUNICORN_CMD_ARGS, which gunicorn applies last.
        GUNICORN_CMD_ARGS="--max-requests-jitter 50 --backlog 64",
    )
    assert config["bind"] == "['0.0.0.0:9123']"
    assert (config["workers"], config["worker_class"], config["threads"]) == ("3", "gthread", "4")
    assert (config["timeout"], config["graceful_timeout"], config["keepalive"]) == ("11", "7", "2")
    assert (config["max_requests"], config["max_requests_jitter"], config["backlog"]) == ("1000", "50", "64")
    assert config["loglevel"] == "warning"
    assert (config["control_socket"], config["control_socket_disable"]) == (str(tmp_path / "gunicorn.ctl"), "False")


def conf_value(tmp_path, name, **env):
    """A name gunicorn.conf.py defines, read in a process of its own: the file sets process-wide state
    (prometheus_client's multiprocess mode, logging's switches) that must not leak into the suite."""
    clean = {key: value for key, value in os.environ.items() if key not in OVERRIDES}
    code = f"import runpy; print(runpy.run_path('gunicorn.conf.py')[{name!r}])"
    result = subprocess.run(
        [str(BIN / "python"), "-c", code], cwd=ROOT,
        env={**clean, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path), **env}, capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_bind_takes_ipv6_hosts_and_a_whole_address(tmp_path):
    assert conf_value(tmp_path, "bind", HOST="::", PORT="8001") == "[::]:8001"
    assert conf_value(tmp_path, "bind", GUNICORN_BIND="unix:/run/identity.sock") == "unix:/run/identity.sock"


def test_without_a_metrics_directory_gunicorn_makes_one_and_removes_it_on_shutdown(database_path, issue_key, tmp_path):
    # The server's temporary folder is this test's own: another gunicorn on the machine (a second
    # suite running at the same time) makes its directories in the shared one.
    temporary = tmp_path / "tmp"
    temporary.mkdir()

    def ours():
        return {path for kind in ("metrics", "ratelimit") for path in temporary.glob(f"identity-{kind}-*")}

    before = ours()
    server = LiveServer(
        f"sqlite:///{database_path}", workers=2, env={"PROMETHEUS_MULTIPROC_DIR": "", "TMPDIR": str(temporary)}
    ).start()
    try:
        made = ours() - before
        # The metrics' directory, and the rate-limit counts' one with the file every worker maps.
        assert sorted(path.name.split("-")[1] for path in made) == ["metrics", "ratelimit"]
        [counts] = [path / "counts" for path in made if "ratelimit" in path.name]
        assert counts.stat().st_size == 512 * 1024
        assert requests.get(server.url + "/metrics", timeout=10).status_code == 200
    finally:
        server.stop()
    # SIGTERM: a graceful shutdown, and the exit hook ran.
    assert server.process.returncode == 0
    assert not any(path.exists() for path in made)


def test_the_folders_of_a_server_killed_outright_are_removed_when_the_next_one_starts(database_path, issue_key, tmp_path):
    # A SIGKILL runs no exit hook: the folders stay until another server sees that nobody holds them.
    # A server still running keeps its own. (TMPDIR is this test's: other suites' servers use the shared one.)
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    env = {"PROMETHEUS_MULTIPROC_DIR": "", "TMPDIR": str(temporary)}

    def folders():
        return {path for kind in ("metrics", "ratelimit") for path in temporary.glob(f"identity-{kind}-*")}

    crashed = LiveServer(f"sqlite:///{database_path}", workers=1, env=env).start()
    crashed.kill()
    crashed.process.wait(timeout=30)
    left = folders()
    assert len(left) == 2
    running = LiveServer(f"sqlite:///{database_path}", workers=1, env=env).start()
    try:
        kept = folders()
        assert not kept & left
        assert len(kept) == 2
        later = LiveServer(f"sqlite:///{database_path}", workers=1, env=env).start()
        later.stop()
        assert requests.get(running.url + "/metrics", timeout=10).status_code == 200
        assert folders() == kept
    finally:
        running.stop()
    assert folders() == set()
