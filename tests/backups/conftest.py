"""Fixtures of the backup tests: one SeaweedFS S3 store for the session (its bucket created by the tests, as
an operator creates it), a fresh prefix of it per test, and apps whose target is that prefix."""

import os
import uuid

import pytest
from sqlalchemy import create_engine, text

from identity import background
from identity.storage.database import db
from tests.common.apps import make_app
from tests.common.seaweed import BUCKET, Seaweed


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


@pytest.fixture
def junk(database_url, backend):
    """24 MiB that do not compress, in a table of their own: a backup of several parts."""
    engine = create_engine(database_url.replace("postgresql://", "postgresql+psycopg://", 1))
    kind = "BLOB" if backend == "sqlite" else "BYTEA"
    with engine.begin() as connection:
        connection.execute(text(f"CREATE TABLE backup_test_junk (data {kind})"))
        for _ in range(24):
            connection.execute(text("INSERT INTO backup_test_junk (data) VALUES (:data)"),
                               {"data": os.urandom(1024 * 1024)})
    engine.dispose()  # no connection kept open meanwhile: a restore opens the database alone
    yield
    with engine.begin() as connection:
        connection.execute(text("DROP TABLE backup_test_junk"))
    engine.dispose()
