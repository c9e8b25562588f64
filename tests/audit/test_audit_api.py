"""The audit log through the HTTP API, on SQLite and on PostgreSQL: each Admin action leaves its entry, with
who (wallet, key, via), what, the fields before and after, and where from; never a secret; a plain create
leaves none; GET /audit reads it with its filters and cursor; /metrics names the head."""

import re
from datetime import UTC, datetime, timedelta

import pytest

from identity.core import keys
from tests.common.apps import ADMIN_WALLET, USER_WALLET
from tests.common.audit import assert_no_secret, entries, only, verified

OTHER_WALLET = "0x1111111111111111111111111111111111111111"
UPSTREAM_KEY = "idsk_the-upstreams-own-key-never-in-the-log"
HOOK_URL = "https://hooks.example.com/identity"


def auth(key):
    return {"x-api-key": key, "User-Agent": "audit-test/1.0", "X-Request-ID": "req-" + key[-6:]}


@pytest.fixture
def admin_id(app):
    """The Admin key's id (the one admin_key issued)."""
    with app.app_context():
        return next(key.id for key in keys.all_keys() if key.user.wallet == ADMIN_WALLET)


def test_issuing_rotating_and_revoking_a_key_each_leave_an_entry_naming_the_admin_and_never_the_key(
        app, client, admin_key, admin_id):
    issued = client.post("/keys", json={"wallet": OTHER_WALLET, "scope": "read", "label": "ci"}, headers=auth(admin_key))
    assert issued.status_code == 201
    new_id = issued.json["id"]
    rotated = client.post(f"/keys/{new_id}/rotate", json={"grace_seconds": 60}, headers=auth(admin_key))
    assert rotated.status_code == 201
    assert client.delete(f"/keys/{rotated.json['id']}", headers=auth(admin_key)).status_code == 204

    entry = only(app, "key.rotate")
    assert entry["target"] == {"kind": "key", "id": new_id}
    assert entry["before"] == {"revoked_at": None}
    assert entry["after"]["replaced_by"] == rotated.json["id"] and entry["after"]["grace_seconds"] == 60
    issue = [e for e in entries(app, "key.issue") if e["target"]["id"] == new_id][0]
    assert issue["actor"] == {"user_id": issue["actor"]["user_id"], "wallet": ADMIN_WALLET, "role": "Admin",
                              "key_id": admin_id, "key_hint": admin_key[:9], "via": "api"}
    assert issue["after"]["wallet"] == OTHER_WALLET and issue["after"]["scope"] == "read"
    assert issue["request_id"] == "req-" + admin_key[-6:] == issued.headers["X-Request-ID"]
    assert issue["client_address"] == "127.0.0.1" and issue["user_agent"] == "audit-test/1.0"
    revoke = only(app, "key.revoke")
    assert revoke["target"]["id"] == rotated.json["id"] and revoke["before"] == {"revoked_at": None}
    assert revoke["after"]["revoked_at"] is not None and revoke["outcome"] == "ok"
    assert_no_secret(app, admin_key, issued.json["key"], rotated.json["key"])
    assert verified(app).finding is None


def test_a_key_sent_as_user_agent_or_request_id_is_not_kept(app, client, admin_key, user_key):
    headers = {"x-api-key": admin_key, "User-Agent": f"curl {user_key}", "X-Request-ID": user_key}
    assert client.post("/keys", json={"wallet": OTHER_WALLET}, headers=headers).status_code == 201
    entry = [entry for entry in entries(app, "key.issue") if entry["actor"]["via"] == "api"][0]
    assert entry["user_agent"] == "(withheld: it held an API key)" and entry["request_id"] != user_key
    assert_no_secret(app, user_key, admin_key)


