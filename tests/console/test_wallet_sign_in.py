"""Signing in to the console with an Admin wallet: the EIP-4361 message the console writes for the wallet's
account (GET /admin/sign-in/wallet/message), signed by an independent wallet (ethers, run by node) and posted
through the wallet form as the page's script posts it, on SQLite and on PostgreSQL. The checks are POST
/auth/siwe's; only an Admin's wallet opens a session, which holds a key issued for it."""

import logging
import re
from datetime import UTC, datetime, timedelta

import pytest
from eth_utils import is_checksum_address, to_checksum_address

from identity.core import keys, siwe, users
from identity.storage.database import db
from identity.storage.models import ApiKey, SpentNonce, User
from tests.common.console import (
    ADMIN,
    ADMIN_KEY,
    JSON,
    MESSAGE_URL,
    ORIGIN,
    USER,
    USER_KEY,
    form_value,
    offered,
    signed,
    wallet_sign_in,
)
from tests.wallets import address_of, private_key, sign_messages

DOMAIN = "localhost"  # the test client's host, as the browser's page would name it
STRANGER_KEY = private_key("console stranger")
SIWE = {"IDENTITY_SIWE_DOMAIN": DOMAIN, "IDENTITY_SIWE_URI": ORIGIN}


@pytest.fixture
def app_config():
    return SIWE


@pytest.fixture(autouse=True)
def _wallets(ethers, issue_key):
    """ethers installed once; ADMIN is an Admin's wallet and USER a User's (each issued a key by the CLI's way)."""
    issue_key(ADMIN, "Admin")
    issue_key(USER, "User")








def keys_labelled(app, label):
    with app.app_context():
        rows = db.session.execute(db.select(ApiKey).where(ApiKey.label == label)).scalars().all()
        db.session.commit()
        return rows


def test_the_sign_in_page_has_the_wallet_form_for_the_script_to_show(client):
    page = client.get("/admin/sign-in").get_data(as_text=True)
    # Hidden until wallet.js shows it: without JavaScript, the key's form alone.
    assert re.search(r'<section id="wallet-sign-in"[^>]* hidden', page)
    assert re.findall(r"<script[^>]*>", page) == ['<script src="/admin/static/console.js" defer>',
                                                   '<script src="/admin/static/wallet.js" defer>']
    assert f'data-message-url="{MESSAGE_URL}"' in page and 'action="/admin/sign-in/wallet"' in page
    assert " style=" not in page and "<style" not in page


def nonces_spent(app):
    with app.app_context():
        count = db.session.execute(db.select(db.func.count()).select_from(SpentNonce)).scalar_one()
        db.session.commit()
        return count


def test_the_console_writes_the_message_for_the_wallets_account_in_its_checksummed_form(app, client):
    answer = offered(client, ADMIN.lower(), chain_id="10")

    assert answer.status_code == 200 and answer.mimetype == "application/json"
    assert answer.headers["Cache-Control"] == "no-store"
    body = answer.get_json()
    assert set(body) == {"message", "address", "nonce", "expires_at", "domain", "uri"}
    message = siwe.parse(body["message"])
    # The address line, read without the parser: the wallet's account in its EIP-55 form.
    line = body["message"].split("\n")[1]
    assert line == body["address"] == ADMIN == to_checksum_address(ADMIN.lower()) and is_checksum_address(line)
    assert message == siwe.SiweMessage(
        domain=DOMAIN, address=ADMIN, statement="Sign in to the Identity service's console.", uri=ORIGIN,
        version="1", chain_id=10, nonce=body["nonce"], issued_at=message.issued_at,
    )
    now = datetime.now(UTC)
    assert now - timedelta(seconds=5) < message.issued_at <= now
    # No Expiration Time, which would end the session with the nonce; the nonce's expiry bounds the message.
    nonce_expires = datetime.fromisoformat(body["expires_at"])
    assert timedelta(seconds=595) < nonce_expires - now <= timedelta(seconds=600)
    assert nonces_spent(app) == 0  # issuing a nonce stores nothing
    # Signed as it is, it signs in, once.
    [signature] = sign_messages([(ADMIN_KEY, body["message"])])
    assert wallet_sign_in(client, body["message"], signature).status_code == 303
    again = wallet_sign_in(app.test_client(), body["message"], signature)
    assert again.status_code == 401 and "check 4 (nonce)" in again.get_data(as_text=True)
    assert nonces_spent(app) == 1


