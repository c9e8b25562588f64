"""Sign-ins with Ethereum in the audit log, on SQLite and on PostgreSQL: one that passes is an entry naming its
wallet and the key it issued; one refused is an entry too, committed although the sign-in fails; never the
signature. Through POST /auth/siwe and the console's wallet form."""

import pytest

from tests.common.audit import assert_no_secret, entries, only
from tests.common.console import ADMIN, ADMIN_KEY, USER, USER_KEY, wallet_sign_in
from tests.common.console import signed as console_signed
from tests.wallets import address_of, private_key, sign_messages, siwe_message

DOMAIN = "localhost"
KEY = private_key("audit signer")
WALLET = address_of(KEY)


@pytest.fixture
def app_config():
    return {"IDENTITY_SIWE_DOMAIN": DOMAIN, "IDENTITY_SIWE_URI": "http://localhost",
            "IDENTITY_RATELIMIT_SIGNIN": "100000/minute"}


@pytest.fixture(autouse=True)
def _signer(ethers):
    """Every test here signs with ethers (installed once)."""


def signed(client, key=KEY, **fields):
    nonce = client.get("/auth/nonce").get_json()["nonce"]
    message = siwe_message(DOMAIN, address_of(key), nonce, uri="http://localhost", **fields)
    return message, sign_messages([(key, message)])[0]


def test_a_sign_in_is_an_entry_naming_its_wallet_and_key_and_a_refused_one_too(app, client):
    message, signature = signed(client)
    answer = client.post("/auth/siwe", json={"message": message, "signature": signature})
    assert answer.status_code == 201
    again = client.post("/auth/siwe", json={"message": message, "signature": signature})  # its nonce is spent
    assert again.status_code == 401
    done, refused = entries(app, "signin.siwe")
    assert (done["outcome"], done["actor"]["wallet"], done["actor"]["via"]) == ("ok", WALLET, "api")
    assert done["target"] == {"kind": "key", "id": answer.get_json()["id"]}
    assert done["after"]["scope"] == "write"
    assert (refused["outcome"], refused["actor"]["wallet"], refused["detail"]) == ("refused", WALLET, "check 4 (nonce)")
    assert refused["target"] == {"kind": "signin", "id": WALLET}
    assert_no_secret(app, signature, signature[2:], answer.get_json()["key"])


def test_a_signature_by_another_wallet_is_a_refusal_at_check_6(app, client):
    message, _ = signed(client)
    _, other = signed(client, private_key("someone else"))
    assert client.post("/auth/siwe", json={"message": message, "signature": other}).status_code == 401
    refused = only(app, "signin.siwe")
    assert refused["outcome"] == "refused" and refused["detail"] == "check 6 (signature)"
    assert_no_secret(app, other[2:])


def test_the_consoles_wallet_sign_in_opens_a_session_and_a_users_wallet_is_refused(app, client, issue_key):
    issue_key(ADMIN, "Admin")
    issue_key(USER, "User")
    (admin_message, admin_signature), (user_message, user_signature) = console_signed(client, ADMIN_KEY, USER_KEY)
    assert wallet_sign_in(app.test_client(), admin_message, admin_signature).status_code == 303
    assert wallet_sign_in(app.test_client(), user_message, user_signature).status_code == 403
    opened, refused = entries(app, "session.open")
    assert (opened["outcome"], opened["actor"]["wallet"], opened["actor"]["via"]) == ("ok", ADMIN, "console")
    assert opened["after"] == {"way": "wallet"}
    assert (refused["outcome"], refused["actor"]["wallet"], refused["actor"]["role"]) == ("refused", USER, "User")
    assert only(app, "signin.siwe")["actor"]["wallet"] == ADMIN
    assert_no_secret(app, admin_signature[2:], user_signature[2:])
