"""Real gunicorn nodes serving the app on free loopback ports, for end-to-end tests."""

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

# Most tests make many requests with one key; those about rate limits set their own, lower limits.
UNLIMITED = {
    "IDENTITY_RATELIMIT_READ": "100000/minute", "IDENTITY_RATELIMIT_CREATE": "100000/minute",
    "IDENTITY_RATELIMIT_SIGNIN": "100000/minute",
}


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def flask_cli(database_url, *args):
    """Run `flask --app app ARGS` against `database_url`; returns stdout."""
    env = {**os.environ, "DATABASE_URL": database_url}
    result = subprocess.run(
        [str(BIN / "flask"), "--app", "app", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def prepare_database(database_url, wallet, role="Admin"):
    """Migrate the database and issue a key; returns the key."""
    flask_cli(database_url, "db", "upgrade")
    return flask_cli(database_url, "keys", "create", "--wallet", wallet, "--role", role).strip().splitlines()[-1]


class LiveServer:
    """One node: gunicorn with the project's gunicorn.conf.py, master and workers in a process group of their own.

    `workers=None` leaves their number to gunicorn.conf.py. Its stdout, stderr and metrics files go
    to `output_dir`, to read after stop(); without one, to a temporary folder removed when the
    server stops. Files, not pipes: a pipe nobody reads fills up, and then the workers block on logging.
    """

    def __init__(self, database_url, workers=2, env=None, output_dir=None, port=None):
        self.database_url = database_url
        self.workers = workers
        self.env = {**UNLIMITED, **(env or {})}
        self.process = None
        # A given port is kept across stop() and start(), as a restarted service keeps its address.
        self.fixed_port = port
        self.port = None
        self.keep_output = output_dir is not None
        self.output_dir = Path(output_dir) if output_dir else Path(tempfile.mkdtemp(prefix="identity-live-"))

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout=60, same_port=False):
        """Start gunicorn and wait until it is ready; `same_port`: on the port it had (a restart, which its
        clients find where they left it)."""
        self.launch(same_port)
        return self.wait_until_ready(timeout)

    def launch(self, same_port=False):
        """Start gunicorn without waiting for it; see wait_until_ready."""
        self.port = self.fixed_port or (self.port if same_port and self.port else free_port())
        env = {
            **os.environ, "DATABASE_URL": self.database_url, "HOST": "127.0.0.1", "PORT": str(self.port),
            "WEB_CONCURRENCY": str(self.workers), "PROMETHEUS_MULTIPROC_DIR": str(self.output_dir / "metrics"),
            **self.env,
        }
        if self.workers is None:  # as gunicorn.conf.py decides
            del env["WEB_CONCURRENCY"]
        self.output_dir.mkdir(parents=True, exist_ok=True)  # again after a stop() that removed it
        with open(self.output_dir / "stdout", "ab") as stdout, open(self.output_dir / "stderr", "ab") as stderr:
            self.process = subprocess.Popen(
                [str(BIN / "gunicorn"), "-c", "gunicorn.conf.py", "app:app"],
                cwd=ROOT, env=env, stdout=stdout, stderr=stderr, start_new_session=True,
            )
        return self

    def wait_until_ready(self, timeout=60):
        return wait_until_ready(self, "gunicorn", timeout)

    def log(self):
        """The end of what gunicorn and the app wrote to stderr."""
        return self.stderr()[-2000:]

    def kill(self):
        """SIGKILL the master and every worker at once, as a crash would."""
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)
        self._remove_output()

    def stop(self):
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()
        self._remove_output()

    def _remove_output(self):
        if not self.keep_output:
            shutil.rmtree(self.output_dir, ignore_errors=True)

    def stdout(self):
        return (self.output_dir / "stdout").read_text(errors="replace")

    def stderr(self):
        path = self.output_dir / "stderr"
        return path.read_text(errors="replace") if path.exists() else ""


def wait_until_ready(server, name, timeout=60, headers=None):
    """Poll `server.url` + /readyz (with `headers`) until it answers 200, and return `server`.

    `server` has `process`, `url`, `log()` and `stop()`: if its process exits, or the time runs out
    (then it is stopped), the error carries the end of its log.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"{name} exited: " + server.log())
        try:
            if requests.get(server.url + "/readyz", headers=headers, timeout=5).status_code == 200:
                return server
        except requests.RequestException:
            pass
        time.sleep(0.1)
    log = server.log()
    server.stop()
    raise RuntimeError(f"{name} did not become ready: " + log)


def start_all(servers, timeout=60):
    """Start several nodes at once (they boot in parallel); returns them."""
    for server in servers:
        server.launch()
    for server in servers:
        server.wait_until_ready(timeout)
    return servers