@pytest.mark.parametrize("address, chain_id, wrong", [
    ("0x1234", "1", {"address"}),
    ("", "1", {"address"}),
    (None, "1", {"address"}),
    ("0x" + "g" * 40, "1", {"address"}),
    (ADMIN + "00", "1", {"address"}),
    (ADMIN.lower(), "0x1", {"chain_id"}),
    (ADMIN.lower(), "-1", {"chain_id"}),
    (ADMIN.lower(), "", {"chain_id"}),
    (ADMIN.lower(), None, {"chain_id"}),
    (ADMIN.lower(), str(2**256), {"chain_id"}),
    (ADMIN.lower(), "1" * 5000, {"chain_id"}),
    (ADMIN.lower(), "\u0661", {"chain_id"}),  # a digit, but not an ASCII one
    ("wallet", "mainnet", {"address", "chain_id"}),
])
def test_an_address_or_chain_that_a_wallet_would_not_answer_is_400_naming_it_and_issues_no_nonce(
        app, client, address, chain_id, wrong):
    query = {name: value for name, value in (("address", address), ("chain_id", chain_id)) if value is not None}
    answer = client.get(MESSAGE_URL, query_string=query, headers=JSON)

    assert answer.status_code == 400 and answer.mimetype == "application/problem+json"
    problem = answer.get_json()
    assert set(problem["errors"]) == wrong
    if "address" in wrong:
        assert "expected 0x and 40 hex digits, the account the wallet's eth_requestAccounts" in problem["errors"]["address"][0]
    if "chain_id" in wrong:
        assert "in decimal digits" in problem["errors"]["chain_id"][0]
    assert nonces_spent(app) == 0
    # Opened in the browser rather than by the page's script: the same, as a page.
    page = client.get(MESSAGE_URL, query_string=query)
    assert page.status_code == 400 and page.mimetype == "text/html"


@pytest.mark.parametrize("app_config", [{**SIWE, "IDENTITY_RATELIMIT_SIGNIN": "2/minute"}])
def test_the_message_spends_the_budget_of_get_auth_nonce(client):
    assert client.get("/auth/nonce").status_code == 200
    assert offered(client, ADMIN.lower()).status_code == 200

    spent = offered(client, ADMIN.lower())

    assert spent.status_code == 429 and spent.mimetype == "application/problem+json"
    assert int(spent.headers["Retry-After"]) >= 1
    assert "Too many sign-in nonces from this address" in spent.get_json()["detail"]
    assert client.get("/auth/nonce").status_code == 429


@pytest.mark.parametrize("app_config", [{**SIWE, "IDENTITY_RATELIMIT_SIGNIN": "3/minute"}])
def test_messages_asked_from_many_ipv6_64s_keep_no_admin_from_signing_in(app, client):
    for network in range(300):
        for _ in range(3):
            asked = client.get(MESSAGE_URL, query_string={"address": ADMIN.lower(), "chain_id": "1"}, headers=JSON,
                               environ_base={"REMOTE_ADDR": f"2001:db8:{network:x}::{_ + 1}"})
            assert asked.status_code == 200
    assert nonces_spent(app) == 0
    [(message, signature)] = signed(client, ADMIN_KEY)
    assert wallet_sign_in(client, message, signature).status_code == 303


def test_an_admin_wallet_signs_in_to_a_session_holding_a_key_issued_for_it(app, client):
    [(message, signature)] = signed(client, ADMIN_KEY)
    answer = wallet_sign_in(client, message, signature)

    assert answer.status_code == 303 and answer.headers["Location"] == "/admin/"
    cookie = next(value for value in answer.headers.getlist("Set-Cookie") if value.startswith("identity_console="))
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/admin" in cookie
    page = client.get("/admin/keys").get_data(as_text=True)
    assert ADMIN in page and "Sign out" in page and "read-only" not in page
    [key] = keys_labelled(app, "console sign-in")
    assert (key.scope, key.created_by, key.revoked_at) == ("write", "siwe", None)
    lasts = key.expires_at - key.created_at
    assert timedelta(hours=11, minutes=59) < lasts <= timedelta(hours=12)  # the session's twelve hours
    with app.app_context():
        assert db.session.execute(db.select(User.last_login).where(User.wallet == ADMIN)).scalar_one() is not None
        db.session.commit()
    # The session writes, as one of an Admin key does.
    issued = client.post("/admin/keys", data={"csrf_token": form_value(page, "csrf_token"), "wallet": USER},
                         headers={"Origin": ORIGIN})
    assert issued.status_code == 201


