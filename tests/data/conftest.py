"""Fixtures of the data tests: a mirrors' follower started as a serving process starts it, and a migrated, empty
database to copy into."""


import pytest

from identity.data import follower
from tests.common.apps import migrate


@pytest.fixture
def following(app):
    """Start the app's follower (as a serving process would); stopped at the end of the test."""
    yield lambda: follower.start(app)
    follower.stop(app)


@pytest.fixture
def target_url(empty_database_url):
    """A migrated, empty database of the same kind as the test's."""
    migrate(empty_database_url)
    return empty_database_url
