"""What keeps the console's forms and its live feed to the signed-in Admin on the console's own pages: the
Origin check, the session's CSRF token, and the session behind the event stream."""

import json
import time
from html import unescape

import pytest
from sqlalchemy import update

from identity.core import keys, sessions
from identity.storage.database import db
from identity.storage.models import ApiKey
from tests.common.apps import ADMIN_WALLET
from tests.common.console import ORIGIN, form_value

CHANGES = ("/admin/keys", {"wallet": "0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB"})


def keys_issued(console):
    return console.text("/admin/keys").count("<td>write</td>") + console.text("/admin/keys").count("<td>read</td>")


def test_a_form_from_another_origin_is_refused_and_changes_nothing(console):
    before = keys_issued(console)
    answer = console.post(*CHANGES, origin="https://evil.example")
    assert answer.status_code == 403
    assert "was not sent from the console's own pages" in unescape(answer.get_data(as_text=True))
    assert "https://evil.example" in answer.get_data(as_text=True)
    assert keys_issued(console) == before


def test_a_form_without_origin_is_judged_by_its_referer(console):
    token = console.token()
    refused = console.client.post(CHANGES[0], data={**CHANGES[1], "csrf_token": token},
                                  headers={"Referer": "https://evil.example/page"})
    assert refused.status_code == 403
    nothing = console.client.post(CHANGES[0], data={**CHANGES[1], "csrf_token": token})
    assert nothing.status_code == 403
    broken = console.client.post(CHANGES[0], data={**CHANGES[1], "csrf_token": token},
                                 headers={"Referer": "http://[::1/admin/keys"})
    assert broken.status_code == 403
    accepted = console.client.post(CHANGES[0], data={**CHANGES[1], "csrf_token": token},
                                   headers={"Referer": ORIGIN + "/admin/keys"})
    assert accepted.status_code == 201


@pytest.mark.parametrize("token", ["", "forged"])
def test_a_form_without_the_sessions_token_is_refused(console, token):
    before = keys_issued(console)
    answer = console.post(*CHANGES, token=token)
    assert answer.status_code == 403 and "did not carry the console's token" in unescape(answer.get_data(as_text=True))
    assert keys_issued(console) == before


def test_one_sessions_token_does_not_serve_another_session(console_for, admin_key):
    first, second = console_for(admin_key), console_for(admin_key)
    assert first.post(*CHANGES, token=second.token()).status_code == 403
    assert first.post(*CHANGES, token=first.token()).status_code == 201


def test_sign_in_from_another_origin_is_refused(client, admin_key):
    page = client.get("/admin/sign-in").get_data(as_text=True)
    answer = client.post("/admin/sign-in", data={"form_token": form_value(page, "form_token"), "key": admin_key},
                         headers={"Origin": "https://evil.example"})
    assert answer.status_code == 403
    assert client.get("/admin/identities").status_code == 302


def test_the_live_feed_needs_a_session(client):
    answer = client.get("/admin/changes/stream")
    assert answer.status_code == 401 and answer.mimetype == "text/html"


def test_the_live_feed_streams_whole_entries_and_ends_with_its_session(console, create, app):
    created = create({"display_name": "Streamed"}).get_json()
    response = console.get("/admin/changes/stream?after=0", buffered=False)
    assert response.mimetype == "text/event-stream" and response.headers["Cache-Control"] == "no-store"
    chunks = iter(response.response)
    assert next(chunks).decode() == ": ok\n"
    event = next(chunks).decode()
    data = json.loads(event.split("data: ", 1)[1])
    assert data["identity_id"] == created["identity_id"] and data["kind"] == "created" and "wallet" in data

    with app.app_context():
        sessions.close_session(console.client.get_cookie("identity_console", path="/admin").value)
    deadline = time.monotonic() + 10
    for _ in chunks:  # the hub asks the session again every second, and lets the stream go
        assert time.monotonic() < deadline, "the stream outlived its session"


@pytest.mark.parametrize("change", ["demoted", "scope narrowed"])
def test_the_live_feed_ends_when_its_wallet_is_no_longer_an_admins_or_its_scope_narrows(console, app, admin_key, change):
    response = console.get("/admin/changes/stream", buffered=False)
    chunks = iter(response.response)
    assert next(chunks).decode() == ": ok\n"
    with app.app_context():
        if change == "demoted":
            keys.issue_key(ADMIN_WALLET, "User")  # the wallet's new role
        else:  # no route narrows a key's scope; the stream follows the row all the same
            key_id = keys.caller_of(admin_key).key_id
            db.session.execute(update(ApiKey).where(ApiKey.id == key_id).values(scope="read"))
            db.session.commit()
    deadline = time.monotonic() + 10
    for chunk in chunks:  # the hub asks the session again every second, and lets the stream go
        assert time.monotonic() < deadline, "the stream outlived what its session was opened with"
        assert chunk.startswith(b":"), "an entry was sent after the session lost its Admin's view"
    if change == "demoted":  # the page's script reconnects, and a User's session is let in nowhere
        assert console.get("/admin/changes/stream").status_code == 401
