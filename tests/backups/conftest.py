"""Fixtures of the backup tests: one SeaweedFS S3 store for the session (its bucket created by the tests, as
an operator creates it), a fresh prefix of it per test, and apps whose target is that prefix."""

import uuid

import pytest

from identity import background
from identity.storage.database import db
from tests.backups.seaweed import BUCKET, Seaweed
from tests.conftest import ADMIN_WALLET, make_app
from tests.data.conftest import instance_databases  # noqa: F401 - fresh databases to restore into


@pytest.fixture(scope="session")
def seaweed(tmp_path_factory):
    store = Seaweed(tmp_path_factory.mktemp("seaweed")).start()
    store.client().create_bucket(Bucket=BUCKET)
    yield store
    store.stop()


@pytest.fixture
def s3_env(seaweed, monkeypatch):
    """The AWS SDK's settings for the store, in this process's environment (where boto3 reads them)."""
    for name in ("AWS_PROFILE", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL_S3", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    for name, value in seaweed.env().items():
        monkeypatch.setenv(name, value)
    return seaweed


@pytest.fixture
def prefix():
    return f"tests/{uuid.uuid4().hex[:12]}/"


@pytest.fixture
def target(s3_env, prefix):
    return f"s3://{BUCKET}/{prefix}"


@pytest.fixture
def backup_apps(target):
    """backup_apps(database_url, **config) -> an app whose backups go to this test's prefix."""
    made = []

    def build(database_url, **config):
        settings = {"IDENTITY_BACKUP_URL": target, "IDENTITY_BACKUP_RETRY_MIN_SECONDS": 0.05,
                    "IDENTITY_BACKUP_RETRY_MAX_SECONDS": 0.2, "IDENTITY_BACKUP_POLL_SECONDS": 0.1, **config}
        app = make_app(database_url, **settings)
        made.append(app)
        return app

    yield build
    for app in made:
        background.stop(app)
        with app.app_context():
            db.engine.dispose()


def create_identities(app, count, key=None):
    """Create `count` identities through the API; returns the key used."""
    client = app.test_client()
    if key is None:
        runner = app.test_cli_runner()
        result = runner.invoke(args=["keys", "create", "--wallet", ADMIN_WALLET, "--role", "Admin"])
        assert result.exit_code == 0, result.output
        key = result.stdout.strip().splitlines()[-1]
    for number in range(count):
        response = client.post("/identity", json={"display_name": f"Backed up {uuid.uuid4().hex[:6]} {number}"},
                               headers={"x-api-key": key})
        assert response.status_code == 201, response.get_data(as_text=True)
    return key


def feed_end(app, key):
    response = app.test_client().get("/changes", query_string={"after": 0, "limit": 1000}, headers={"x-api-key": key})
    assert response.status_code == 200
    return max((entry["seq"] for entry in response.get_json()["data"]), default=0)
