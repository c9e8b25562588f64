"""The console through the Flask test client: a browser's requests (its cookie, the Origin its forms carry),
without the browser (tests.common.browser drives a real one)."""

import re
from html import unescape

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
