"""The console's fixtures: an app's console signed in with a key, as a browser is (tests.common.console)."""

import pytest

from tests.common.apps import ADMIN_WALLET
from tests.common.console import Console, sign_in


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