def test_revoking_the_sessions_key_ends_the_session(app, client):
    [(message, signature)] = signed(client, ADMIN_KEY)
    assert wallet_sign_in(client, message, signature).status_code == 303
    assert client.get("/admin/status").status_code == 200
    [key] = keys_labelled(app, "console sign-in")
    with app.app_context():
        keys.revoke_key(key_id=key.id)
    assert client.get("/admin/status").status_code == 302


def test_a_read_only_wallet_session_is_asked_for_and_writes_nothing(app, client):
    [(message, signature)] = signed(client, ADMIN_KEY)
    assert wallet_sign_in(client, message, signature, scope="read").status_code == 303
    page = client.get("/admin/keys").get_data(as_text=True)
    assert "read-only" in page and page.count('method="post"') == 1  # Sign out
    assert [key.scope for key in keys_labelled(app, "console sign-in")] == ["read"]


def test_a_user_wallet_is_refused_with_a_page_that_says_why_and_nothing_issued(app, client):
    (user_message, user_signature), (stranger_message, stranger_signature) = signed(client, USER_KEY, STRANGER_KEY)

    answer = wallet_sign_in(client, user_message, user_signature)

    assert answer.status_code == 403
    page = answer.get_data(as_text=True)
    assert "This wallet may not use the console" in page and f"The wallet {USER} is a User&#39;s" in page
    assert "--role Admin" in page
    assert "identity_console=" not in " ".join(answer.headers.getlist("Set-Cookie"))
    assert client.get("/admin/identities").status_code == 302
    # A wallet the service never saw is refused alike, and stays unknown.
    stranger = wallet_sign_in(client, stranger_message, stranger_signature)
    assert stranger.status_code == 403 and "is not known to this service" in stranger.get_data(as_text=True)
    assert client.get(f"/users/{address_of(STRANGER_KEY)}", headers={"x-api-key": _admin_key(app)}).status_code == 404
    assert keys_labelled(app, "console sign-in") == []
    # The nonce was spent all the same: the message cannot be tried again.
    again = wallet_sign_in(client, user_message, user_signature)
    assert again.status_code == 401 and "check 4 (nonce)" in again.get_data(as_text=True)


def _admin_key(app):
    with app.app_context():
        return keys.issue_key(ADMIN, "Admin")[0]


def test_a_replayed_message_is_refused_by_its_spent_nonce(app, client):
    [(message, signature)] = signed(client, ADMIN_KEY)
    assert wallet_sign_in(client, message, signature).status_code == 303

    other = app.test_client()
    answer = wallet_sign_in(other, message, signature)

    assert answer.status_code == 401
    page = answer.get_data(as_text=True)
    assert "The wallet's sign-in was refused. Sign-in refused at check 4 (nonce)" in page
    assert other.get("/admin/identities").status_code == 302
    assert len(keys_labelled(app, "console sign-in")) == 1


def test_a_cross_site_post_is_refused_before_the_nonce_is_spent(app, client):
    [(message, signature)] = signed(client, ADMIN_KEY)

    answer = wallet_sign_in(client, message, signature, origin="https://evil.example")

    assert answer.status_code == 403
    assert "was not sent from the console's own pages" in answer.get_data(as_text=True).replace("&#39;", "'")
    assert client.get("/admin/identities").status_code == 302
    assert keys_labelled(app, "console sign-in") == []
    # Nothing was spent: the same message, from the console's own page, signs in.
    assert wallet_sign_in(client, message, signature).status_code == 303


def test_a_form_without_the_pages_token_is_refused(client):
    [(message, signature)] = signed(client, ADMIN_KEY)
    client.get("/admin/sign-in")
    answer = client.post("/admin/sign-in/wallet", data={"form_token": "forged", "message": message,
                                                        "signature": signature}, headers={"Origin": ORIGIN})
    assert answer.status_code == 403 and "sign-in form has expired" in answer.get_data(as_text=True)
    assert wallet_sign_in(client, message, signature).status_code == 303


