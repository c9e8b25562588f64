"""The audit log through the console, on SQLite and on PostgreSQL: sessions opened and ended, a User key refused,
keys issued and revoked, identities taken down and restored, webhooks registered and paused, each via console
with the session's Admin as the actor; and the Audit page with GET /audit's filters."""

import re

from tests.common.apps import ADMIN_WALLET, USER_WALLET
from tests.common.audit import assert_no_secret, entries, only
from tests.common.console import Console, form_value, sign_in

OTHER_WALLET = "0x1111111111111111111111111111111111111111"


def test_a_session_opened_and_ended_and_a_user_key_refused_are_entries(app, admin_key, user_key):
    client = app.test_client()
    assert sign_in(client, user_key).status_code == 403
    assert sign_in(client, admin_key).status_code == 303
    assert Console(client).post("/admin/sign-out").status_code == 303
    opened = [entry for entry in entries(app, "session.open")]
    assert [(entry["outcome"], entry["actor"]["wallet"]) for entry in opened] == [
        ("refused", USER_WALLET), ("ok", ADMIN_WALLET)]
    assert {entry["actor"]["via"] for entry in opened} == {"console"}
    closed = only(app, "session.close")
    assert closed["actor"]["wallet"] == ADMIN_WALLET and closed["target"] == opened[1]["target"]
    assert opened[1]["actor"]["key_hint"] == admin_key[:9]
    assert_no_secret(app, admin_key, user_key)


def test_keys_issued_and_revoked_identities_taken_down_and_webhooks_paused_on_the_console(app, console, create,
                                                                                        admin_key):
    page = console.post("/admin/keys", {"wallet": OTHER_WALLET, "role": "", "scope": "read", "label": "",
                                        "expires_in": ""})
    assert page.status_code == 201
    issued = only(app, "key.issue", via="console")
    assert issued["actor"]["via"] == "console" and issued["actor"]["wallet"] == ADMIN_WALLET
    assert console.post(f"/admin/keys/{issued['target']['id']}/revoke").status_code == 303
    assert only(app, "key.revoke")["target"]["id"] == issued["target"]["id"]

    identity_id = create({"display_name": "Ada"}).get_json()["identity_id"]
    shown = console.text(f"/admin/identities/{identity_id}")
    assert console.post(f"/admin/identities/{identity_id}/status", {"status": "removed", "etag": form_value(
        shown, "etag")}, token=form_value(shown, "csrf_token")).status_code == 303
    taken = only(app, "identity.take_down")
    assert (taken["actor"]["via"], taken["target"]["id"], taken["after"]) == ("console", identity_id,
                                                                              {"status": "removed"})

    registered = console.post("/admin/webhooks", {"url": "https://hooks.example.com/identity", "description": "x"})
    assert registered.status_code == 201
    secret = re.search(r"whsec_[A-Za-z0-9+/=]+", registered.get_data(as_text=True)).group(0)
    hook = only(app, "webhook.register")
    assert console.post(f"/admin/webhooks/{hook['target']['id']}/pause").status_code == 303
    assert only(app, "webhook.pause")["actor"]["via"] == "console"
    assert_no_secret(app, secret, admin_key)


def test_the_audit_page_lists_the_entries_with_the_filters_and_says_what_is_wrong(app, console, issue_key):
    issue_key(OTHER_WALLET)
    page = console.text("/admin/audit")
    assert "key.issue" in page and "session.open" in page and 'aria-current="page"' in page
    filtered = console.text(f"/admin/audit?action=session.open&actor={ADMIN_WALLET.lower()}")
    assert "session.open" in filtered and "key.issue" not in filtered
    wrong = console.get("/admin/audit?actor=0x12&since=yesterday")
    assert wrong.status_code == 400
    text = wrong.get_data(as_text=True)
    assert "actor" in text and "since" in text


def test_the_audit_page_pages_with_its_cursor(app, console, issue_key):
    for number in range(25):
        issue_key(f"0x{number + 1:040x}")
    first = console.text("/admin/audit?action=key.issue")
    assert first.count("key.issue</td>") == 20 and 'rel="next"' in first
    following = re.search(r'<a href="([^"]+)" rel="next">', first).group(1).replace("&amp;", "&")
    second = console.text(following)
    assert second.count("key.issue</td>") == 6 and 'rel="next"' not in second
