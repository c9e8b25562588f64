"""Fixtures more than one folder of tests uses (a pytest plugin of the suite's, named in tests/conftest.py):
databases for more than one instance, and the console signed in as a browser is."""

import shutil

import pytest

from tests.common.apps import ADMIN_WALLET, migrate
from tests.common.console import Console, sign_in


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
def console_for(app):
    """console_for(key) -> a Console signed in with `key` (a client of its own)."""

    def open_console(key):
        client = app.test_client()
        answer = sign_in(client, key)
        assert answer.status_code == 303, answer.get_data(as_text=True)
        return Console(client)

    return open_console


@pytest.fixture
def console(console_for, admin_key):
    return console_for(admin_key)


@pytest.fixture
def read_only_admin_key(app):
    from identity.core import keys

    with app.app_context():
        key, _ = keys.issue_key(ADMIN_WALLET, "Admin", scope="read")
    return key
