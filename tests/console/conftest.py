"""The console through the Flask test client: a browser's requests (its cookie, the Origin its forms carry),
without the browser. tests/console/test_browser.py drives a real one."""

import re
from html import unescape

import pytest

from tests.conftest import ADMIN_WALLET

ORIGIN = "http://localhost"  # the test client's host


def form_value(html, name):
    """The value of the (hidden) input `name` in a page."""
    match = re.search(rf'name="{name}" value="([^"]*)"', html)
    assert match, f"no input {name} in the page"
    return unescape(match.group(1))


def sign_in(client, key, origin=ORIGIN):
    """Post `key` through the sign-in form as a browser would; returns the answer."""
    page = client.get("/admin/sign-in").get_data(as_text=True)
    return client.post("/admin/sign-in", data={"form_token": form_value(page, "form_token"), "key": key},
                       headers={"Origin": origin})


class Console:
    """A signed-in browser: `get(path)` and `post(path, data)` from a page of the console, with its token."""

    def __init__(self, client):
        self.client = client

    def get(self, path, **kwargs):
        return self.client.get(path, **kwargs)

    def text(self, path):
        response = self.get(path)
        assert response.status_code == 200, response.get_data(as_text=True)
        return response.get_data(as_text=True)

    def token(self, path="/admin/keys"):
        return form_value(self.text(path), "csrf_token")

    def post(self, path, data=None, origin=ORIGIN, token=None):
        data = {"csrf_token": token if token is not None else self.token(), **(data or {})}
        return self.client.post(path, data=data, headers={"Origin": origin} if origin else {})


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
