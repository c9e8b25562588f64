"""The console through the Flask test client: a browser's requests (its cookie, the Origin its forms carry),
without the browser (tests.common.browser drives a real one)."""

import re
from html import unescape

from tests.wallets import address_of, private_key, sign_messages, siwe_message

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


ADMIN_KEY = private_key("console admin")


ADMIN = address_of(ADMIN_KEY)


USER_KEY = private_key("console user")


USER = address_of(USER_KEY)


MESSAGE_URL = "/admin/sign-in/wallet/message"


JSON = {"Accept": "application/json"}  # as the page's script asks


def offered(client, address, chain_id="1"):
    """The console's answer to the page's script asking for the message of `address` on `chain_id`."""
    return client.get(MESSAGE_URL, query_string={"address": address, "chain_id": chain_id}, headers=JSON)


def signed(client, *private_keys, **message_fields):
    """For each private key, a message and ethers' personal_sign signature of it; one run of node for them all.

    The message is the console's for the wallet's account in lower case, as wallets answer it; with
    message_fields, one written here (tests.wallets) for a fresh nonce of GET /auth/nonce, to break a rule.
    """
    domain, messages = message_fields.pop("domain", None), []
    for key in private_keys:
        if not (domain or message_fields):
            answer = offered(client, address_of(key).lower())
            assert answer.status_code == 200, answer.get_data(as_text=True)
            messages.append(answer.get_json()["message"])
            continue
        issued = client.get("/auth/nonce").get_json()
        fields = {"uri": issued["uri"], "statement": "Sign in to the Identity service's console.", **message_fields}
        messages.append(siwe_message(domain or issued["domain"], address_of(key), issued["nonce"], **fields))
    return list(zip(messages, sign_messages(list(zip(private_keys, messages, strict=True))), strict=True))


def wallet_sign_in(client, message, signature, origin=ORIGIN, **fields):
    """Post a signed message through the sign-in page's wallet form, with that page's form token, as a browser
    posts a form: its line breaks as CRLF."""
    page = client.get("/admin/sign-in").get_data(as_text=True)
    return client.post("/admin/sign-in/wallet", headers={"Origin": origin}, data={
        "form_token": form_value(page, "form_token"), "next": form_value(page, "next"),
        "message": message.replace("\n", "\r\n"),
        "signature": signature, **fields})
