"""The console's pages and forms, through the test client: what each page shows, and what each form changes,
as the JSON API would (the same core functions behind both)."""

import re
import sqlite3
from datetime import timedelta
from html import unescape

import pytest
from alembic.script import ScriptDirectory
from eth_account import Account
from eth_account.messages import encode_typed_data
from sqlalchemy import update

from identity.storage import MIGRATIONS
from identity.storage.database import db
from identity.storage.models import Mirror, Webhook, WebhookDelivery, utcnow
from tests.common.apps import ADMIN_WALLET, OTHER_WALLET, USER_WALLET
from tests.common.console import form_value
from tests.wallets import address_of, private_key, sign_typed_data

CREATOR_PRIVATE_KEY = private_key("console creator")
CREATOR = address_of(CREATOR_PRIVATE_KEY)

PAGES = ("/admin/identities", "/admin/keys", "/admin/webhooks", "/admin/mirrors", "/admin/changes", "/admin/status")


def names_listed(page):
    return [unescape(name) for name in re.findall(r'<td><a href="/admin/identities/did[^"]*">([^<]*)</a></td>', page)]


def test_every_page_forbids_framing_inline_code_and_caching(console):
    for path in PAGES:
        answer = console.get(path)
        assert answer.status_code == 200, path
        policy = answer.headers["Content-Security-Policy"]
        assert "default-src 'self'" in policy and "frame-ancestors 'none'" in policy and "unsafe-inline" not in policy
        assert answer.headers["Cache-Control"] == "no-store"
        page = answer.get_data(as_text=True)
        # No inline script or style for the policy to refuse: the page's code is loaded from /admin/static.
        assert "<style" not in page and " style=" not in page and "<script>" not in page
        assert re.findall(r"<script[^>]*>", page) == ['<script src="/admin/static/console.js" defer>']
        # Every form that posts carries the session's token.
        assert page.count('method="post"') == len(re.findall(r'name="csrf_token" value="[\w-]{43}"', page)) >= 1


def test_identities_are_searched_filtered_sorted_and_paged_by_cursor(console, create, admin_key):
    for number in range(25):
        create({"display_name": f"Ada {number:02}", "description": "mathematician"})
    create({"display_name": "Grace Hopper", "description": "admiral"}, key=admin_key)
    create({"display_name": "Someone Else", "creator": OTHER_WALLET}, key=admin_key)

    first = console.text("/admin/identities")
    assert "<strong>27</strong> identities match" in first and len(names_listed(first)) == 20
    assert names_listed(first)[0] == "Someone Else"  # newest first
    following = unescape(re.search(r'href="([^"]+)" rel="next"', first).group(1))
    second = console.text(following)
    assert len(names_listed(second)) == 7 and "this is page 2" in second
    assert set(names_listed(first)).isdisjoint(names_listed(second))

    searched = console.text("/admin/identities?q=grace")
    assert names_listed(searched) == ["Grace Hopper"] and "<strong>1</strong> identity matches" in searched
    by_creator = console.text(f"/admin/identities?creator={OTHER_WALLET.lower()}")
    assert names_listed(by_creator) == ["Someone Else"]
    ascending = console.text("/admin/identities?sortBy=display_name&direction=asc&q=ada")
    assert names_listed(ascending)[:3] == ["Ada 00", "Ada 01", "Ada 02"]
    assert 'value="ada"' in ascending and '<option value="display_name" selected>' in ascending


def test_invalid_listing_parameters_are_a_page_that_names_them(console):
    answer = console.get("/admin/identities?creator=not-a-wallet&cursor=forged!")
    assert answer.status_code == 400
    page = answer.get_data(as_text=True)
    assert "The listing could not be read" in page and "creator" in page and "cursor" in page


def test_an_identity_page_shows_every_field_its_content_checked_against_its_id_and_its_history(console, create):
    created = create({"display_name": "Ada Lovelace", "description": "First programmer",
                      "external_reference": "https://example.org/ada"}).get_json()
    page = console.text(f"/admin/identities/{created['identity_id']}")
    for name, value in created.items():
        assert f"<dt>{name}</dt>" in page or name == "creator"
        if isinstance(value, str):
            assert unescape(value) in unescape(page), name
    assert "It hashes to its id" in page and created["identity_id"].split(":")[-1] in page
    assert unescape(page).count('{"description":"First programmer","display_name":"Ada Lovelace",'
                                '"external_reference":"https://example.org/ada"}') == 1
    assert USER_WALLET in page and ">created<" in page.replace("\n", "").replace(" ", "")


