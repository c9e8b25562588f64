"""Signing in to the console and out: a session cookie that carries no key, ends when it should, and that the
JSON API never accepts."""

import logging
from datetime import timedelta

from sqlalchemy import update

from identity.core import keys
from identity.storage.database import db
from identity.storage.models import ConsoleSession, utcnow
from tests.common.apps import ADMIN_WALLET
from tests.common.console import ORIGIN, form_value, sign_in


def cookie_header(response, name):
    return next(value for value in response.headers.getlist("Set-Cookie") if value.startswith(name + "="))


def test_pages_send_a_visitor_who_is_not_signed_in_to_the_sign_in_page(client):
    answer = client.get("/admin/keys?wallet=0xabc")
    assert answer.status_code == 302
    assert answer.headers["Location"] == "/admin/sign-in?next=/admin/keys?wallet%3D0xabc"
    assert "Admin API key" in client.get(answer.headers["Location"]).get_data(as_text=True)


def test_an_admin_key_signs_in_to_a_session_cookie_that_holds_a_token_not_the_key(client, admin_key):
    answer = sign_in(client, admin_key)

    assert answer.status_code == 303
    cookie = cookie_header(answer, "identity_console")
    token = cookie.split(";")[0].split("=", 1)[1]
    assert len(token) >= 43 and admin_key not in cookie and token not in admin_key
    attributes = {part.strip().split("=")[0] for part in cookie.split(";")[1:]}
    assert attributes == {"HttpOnly", "Path", "SameSite"}  # no Expires: it ends with the browser
    assert "Path=/admin" in cookie and "SameSite=Strict" in cookie
    home = client.get(answer.headers["Location"])
    assert home.status_code == 302 and home.headers["Location"] == "/admin/identities"
    page = client.get("/admin/identities").get_data(as_text=True)
    assert ADMIN_WALLET in page and "Sign out" in page
    assert admin_key not in page


def test_the_cookie_is_secure_when_the_request_came_over_https(app, admin_key):
    client = app.test_client()
    page = client.get("/admin/sign-in", base_url="https://console.example").get_data(as_text=True)
    answer = client.post("/admin/sign-in", base_url="https://console.example",
                         data={"form_token": form_value(page, "form_token"), "key": admin_key},
                         headers={"Origin": "https://console.example"})
    assert answer.status_code == 303
    assert "; Secure" in cookie_header(answer, "identity_console")


def test_sign_in_returns_to_the_page_asked_for_and_never_elsewhere(app, admin_key):
    for asked, landing in (("/admin/keys?active=true", "/admin/keys?active=true"),
                           ("https://evil.example/admin/", "/admin/"), ("//evil.example/admin/", "/admin/")):
        client = app.test_client()
        page = client.get("/admin/sign-in", query_string={"next": asked}).get_data(as_text=True)
        answer = client.post("/admin/sign-in", data={"form_token": form_value(page, "form_token"), "key": admin_key,
                                                     "next": form_value(page, "next")}, headers={"Origin": ORIGIN})
        assert answer.headers["Location"] == landing


def test_an_unknown_key_is_refused_on_the_sign_in_page_saying_what_to_do(client):
    answer = sign_in(client, "idsk_" + "x" * 43)
    assert answer.status_code == 401
    page = answer.get_data(as_text=True)
    assert "does not work" in page and "--role Admin" in page
    assert "identity_console=" not in " ".join(answer.headers.getlist("Set-Cookie"))


def test_a_user_key_is_refused_with_a_page_that_says_why(client, user_key):
    answer = sign_in(client, user_key)
    assert answer.status_code == 403
    page = answer.get_data(as_text=True)
    assert "This key may not use the console" in page and "User key" in page and "Admin" in page
    assert client.get("/admin/identities").status_code == 302


def test_a_sign_in_form_without_its_token_is_refused(client, admin_key):
    client.get("/admin/sign-in")
    answer = client.post("/admin/sign-in", data={"form_token": "forged", "key": admin_key}, headers={"Origin": ORIGIN})
    assert answer.status_code == 403
    assert client.get("/admin/identities").status_code == 302


def test_sign_out_ends_the_session_everywhere(console, app):
    cookie = console.client.get_cookie("identity_console", path="/admin").value
    answer = console.post("/admin/sign-out")
    assert answer.status_code == 303 and answer.headers["Location"] == "/admin/sign-in?done=signed-out"
    assert "You are signed out" in console.client.get(answer.headers["Location"]).get_data(as_text=True)
    # The same cookie, replayed by another browser, opens nothing.
    other = app.test_client()
    other.set_cookie("identity_console", cookie, path="/admin")
    assert other.get("/admin/identities").status_code == 302


def test_a_session_ends_at_once_when_its_key_is_revoked(console, app, admin_key):
    with app.app_context():
        key_id = keys.caller_of(admin_key).key_id
        keys.revoke_key(key_id=key_id)
    assert console.get("/admin/identities").status_code == 302


def test_a_session_ends_when_its_key_expires(app, console_for):
    with app.app_context():
        key, api_key = keys.issue_key(ADMIN_WALLET, "Admin", expires_in=60)
    console = console_for(key)
    assert console.get("/admin/identities").status_code == 200
    with app.app_context():
        db.session.execute(update(type(api_key)).where(type(api_key).id == api_key.id).values(
            expires_at=utcnow() - timedelta(seconds=1)))
        db.session.commit()
    assert console.get("/admin/identities").status_code == 302


def test_a_session_ends_after_twelve_hours(console, app):
    assert console.get("/admin/status").status_code == 200
    with app.app_context():
        row = db.session.execute(db.select(ConsoleSession)).scalar_one()
        assert timedelta(hours=11, minutes=59) < row.expires_at - row.created_at <= timedelta(hours=12)
        db.session.execute(update(ConsoleSession).values(expires_at=utcnow() - timedelta(seconds=1)))
        db.session.commit()
    assert console.get("/admin/status").status_code == 302


def test_the_json_api_never_accepts_the_consoles_cookie(console):
    answer = console.get("/identities")
    assert answer.status_code == 401
    assert answer.mimetype == "application/problem+json"
    assert console.get("/keys").status_code == 401
    assert console.client.post("/identity", json={"display_name": "by cookie"}).status_code == 401


def test_the_key_never_reaches_a_log_line(app, admin_key, caplog):
    caplog.set_level(logging.DEBUG)
    client = app.test_client()
    sign_in(client, admin_key)
    client.get("/admin/keys")
    text = "\n".join(record.getMessage() + " " + str(record.__dict__) for record in caplog.records)
    assert "console sign-in by " + ADMIN_WALLET in text
    assert admin_key not in text
    token = client.get_cookie("identity_console", path="/admin").value
    assert token not in text


def test_a_read_only_admin_key_gets_the_console_without_anything_that_writes(console_for, read_only_admin_key, create):
    identity_id = create({"display_name": "Read only"}).get_json()["identity_id"]
    console = console_for(read_only_admin_key)
    for path in ("/admin/identities", f"/admin/identities/{identity_id}", "/admin/keys", "/admin/webhooks",
                 "/admin/mirrors", "/admin/changes", "/admin/status"):
        page = console.text(path)
        assert "read-only" in page
        # One form posts: Sign out.
        assert page.count('method="post"') == 1 and "/admin/sign-out" in page, path
    token = console.token("/admin/identities")
    answer = console.post(f"/admin/identities/{identity_id}/status", {"status": "removed", "etag": "x"}, token=token)
    assert answer.status_code == 403 and "read-only" in answer.get_data(as_text=True)
    assert console.post("/admin/sign-out", token=token).status_code == 303