@pytest.mark.parametrize(("peer", "kept"), [
    ("2001:db8:1:2:3:4:5:6", "2001:db8:1:2:3:4:5:6"),  # the whole address, not the /64 a budget counts by
    ("::ffff:203.0.113.9", "203.0.113.9"),  # an IPv4 client of a dual-stack socket
    ("203.0.113.7", "203.0.113.7"),
])
def test_an_entry_keeps_the_clients_own_address(app, client, admin_key, peer, kept):
    answer = client.post("/keys", json={"wallet": OTHER_WALLET}, headers=auth(admin_key), environ_base={"REMOTE_ADDR": peer})
    assert answer.status_code == 201
    assert only(app, "key.issue", via="api")["client_address"] == kept


def test_a_users_role_changed_by_issuing_it_a_key_is_an_entry_with_the_role_before_and_after(app, client, admin_key,
                                                                                              user_key):
    assert client.post("/keys", json={"wallet": USER_WALLET, "role": "Admin"}, headers=auth(admin_key)).status_code == 201
    entry = only(app, "user.role")
    assert entry["target"] == {"kind": "user", "id": USER_WALLET}
    assert (entry["before"], entry["after"]) == ({"role": "User"}, {"role": "Admin"})
    assert entry["actor"]["wallet"] == ADMIN_WALLET


def test_a_refused_rotation_leaves_no_entry_of_a_rotation(app, client, admin_key):
    issued = client.post("/keys", json={"wallet": OTHER_WALLET}, headers=auth(admin_key)).json
    client.delete(f"/keys/{issued['id']}", headers=auth(admin_key))
    assert client.post(f"/keys/{issued['id']}/rotate", json={}, headers=auth(admin_key)).status_code == 409
    assert entries(app, "key.rotate") == []


def test_a_plain_create_leaves_no_entry(app, create):
    before = len(entries(app))
    assert create({"display_name": "Ada"}).status_code == 201
    assert len(entries(app)) == before


def test_an_admin_route_refused_to_a_user_key_is_an_entry_of_its_refusal(app, client, user_key):
    assert client.get("/keys", headers=auth(user_key)).status_code == 403
    assert client.post("/webhooks", json={"url": HOOK_URL}, headers=auth(user_key)).status_code == 403
    refused = entries(app, "admin_route.refuse")
    assert [entry["target"] for entry in refused] == [{"kind": "route", "id": "GET /keys"},
                                                      {"kind": "route", "id": "POST /webhooks"}]
    assert {entry["outcome"] for entry in refused} == {"refused"}
    assert {entry["actor"]["wallet"] for entry in refused} == {USER_WALLET}




@pytest.mark.parametrize("app_config", [{"IDENTITY_RATELIMIT_READ": "3/minute", "IDENTITY_RATELIMIT_CREATE": "2/minute"}])
def test_refusals_on_admin_routes_spend_the_keys_budget_and_past_it_are_429s_without_entries(app, client, user_key):
    reads = [client.get("/keys", headers=auth(user_key)) for _ in range(6)]
    writes = [client.post("/webhooks", json={"url": HOOK_URL}, headers=auth(user_key)) for _ in range(5)]
    assert [answer.status_code for answer in reads] == [403, 403, 403, 429, 429, 429]
    assert [answer.status_code for answer in writes] == [403, 403, 429, 429, 429]
    assert reads[0].headers["X-RateLimit-Remaining"] == "2" and "Retry-After" in reads[-1].headers
    assert reads[-1].json["status"] == 429 and "Retry-After" in reads[-1].json["detail"]
    refused = entries(app, "admin_route.refuse")
    assert [entry["target"]["id"] for entry in refused] == ["GET /keys"] * 3 + ["POST /webhooks"] * 2
    # The refusals spent the key's own budget: its next read of a route it may use waits as well.
    assert client.get("/identities", headers=auth(user_key)).status_code == 429
    assert len(entries(app, "admin_route.refuse")) == 5
