import shutil

import pytest
from flask_migrate import upgrade

from identity import create_app, service
from identity.extensions import db

ADMIN_WALLET = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"
USER_WALLET = "0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359"
OTHER_WALLET = "0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB"


# Most tests make many requests with one key; those about rate limits set their own, lower limits.
UNLIMITED = {"IDENTITY_RATELIMIT_READ": "100000/minute", "IDENTITY_RATELIMIT_CREATE": "100000/minute"}


def make_app(database_path, **config):
    return create_app({"DATABASE_URL": f"sqlite:///{database_path}", "TESTING": True, **UNLIMITED, **config})


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