def test_an_identity_whose_content_does_not_hash_to_its_id_is_shown_so(console, create, app):
    created = create({"display_name": "Tampered"}).get_json()
    with app.app_context():
        db.session.execute(db.text("UPDATE identities SET display_name = 'Altered' WHERE identity_id = :id"),
                           {"id": created["identity_id"]})
        db.session.commit()
    page = console.text(f"/admin/identities/{created['identity_id']}")
    assert "It does not hash to its id" in page and "It hashes to its id" not in page


def test_an_unknown_identity_is_a_404_page(console):
    answer = console.get("/admin/identities/did:identity:ipfs:nothing")
    assert answer.status_code == 404 and "No Identity exists" in answer.get_data(as_text=True)


def test_take_down_and_restore_go_back_to_the_status_before(console, create, admin_key, client):
    identity_id = create({"display_name": "Pending one"}).get_json()["identity_id"]
    client.patch(f"/identity/{identity_id}", json={"status": "pending"}, headers={"x-api-key": admin_key})
    page = console.text(f"/admin/identities/{identity_id}")

    taken = console.post(f"/admin/identities/{identity_id}/status",
                         {"status": "removed", "etag": form_value(page, "etag")}, token=form_value(page, "csrf_token"))
    assert taken.status_code == 303
    page = console.text(taken.headers["Location"])
    assert "The identity is taken down" in page and "Restore" in page
    assert client.get(f"/identity/{identity_id}", headers={"x-api-key": admin_key}).status_code == 410

    restored = console.post(f"/admin/identities/{identity_id}/status",
                            {"status": form_value(page, "status"), "etag": form_value(page, "etag")})
    assert restored.status_code == 303
    assert client.get(f"/identity/{identity_id}", headers={"x-api-key": admin_key}).get_json()["status"] == "pending"
    entries = client.get(f"/identity/{identity_id}/changes", headers={"x-api-key": admin_key}).get_json()["data"]
    assert [entry["fields"]["status"] for entry in entries[-2:]] == [
        {"before": "pending", "after": "removed"}, {"before": "removed", "after": "pending"}]
    assert entries[-1]["wallet"] == ADMIN_WALLET


def test_take_down_after_someone_else_changed_it_changes_nothing_and_says_so(console, create, admin_key, client):
    identity_id = create({"display_name": "Contested"}).get_json()["identity_id"]
    page = console.text(f"/admin/identities/{identity_id}")
    # Meanwhile, another Admin changes it through the API.
    client.patch(f"/identity/{identity_id}", json={"vault_id": "7"}, headers={"x-api-key": admin_key})

    answer = console.post(f"/admin/identities/{identity_id}/status",
                          {"status": "removed", "etag": form_value(page, "etag")}, token=form_value(page, "csrf_token"))

    assert answer.status_code == 409
    shown = answer.get_data(as_text=True)
    assert "Someone else changed this identity after you opened it, so nothing was changed" in shown
    assert "<dd class=\"mono\">7</dd>" in shown  # the page shows it as it is now
    assert client.get(f"/identity/{identity_id}", headers={"x-api-key": admin_key}).get_json()["status"] == "complete"


def test_an_identity_named_like_markup_is_shown_as_text(console, create):
    name = "<img src=x onerror=alert(1)>"
    identity_id = create({"display_name": name, "description": "<script>alert(2)</script>"}).get_json()["identity_id"]
    for path in ("/admin/identities", f"/admin/identities/{identity_id}", "/admin/changes"):
        page = console.text(path)
        assert "<img src=x" not in page and "<script>alert" not in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in console.text("/admin/identities")


def test_a_key_issued_is_shown_once_and_then_never_again(console, client):
    answer = console.post("/admin/keys", {"wallet": OTHER_WALLET.lower(), "role": "User", "scope": "read",
                                          "label": "status page", "expires_in": "86400"})
    assert answer.status_code == 201
    page = answer.get_data(as_text=True)
    key = re.search(r'id="issued-key"[^>]*value="([^"]+)"', page).group(1)
    assert key.startswith("idsk_") and "shown on this page only" in page
    assert client.get("/me", headers={"x-api-key": key}).get_json()["key"]["label"] == "status page"
    for path in PAGES + ("/admin/keys?active=true",):
        assert key not in console.text(path)
    listing = console.text("/admin/keys")
    assert OTHER_WALLET in listing and "status page" in listing