def test_webhooks_registered_paused_resumed_changed_and_removed_each_leave_an_entry_without_the_secret(
        app, client, admin_key):
    created = client.post("/webhooks", json={"url": HOOK_URL, "description": "index"}, headers=auth(admin_key)).json
    hook = f"/webhooks/{created['id']}"
    for body in ({"active": False}, {"active": True}, {"description": "search index"}):
        assert client.patch(hook, json=body, headers=auth(admin_key)).status_code == 200
    assert client.delete(hook, headers=auth(admin_key)).status_code == 204
    found = [entry for entry in entries(app) if entry["target"]["kind"] == "webhook"]
    assert [entry["action"] for entry in found] == [
        "webhook.register", "webhook.pause", "webhook.resume", "webhook.change", "webhook.remove"]
    assert {entry["target"]["id"] for entry in found} == {created["id"]}
    assert found[0]["after"]["url"] == HOOK_URL
    assert (found[1]["before"], found[1]["after"]) == ({"active": True}, {"active": False})
    assert (found[3]["before"], found[3]["after"]) == ({"description": "index"}, {"description": "search index"})
    assert found[4]["before"]["description"] == "search index"
    assert_no_secret(app, created["secret"])


def test_mirrors_registered_paused_rekeyed_and_removed_each_leave_an_entry_without_the_upstreams_key(
        app, client, admin_key):
    created = client.post("/mirrors", json={"url": "http://10.0.0.7:8000/", "key": UPSTREAM_KEY, "name": "replica"},
                          headers=auth(admin_key)).json
    path = f"/mirrors/{created['id']}"
    assert client.patch(path, json={"active": False}, headers=auth(admin_key)).status_code == 200
    assert client.patch(path, json={"active": True}, headers=auth(admin_key)).status_code == 200
    assert client.patch(path, json={"key": UPSTREAM_KEY + "-2"}, headers=auth(admin_key)).status_code == 200
    assert client.delete(path, headers=auth(admin_key)).status_code == 204
    found = [entry for entry in entries(app) if entry["target"]["kind"] == "mirror"]
    assert [entry["action"] for entry in found] == [
        "mirror.register", "mirror.pause", "mirror.resume", "mirror.change", "mirror.remove"]
    assert found[0]["after"] == {"name": "replica", "url": "http://10.0.0.7:8000", "active": True}
    assert found[3]["after"]["key"] == "(replaced)"
    assert_no_secret(app, UPSTREAM_KEY, "the-upstreams-own-key")


def test_curation_takes_down_restores_and_changes_figures_each_with_the_fields_before_and_after(
        app, client, create, admin_key):
    identity_id = create({"display_name": "Ada"}).json["identity_id"]
    path = f"/identity/{identity_id}"
    assert client.patch(path, json={"status": "removed"}, headers=auth(admin_key)).status_code == 200
    assert client.patch(path, json={"status": "complete"}, headers=auth(admin_key)).status_code == 200
    assert client.patch(path, json={"num_positions": 7, "assets_sum": "12"}, headers=auth(admin_key)).status_code == 200
    assert client.patch(path, json={"num_positions": 7}, headers=auth(admin_key)).status_code == 200  # no change
    found = [entry for entry in entries(app) if entry["target"]["kind"] == "identity"]
    assert [entry["action"] for entry in found] == ["identity.take_down", "identity.restore", "identity.curate"]
    assert {entry["target"]["id"] for entry in found} == {identity_id}
    assert (found[0]["before"], found[0]["after"]) == ({"status": "complete"}, {"status": "removed"})
    assert (found[2]["before"], found[2]["after"]) == ({"num_positions": 0, "assets_sum": "0"},
                                                       {"num_positions": 7, "assets_sum": "12"})
    assert found[2]["actor"]["wallet"] == ADMIN_WALLET and found[2]["actor"]["via"] == "api"


# --- reading ------------------------------------------------------------------------------------------

@pytest.fixture
def logged(app, client, admin_key):
    """Five entries: three keys issued for OTHER_WALLET by the Admin, one revoked, one Admin route refused."""
    ids = [client.post("/keys", json={"wallet": OTHER_WALLET}, headers=auth(admin_key)).json["id"] for _ in range(3)]
    client.delete(f"/keys/{ids[0]}", headers=auth(admin_key))
    return ids


