"""Real gunicorn nodes serving the app on free loopback ports, for end-to-end tests."""

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


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


class LiveServer:
    """One node: a gunicorn master and its workers, in a process group of their own."""

    def __init__(self, database_url, workers=2, env=None):
        self.database_url = database_url
        self.workers = workers
        self.env = env or {}
        self.process = None
        self.port = None
        # A file, not a pipe: a pipe nobody reads fills up, and then the workers block on logging.
        self._log = None

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout=60):
        self.launch()
        return self.wait_until_ready(timeout)

    def launch(self):
        """Start gunicorn without waiting for it; see wait_until_ready."""
        self.port = free_port()
        self._log = tempfile.TemporaryFile()
        env = {**os.environ, "DATABASE_URL": self.database_url, **self.env}
        self.process = subprocess.Popen(
            [str(BIN / "gunicorn"), "--bind", f"127.0.0.1:{self.port}", "--workers", str(self.workers), "app:app"],
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=self._log, start_new_session=True,
        )
        return self

    def wait_until_ready(self, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError("gunicorn exited: " + self.log())
            try:
                if requests.get(self.url + "/readyz", timeout=5).status_code == 200:
                    return self
            except requests.RequestException:
                pass
            time.sleep(0.1)
        log = self.log()
        self.stop()
        raise RuntimeError("gunicorn did not become ready: " + log)

    def log(self):
        """The end of what gunicorn and the app wrote to stderr."""
        self._log.seek(0)
        return self._log.read().decode(errors="replace")[-2000:]

    def kill(self):
        """SIGKILL the master and every worker at once, as a crash would."""
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self):
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()
        if self._log:
            self._log.close()


def start_all(servers, timeout=60):
    """Start several nodes at once (they boot in parallel); returns them."""
    for server in servers:
        server.launch()
    for server in servers:
        server.wait_until_ready(timeout)
    return servers
