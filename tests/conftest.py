from pathlib import Path

import pytest

from identity import create_app, service

# pytester runs the pytest plugin's tests as an outside project would (tests/test_pytest_plugin.py).
pytest_plugins = ["pytester"]

ADMIN_WALLET = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"
USER_WALLET = "0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359"
OTHER_WALLET = "0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB"


# Most tests make many requests with one key; those about rate limits set their own, lower limits.
UNLIMITED = {"IDENTITY_RATELIMIT_READ": "100000/minute", "IDENTITY_RATELIMIT_CREATE": "100000/minute"}


def make_app(database_path, **config):
    """Another app on an existing SQLite file, for tests that need two apps or odd settings."""
    return create_app({"DATABASE_URL": f"sqlite:///{database_path}", "TESTING": True, **UNLIMITED, **config})


@pytest.fixture
def app_config():
    """Settings of this test's app, over UNLIMITED rate limits; a test module may override it."""
    return {}


@pytest.fixture
def identity_config(app_config):
    # The plugin's fixture, given this suite's defaults.
    return {**UNLIMITED, **app_config}


@pytest.fixture
def app(identity_app):
    """The app of the package's own pytest plugin: a fresh copy of a once-migrated database per test.

    Settings come from `identity_config`, which a test module may override.
    """
    return identity_app


@pytest.fixture
def database_path(app):
    """The SQLite file behind `app`."""
    return Path(app.config["SQLALCHEMY_DATABASE_URI"].removeprefix("sqlite:///"))


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


@pytest.fixture(scope="session")
def live_server(tmp_path_factory):
    """The service as it is deployed: migrated by the CLI, a key from the CLI, gunicorn with two workers.

    It carries `url` and `api_key` (an Admin key).
    """
    from tests.live import LiveServer, prepare_database

    database_url = f"sqlite:///{tmp_path_factory.mktemp('live') / 'identity.db'}"
    api_key = prepare_database(database_url, ADMIN_WALLET)
    server = LiveServer(database_url, workers=2).start()
    server.api_key = api_key
    yield server
    server.stop()
