"""Fixtures of the data tests: more than one database, for instances that copy from each other, and a
mirrors' follower started as a serving process starts it."""

import shutil

import pytest

from identity.data import follower
from tests.common.apps import migrate


@pytest.fixture
def instance_databases(backend, tmp_path, request):
    """instance_databases(n) -> n migrated, empty databases of this test's backend (beside database_url),
    one for each instance of a test; dropped at its end."""
    made = []
    if backend == "postgresql":
        server = request.getfixturevalue("postgres_server")
    else:
        template = request.getfixturevalue("sqlite_template")

    def make(count):
        urls = []
        for _ in range(count):
            if backend == "postgresql":
                url = server.create_database()
                made.append(url)
                migrate(url)
            else:
                path = tmp_path / f"instance-{len(made)}.db"
                shutil.copy(template, path)
                made.append(path)
                url = f"sqlite:///{path}"
            urls.append(url)
        return urls

    yield make
    if backend == "postgresql":
        for url in made:
            server.drop_database(url)


@pytest.fixture
def following(app):
    """Start the app's follower (as a serving process would); stopped at the end of the test."""
    yield lambda: follower.start(app)
    follower.stop(app)