def test_an_invalid_key_form_is_shown_again_with_what_to_correct(console):
    answer = console.post("/admin/keys", {"wallet": "0x123", "label": "x" * 200, "expires_in": "12"})
    assert answer.status_code == 422
    page = answer.get_data(as_text=True)
    assert "The key was not issued" in page and "wallet" in page and "label" in page and "expires_in" in page
    assert 'value="0x123"' in page


def test_a_key_is_revoked_after_a_confirmation_and_the_api_refuses_it(console, issue_key, client):
    key = issue_key(OTHER_WALLET, "User")
    listing = console.text(f"/admin/keys?wallet={OTHER_WALLET}")
    confirm = unescape(re.search(r'href="(/admin/keys/[^"]+/revoke)"', listing).group(1))
    confirmation = console.text(confirm)
    assert "Revoke this key?" in confirmation and OTHER_WALLET in confirmation
    assert client.get("/me", headers={"x-api-key": key}).status_code == 200  # the confirmation changed nothing

    answer = console.post(confirm, token=form_value(confirmation, "csrf_token"))

    assert answer.status_code == 303 and "The key is revoked" in console.text(answer.headers["Location"])
    assert client.get("/me", headers={"x-api-key": key}).status_code == 401
    assert "Revoke…" not in console.text(f"/admin/keys?wallet={OTHER_WALLET}&active=false")


@pytest.mark.parametrize("path", ["/admin/keys/not-a-key/revoke", "/admin/webhooks/5f0c1b52-0000-4000-8000-000000000000",
                                  "/admin/webhooks/not-a-uuid", "/admin/nowhere"])
def test_unknown_things_are_404_pages(console, path):
    answer = console.get(path)
    assert answer.status_code == 404 and answer.mimetype == "text/html"


def test_a_webhook_is_registered_with_its_secret_shown_once_paused_resumed_and_deleted(console, app, create):
    answer = console.post("/admin/webhooks", {"url": "https://hooks.example.com/identity", "description": "Index"})
    assert answer.status_code == 201
    page = answer.get_data(as_text=True)
    secret = re.search(r'id="webhook-secret"[^>]*value="([^"]+)"', page).group(1)
    assert secret.startswith("whsec_")
    webhook_path = re.search(r'href="(/admin/webhooks/[0-9a-f-]{36})"', page).group(1)
    create({"display_name": "Delivered later"})
    with app.app_context():
        db.session.add(WebhookDelivery(webhook_id=webhook_path.rsplit("/", 1)[1], seq=1, attempt=1, at=utcnow(),
                                       duration_ms=12, status=503, error=None))
        db.session.commit()

    shown = console.text(webhook_path)
    assert "1 entry behind" in shown and "503" in shown and "12 ms" in shown and secret not in shown
    assert "1 entry behind" in console.text("/admin/status")
    paused = console.post(webhook_path + "/pause", token=form_value(shown, "csrf_token"))
    assert "The webhook is paused" in console.text(paused.headers["Location"])
    assert "paused" in console.text("/admin/webhooks")
    resumed = console.post(webhook_path + "/resume")
    assert "The webhook is resumed" in console.text(resumed.headers["Location"])
    for path in PAGES:
        assert secret not in console.text(path)
    assert "Delete this webhook?" in console.text(webhook_path + "/delete")
    deleted = console.post(webhook_path + "/delete")
    assert "The webhook is deleted" in console.text(deleted.headers["Location"])
    assert "No webhook is registered" in console.text("/admin/webhooks")


def test_a_webhook_to_a_private_address_is_refused_on_the_form(console):
    answer = console.post("/admin/webhooks", {"url": "http://10.0.0.1/hook"})
    assert answer.status_code == 422
    assert "private address" in answer.get_data(as_text=True)


def test_the_changes_page_lists_the_latest_entries_without_javascript(console, create):
    for number in range(3):
        create({"display_name": f"Entry {number}"})
    page = console.text("/admin/changes")
    rows = [int(seq) for seq in re.findall(r"<tr>\s*<td>(\d+)</td>", page)]
    assert len(rows) == 3 and rows == sorted(rows, reverse=True)  # newest first
    assert f'data-stream="/admin/changes/stream?after={rows[0]}"' in page  # the script follows on from the last


