import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests
from flask_migrate import upgrade

from identity import create_app, service
from identity.extensions import db

ADMIN_WALLET = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"
USER_WALLET = "0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359"
OTHER_WALLET = "0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB"


def make_app(database_path, **config):
    return create_app({"DATABASE_URL": f"sqlite:///{database_path}", "TESTING": True, **config})


@pytest.fixture(scope="session")
def migrated_database(tmp_path_factory):
    """One database migrated once; every test gets a copy of the file."""
    path = tmp_path_factory.mktemp("template") / "identity.db"
    app = make_app(path)
    with app.app_context():
        upgrade()
        db.engine.dispose()
    return path


@pytest.fixture
def database_path(tmp_path, migrated_database):
    path = tmp_path / "identity.db"
    shutil.copy(migrated_database, path)
    return path


@pytest.fixture
def app_config():
    """Extra settings for the `app` fixture; a test module may override it."""
    return {}


@pytest.fixture
def app(database_path, app_config):
    app = make_app(database_path, **app_config)
    yield app
    with app.app_context():
        db.engine.dispose()


@pytest.fixture
def client(app):
    return app.test_client()


@pytest.fixture
def runner(app):
    return app.test_cli_runner()


@pytest.fixture
def issue_key(app):
    """issue_key(wallet, role=None) -> a real key, issued through the service."""

    def issue(wallet, role=None):
        with app.app_context():
            key, _ = service.issue_key(wallet, role)
        return key

    return issue


@pytest.fixture
def admin_key(issue_key):
    return issue_key(ADMIN_WALLET, "Admin")


@pytest.fixture
def user_key(issue_key):
    return issue_key(USER_WALLET, "User")


@pytest.fixture
def create(client, user_key):
    """create(body, key=user_key, path="/identity") -> the response of a POST."""

    def post(body, key=None, path="/identity"):
        return client.post(path, json=body, headers={"x-api-key": key or user_key})

    return post


ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def _free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass(frozen=True)
class LiveServer:
    url: str
    api_key: str


@pytest.fixture(scope="session")
def live_server(tmp_path_factory):
    """The service as it is deployed: migrated by the CLI, a key from the CLI, gunicorn with two workers."""
    folder = tmp_path_factory.mktemp("live")
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{folder / 'identity.db'}"}

    def flask(*args):
        command = [BIN / "flask", "--app", "app", *args]
        result = subprocess.run(command, check=False, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        return result.stdout

    flask("db", "upgrade")
    api_key = flask("keys", "create", "--wallet", ADMIN_WALLET, "--role", "Admin").strip().splitlines()[-1]
    port = _free_port()
    log = (folder / "gunicorn.log").open("w")
    server = subprocess.Popen(
        [BIN / "gunicorn", "--bind", f"127.0.0.1:{port}", "--workers", "2", "app:app"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            assert server.poll() is None, (folder / "gunicorn.log").read_text()
            try:
                if requests.get(f"{url}/healthz", timeout=5).status_code == 200:
                    break
            except requests.RequestException:  # not listening yet, or no worker booted yet
                pass
            assert time.monotonic() < deadline, "gunicorn did not answer /healthz within 30 s"
            time.sleep(0.1)
        yield LiveServer(url=url, api_key=api_key)
    finally:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()
