"""A real gunicorn serving the app on a free loopback port, for end-to-end tests."""

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import requests

from tests.conftest import UNLIMITED

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


def prepare_database(database_url, wallet, role="Admin"):
    """Migrate the database and issue a key; returns the key."""
    flask_cli(database_url, "db", "upgrade")
    return flask_cli(database_url, "keys", "create", "--wallet", wallet, "--role", role).strip().splitlines()[-1]


class LiveServer:
    def __init__(self, database_url, workers=2, env=None):
        self.database_url = database_url
        self.workers = workers
        self.env = {**UNLIMITED, **(env or {})}
        self.process = None
        self.port = None

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout=30):
        self.port = free_port()
        env = {**os.environ, "DATABASE_URL": self.database_url, **self.env}
        self.process = subprocess.Popen(
            [str(BIN / "gunicorn"), "--bind", f"127.0.0.1:{self.port}", "--workers", str(self.workers), "app:app"],
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError("gunicorn exited: " + self.process.stderr.read().decode(errors="replace")[-2000:])
            try:
                if requests.get(self.url + "/readyz", timeout=5).status_code == 200:
                    return self
            except requests.RequestException:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError("gunicorn did not become ready")

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
        if self.process and self.process.stderr:
            self.process.stderr.close()