def test_the_status_page_shows_readiness_migration_database_and_counts(app, console, create, backend):
    create({"display_name": "Counted"})
    page = console.text("/admin/status")
    head = ScriptDirectory(MIGRATIONS).get_current_head()
    assert "Ready:" in page and head in page and "(the latest)" in page
    assert ("sqlite" if backend == "sqlite" else "postgresql") in page
    assert re.search(r"<dt>identities complete</dt><dd>1</dd>", page)
    assert "Mirror lag" in page


ODD = ["\x00", "\ud800", "x" * 5000, "' OR 1=1 --", "%00", "../../etc/passwd", "<b>", "99999999999999999999999"]


@pytest.mark.parametrize("odd", ODD, ids=range(len(ODD)))
def test_odd_input_anywhere_is_a_page_that_says_what_is_wrong_never_a_failure(console, create, app, odd):
    identity_id = create({"display_name": "Target"}).get_json()["identity_id"]
    safe = odd.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    answers = [console.get(path, query_string=query) for path, query in (
        ("/admin/identities", {"q": safe, "creator": safe, "status": safe, "sortBy": safe, "direction": safe}),
        ("/admin/identities", {"cursor": safe}),
        ("/admin/keys", {"wallet": safe, "active": safe, "cursor": safe}),
        ("/admin/identities/" + safe.replace("/", "%2F"), None),
        ("/admin/keys/" + safe.replace("/", "%2F") + "/revoke", None),
        ("/admin/changes/stream", {"after": safe}),
        ("/admin/sign-in", {"next": safe}),
    )]
    answers[5].close()  # a stream: it started, which is all this asks of it
    token = console.token()
    answers += [
        console.post("/admin/keys", {"wallet": safe, "role": safe, "scope": safe, "label": safe, "expires_in": safe},
                     token=token),
        console.post("/admin/webhooks", {"url": safe, "description": safe}, token=token),
        console.post("/admin/mirrors", {"url": safe, "key": safe, "name": safe}, token=token),
        console.post("/admin/mirrors/" + safe.replace("/", "%2F") + "/key", {"key": safe}, token=token),
        console.post(f"/admin/identities/{identity_id}/status", {"status": safe, "etag": safe}, token=token),
        console.post(f"/admin/identities/{identity_id}/status", {"status": "removed", "etag": safe}, token=token),
        console.post("/admin/identities/" + safe.replace("/", "%2F") + "/status", {"status": "removed"}, token=token),
        console.post("/admin/keys/" + safe.replace("/", "%2F") + "/revoke", token=token),
        console.post("/admin/sign-in", {"form_token": safe, "key": safe}),
    ]
    other = app.test_client()
    other.set_cookie("identity_console", safe[:4000], path="/admin")
    answers.append(other.get("/admin/identities"))
    for answer in answers:
        assert answer.status_code < 500, (answer.request.path, answer.get_data(as_text=True)[-500:])
        assert answer.mimetype in ("text/html", "text/event-stream"), answer.request.path


def test_an_identity_signed_by_its_creator_through_the_api_shows_signed(console, client, issue_key, create, ethers):
    creator_key = issue_key(CREATOR)
    body = {"display_name": "Signed by Ada"}
    typed = client.post("/identity/preview", json=body, headers={"x-api-key": creator_key}).get_json()["typed_data"]
    signature = sign_typed_data([(CREATOR_PRIVATE_KEY, typed)])[0]
    signed = create({**body, "signature": signature}, key=creator_key)
    assert signed.status_code == 201, signed.text
    unsigned = create({"display_name": "Not signed"}).get_json()

    page = console.text(f"/admin/identities/{signed.get_json()['identity_id']}")
    assert "<dt>signature</dt><dd>signed</dd>" in page and signature.lower() in page
    assert "<dt>signature</dt><dd>not signed</dd>" in console.text(f"/admin/identities/{unsigned['identity_id']}")