def test_each_failed_check_is_the_sign_in_page_naming_it(client):
    now = datetime.now(UTC)
    [(other_site, other_site_signature)] = signed(client, ADMIN_KEY, domain="evil.example")
    [(expired, expired_signature)] = signed(client, ADMIN_KEY, expiration_time=now - timedelta(minutes=1),
                                            issued_at=now - timedelta(minutes=2))
    [(message, _)] = signed(client, ADMIN_KEY)
    [(_, wrong_signature)] = signed(client, STRANGER_KEY)
    for text, signature, status, says in (
        (other_site, other_site_signature, 401, "check 2 (domain)"),
        (expired, expired_signature, 401, "check 5 (times)"),
        (message, wrong_signature, 401, "check 6 (signature)"),
        (message.replace(ADMIN, ADMIN.lower()), wrong_signature, 422, "line 2"),
        ("", "", 422, "not an EIP-4361"),
        ("\x00" * 9000, "0x" + "1" * 5000, 422, "longer than"),
    ):
        answer = wallet_sign_in(client, text, signature)
        assert answer.status_code == status and answer.mimetype == "text/html"
        page = answer.get_data(as_text=True)
        assert says in page and 'id="wallet-error"' in page, says
    assert client.get("/admin/identities").status_code == 302


def test_neither_message_nor_signature_reaches_a_log_line(client, caplog):
    caplog.set_level(logging.DEBUG)
    (refused, refused_signature), (message, signature) = signed(client, USER_KEY, ADMIN_KEY)
    wallet_sign_in(client, refused, refused_signature)
    wallet_sign_in(client, message, signature)
    text = "\n".join(record.getMessage() + " " + str(record.__dict__) for record in caplog.records)
    assert f"console sign-in by {ADMIN}" in text and f"refused to the wallet {USER}" in text
    assert f"issued for {ADMIN} by the console's sign-in with Ethereum" in text
    for secret in (refused_signature[2:], signature[2:], message, refused):
        assert secret not in text


@pytest.mark.parametrize("app_config", [{}])
def test_without_sign_in_with_ethereum_there_is_no_wallet_button_and_no_route(client):
    page = client.get("/admin/sign-in").get_data(as_text=True)
    assert "wallet" not in page.lower() and "Admin API key" in page
    answer = client.post("/admin/sign-in/wallet", data={"message": "x", "signature": "y"}, headers={"Origin": ORIGIN})
    assert answer.status_code == 404 and "IDENTITY_SIWE_DOMAIN" in answer.get_data(as_text=True)
    for address in (ADMIN.lower(), "not an address"):
        message = offered(client, address)
        assert message.status_code == 404 and message.mimetype == "application/problem+json"
        assert "IDENTITY_SIWE_DOMAIN" in message.get_json()["detail"]


def test_an_admin_wallet_granted_read_only_is_asked_to_sign_in_read_only_and_then_is(app, client):
    """A sign-in never gives a wallet more than it was granted: the console's as the API's."""
    with app.app_context():
        users.set_grant(ADMIN, "read")
    [(message, signature)] = signed(client, ADMIN_KEY)

    answer = wallet_sign_in(client, message, signature)

    assert answer.status_code == 403
    page = answer.get_data(as_text=True)
    assert f"{ADMIN} is granted read access only" in page and "Read-only" in page
    assert "identity_console=" not in " ".join(answer.headers.getlist("Set-Cookie"))
    assert keys_labelled(app, "console sign-in") == []
    # Its nonce is spent; a fresh message, asked read-only, opens a read-only session.
    assert "check 4 (nonce)" in wallet_sign_in(client, message, signature, scope="read").get_data(as_text=True)
    [(message, signature)] = signed(client, ADMIN_KEY)
    assert wallet_sign_in(client, message, signature, scope="read").status_code == 303
    assert [key.scope for key in keys_labelled(app, "console sign-in")] == ["read"]


def test_the_console_key_form_grants_a_new_wallet_its_keys_scope_and_the_keys_page_shows_grants(app, client):
    [(message, signature)] = signed(client, ADMIN_KEY)
    assert wallet_sign_in(client, message, signature).status_code == 303
    token = form_value(client.get("/admin/keys").get_data(as_text=True), "csrf_token")
    stranger = address_of(STRANGER_KEY)
    issued = client.post("/admin/keys", data={"csrf_token": token, "wallet": stranger, "scope": "read"},
                         headers={"Origin": ORIGIN})
    assert issued.status_code == 201
    with app.app_context():
        grants = dict(db.session.execute(db.select(User.wallet, User.grant)).all())
        db.session.commit()
    assert grants == {ADMIN: "write", USER: "write", stranger: "read"}
    page = client.get("/admin/keys").get_data(as_text=True)
    assert ">Grant</abbr></th>" in page
    rows = re.findall(r"<tr>\s*<td class=\"mono\">(0x[0-9a-fA-F]{40})</td>\s*<td>(\w+)</td>\s*<td>(\w+)</td>", page)
    assert (stranger, "User", "read") in rows and (ADMIN, "Admin", "write") in rows