def test_get_audit_lists_newest_first_with_hashes_that_chain(client, admin_key, logged):
    page = client.get("/audit", headers=auth(admin_key))
    assert page.status_code == 200
    data = page.json["data"]
    seqs = [entry["seq"] for entry in data]
    assert seqs == sorted(seqs, reverse=True)
    for newer, older in zip(data, data[1:], strict=False):
        assert newer["prev_hash"] == older["hash"] and re.fullmatch(r"[0-9a-f]{64}", newer["hash"])
    assert data[0]["action"] == "key.revoke" and data[0]["target"]["id"] == logged[0]


def test_get_audit_filters_by_actor_action_target_and_time(client, admin_key, logged):
    def listed(**query):
        answer = client.get("/audit", query_string=query, headers=auth(admin_key))
        assert answer.status_code == 200, answer.json
        return answer.json["data"]

    assert {entry["actor"]["wallet"] for entry in listed(actor=ADMIN_WALLET.lower())} == {ADMIN_WALLET}
    assert len(listed(actor=ADMIN_WALLET, action="key.issue")) == 3
    assert [entry["action"] for entry in listed(target=logged[0])] == ["key.revoke", "key.issue"]
    now = datetime.now(UTC)
    assert len(listed(since=(now - timedelta(minutes=5)).isoformat(), action="key.issue", actor=ADMIN_WALLET)) == 3
    assert listed(until=(now - timedelta(minutes=5)).isoformat()) == []
    assert listed(since=(now + timedelta(minutes=5)).isoformat()) == []


def test_get_audit_pages_with_its_cursor_and_a_cursor_keeps_its_filters(client, admin_key, logged):
    first = client.get(f"/audit?action=key.issue&actor={ADMIN_WALLET}&limit=2", headers=auth(admin_key)).json
    assert len(first["data"]) == 2 and first["next"]
    second = client.get("/audit", query_string={"cursor": first["next"]}, headers=auth(admin_key)).json
    assert [entry["action"] for entry in second["data"]] == ["key.issue"] and second["next"] is None
    assert second["data"][0]["seq"] < first["data"][-1]["seq"]
    changed = client.get("/audit", query_string={"cursor": first["next"], "action": "key.revoke"},
                         headers=auth(admin_key))
    assert changed.status_code == 400 and "action" in changed.json["errors"]
    forged = client.get("/audit?cursor=abc.def", headers=auth(admin_key))
    assert forged.status_code == 400 and "cursor" in forged.json["errors"]


@pytest.mark.parametrize("query, name", [("actor=0x12", "actor"), ("limit=0", "limit"), ("since=yesterday", "since"),
                                         ("action=Key%20Revoke", "action"), ("wallet=0x1", "wallet")])
def test_get_audit_refuses_a_bad_parameter_naming_it(client, admin_key, query, name):
    answer = client.get(f"/audit?{query}", headers=auth(admin_key))
    assert answer.status_code == 400 and answer.mimetype == "application/problem+json"
    assert name in answer.json["errors"]


def test_a_read_only_admin_key_may_read_the_audit_log_and_a_user_key_may_not(app, client, user_key):
    with app.app_context():
        reader, _ = keys.issue_key(ADMIN_WALLET, "Admin", scope="read")
    assert client.get("/audit", headers=auth(reader)).status_code == 200
    assert client.get("/audit", headers=auth(user_key)).status_code == 403
    assert client.get("/audit").status_code == 401


def test_metrics_name_the_heads_seq_and_hash(app, client, logged):
    head = verified(app)
    text = client.get("/metrics").get_data(as_text=True)
    assert f'identity_audit_head{{hash="{head.head_hash}"}} {float(head.head_seq)}' in text
    assert head.head_seq == len(entries(app))