def test_a_signature_that_is_not_the_creators_is_said_so():
    """The service stores only its creator's signature; a database edited by hand may hold another."""
    from identity.console.identities import signature_state
    from identity.core import authorship

    creator, other = Account.create(), Account.create()
    content_id = "bafkreiauec3k6frevgndewoeehfrezbh7tsnc2clpumvqiwoszmh6gqywu"
    signed = encode_typed_data(full_message=authorship.typed_data(content_id))
    record = {"content_id": content_id, "creator": {"wallet": creator.address}}
    assert signature_state({**record, "creator_signature": None}) == "not signed"
    by_creator = Account.sign_message(signed, creator.key).signature.to_0x_hex()
    assert signature_state({**record, "creator_signature": by_creator}) == "signed"
    by_other = Account.sign_message(signed, other.key).signature.to_0x_hex()
    assert signature_state({**record, "creator_signature": by_other}) == "does not recover to the creator"
    assert signature_state({**record, "creator_signature": "0x1234"}) == "does not recover to the creator"


@pytest.mark.parametrize("app_config", [{"IDENTITY_MIRRORS_FOLLOW": False}])  # registered, never followed
def test_the_status_page_shows_each_mirrors_lag(console, client, admin_key, app):
    assert "No mirror is registered" in console.text("/admin/status")
    for name, url in (("replica", "http://127.0.0.1:9"), ("far", "https://identity.example.org/registry")):
        answer = client.post("/mirrors", json={"url": url, "key": "idsk_upstream-key-never-shown", "name": name},
                             headers={"x-api-key": admin_key})
        assert answer.status_code == 201, answer.text
    with app.app_context():
        db.session.execute(update(Mirror).where(Mirror.name == "far").values(
            upstream_head=1_250, position=250, position_at=utcnow() - timedelta(seconds=30), applied=240,
            already_present=8, rejected=2, last_error="the upstream answered 503", last_error_at=utcnow(), active=False))
        db.session.commit()

    page = unescape(console.text("/admin/status"))

    items = re.findall(r"<li><strong>(.*?)</li>", page, re.S)
    assert [item.split("<", 1)[0] for item in items] == ["replica", "far"]
    replica, far = (" ".join(item.split()) for item in items)
    assert "http://127.0.0.1:9" in replica and "active" in replica and "none behind" in replica
    assert "at entry 0 of the upstream's 0" in replica and "0 rejected" in replica and "Last error" not in replica
    assert "paused" in far and "at entry 250 of the upstream's 1,250" in far
    assert re.search(r"1,000 entries behind \(3\d\.\d s\)", far)
    assert "240 applied, 8 already here, 2 rejected" in far and "the upstream answered 503" in far
    assert "upstream-key" not in page


def test_a_stalled_webhook_is_shown_so_with_what_to_do(console, client, admin_key, app):
    webhook = client.post("/webhooks", json={"url": "https://hooks.example.com/identity"},
                          headers={"x-api-key": admin_key}).get_json()
    assert "stalled" not in console.text("/admin/webhooks")
    # As after a restore of an older backup that did not raise the feed's sequence: its position is past the end.
    with app.app_context():
        db.session.execute(update(Webhook).where(Webhook.id == webhook["id"]).values(position=10**12))
        db.session.commit()

    for path in ("/admin/webhooks", "/admin/status"):
        page = console.text(path)
        assert '<span class="badge badge-error">stalled</span>' in page and "up to date" not in page, path
    page = unescape(console.text(f"/admin/webhooks/{webhook['id']}"))
    assert "Stalled: Its position, 1000000000000, is beyond the feed's end" in page and "docs/backup.md" in page


@pytest.mark.parametrize("app_config", [{"IDENTITY_SQLITE_BUSY_TIMEOUT_MS": 100}])
def test_a_database_that_cannot_take_the_change_is_a_page_that_says_so(console, create, database_path):
    identity_id = create({"display_name": "Locked out"}).get_json()["identity_id"]
    page = console.text(f"/admin/identities/{identity_id}")
    holder = sqlite3.connect(database_path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process holds the write lock, longer than the busy timeout
    try:
        answer = console.post(f"/admin/identities/{identity_id}/status",
                              {"status": "removed", "etag": form_value(page, "etag")}, token=form_value(page, "csrf_token"))
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert answer.status_code == 503 and answer.mimetype == "text/html"
    assert "locked" in answer.get_data(as_text=True) and "Nothing was changed" in answer.get_data(as_text=True)
    assert "complete" in console.text(f"/admin/identities/{identity_id}")
