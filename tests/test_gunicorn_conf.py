"""gunicorn.conf.py: production defaults, each overridable from the environment."""

import os
import subprocess

import requests

from tests.live import BIN, ROOT, LiveServer

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
    # Rate limits counted in memory are per process: one process, as many threads as workers would be.
    assert (config["workers"], config["threads"]) == ("1", str(2 * os.cpu_count() + 1))
    assert config["worker_class"] == "gthread"
    assert (config["timeout"], config["graceful_timeout"], config["keepalive"]) == ("30", "30", "5")
    assert config["errorlog"] == "-" and config["accesslog"] == "None"
    assert config["loglevel"] == "info"
    assert "json_formatter" in config["logconfig_dict"]
    assert config["preload_app"] == "False"
    assert config["control_socket_disable"] == "True"


def test_with_a_shared_rate_limit_storage_workers_follow_the_cpu_count(tmp_path):
    config = resolved_config(tmp_path, IDENTITY_RATELIMIT_STORAGE="redis://127.0.0.1:6379/0")
    assert (config["workers"], config["threads"]) == (str(2 * os.cpu_count() + 1), "1")
    assert config["worker_class"] == "sync"


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
        return set(temporary.glob("identity-metrics-*"))

    before = ours()
    server = LiveServer(
        f"sqlite:///{database_path}", workers=2, env={"PROMETHEUS_MULTIPROC_DIR": "", "TMPDIR": str(temporary)}
    ).start()
    try:
        made = ours() - before
        assert len(made) == 1
        assert requests.get(server.url + "/metrics", timeout=10).status_code == 200
    finally:
        server.stop()
    # SIGTERM: a graceful shutdown, and the exit hook ran.
    assert server.process.returncode == 0
    assert not any(path.exists() for path in made)
