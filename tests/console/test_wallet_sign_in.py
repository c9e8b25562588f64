"""Signing in to the console with an Admin wallet: an EIP-4361 message signed by an independent wallet (ethers, run
by node) and posted through the wallet form as the page's script posts it, on SQLite and on PostgreSQL. The checks
are POST /auth/siwe's; only an Admin's wallet opens a session, which holds a key issued for it."""

import logging
import re
from datetime import UTC, datetime, timedelta

import pytest

from identity.core import keys
from identity.storage.database import db
from identity.storage.models import ApiKey, User
from tests.console.conftest import ORIGIN, form_value
from tests.wallets import address_of, private_key, sign_messages, siwe_message

DOMAIN = "localhost"  # the test client's host, as the browser's page would name it
ADMIN_KEY = private_key("console admin")
ADMIN = address_of(ADMIN_KEY)
USER_KEY = private_key("console user")
USER = address_of(USER_KEY)
STRANGER_KEY = private_key("console stranger")


@pytest.fixture
def app_config():
    return {"IDENTITY_SIWE_DOMAIN": DOMAIN, "IDENTITY_SIWE_URI": ORIGIN}


@pytest.fixture(autouse=True)
def _wallets(ethers, issue_key):
    """ethers installed once; ADMIN is an Admin's wallet and USER a User's (each issued a key by the CLI's way)."""
    issue_key(ADMIN, "Admin")
    issue_key(USER, "User")


def signed(client, *private_keys, **message_fields):
    """For each private key, a message for a fresh nonce of GET /auth/nonce (its domain and uri, as the page's
    script builds it) and ethers' personal_sign signature of it; one run of node for them all."""
    domain, messages = message_fields.pop("domain", None), []
    for key in private_keys:
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
    assert 'data-nonce-url="/auth/nonce"' in page and 'action="/admin/sign-in/wallet"' in page
    assert " style=" not in page and "<style" not in page


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
