"""Keys and users over HTTP: /me, the Admin routes of /keys, /users, scopes, expiry and rotation."""

import logging
import re
import time
from datetime import datetime, timedelta

import pytest
from sqlalchemy import select, update

from identity.core import key_use
from identity.storage.database import db
from identity.storage.models import ApiKey, utcnow
from tests.common.apps import ADMIN_WALLET, OTHER_WALLET, USER_WALLET

KEY = re.compile(r"idsk_[A-Za-z0-9_-]{43}")
READ_ONLY = "This API key is read-only"
KEY_FIELDS = {
    "id", "wallet", "role", "scope", "label", "created_at", "expires_at", "last_used_at", "revoked_at", "created_by",
}
MISSING_KEY_ID = "00000000-0000-4000-8000-000000000000"


def auth(key):
    return {"x-api-key": key}


@pytest.fixture
def issue(client, admin_key):
    """issue(**body) -> the 201 body of POST /keys (an Admin key issues it), the wallet defaulting to USER_WALLET."""

    def post(**body):
        response = client.post("/keys", json={"wallet": USER_WALLET, **body}, headers=auth(admin_key))
        assert response.status_code == 201, response.get_json()
        return response.get_json()

    return post


def set_key(app, key_id, **values):
    """Change a key's row behind the service's back, as another node or the passing of time would."""
    with app.app_context():
        db.session.execute(update(ApiKey).where(ApiKey.id == key_id).values(**values))
        db.session.commit()


def without_request_id(response):
    return {name: value for name, value in response.headers.items() if name != "X-Request-ID"}


# --- /me -------------------------------------------------------------------------------------------

def test_me_shows_the_calling_key_and_its_user(client, issue):
    issued = issue(scope="read", label="status page")
    body = client.get("/me", headers=auth(issued["key"])).get_json()
    assert body["user"]["wallet"] == USER_WALLET and body["user"]["role"] == "User" and body["user"]["api_key"] == ""
    assert set(body["key"]) == KEY_FIELDS
    assert body["key"]["id"] == issued["id"]
    assert (body["key"]["scope"], body["key"]["label"], body["key"]["created_by"]) == ("read", "status page", ADMIN_WALLET)


def test_a_key_issued_on_the_command_line_says_cli_made_it(client, user_key):
    key = client.get("/me", headers=auth(user_key)).get_json()["key"]
    assert (key["created_by"], key["scope"], key["label"], key["expires_at"]) == ("cli", "write", None, None)


# --- POST /keys and what an issued key is ------------------------------------------------------------

def test_an_admin_issues_a_key_that_works_and_is_shown_once(client, admin_key, issue):
    issued = issue(label="CI", role="User")
    assert KEY.fullmatch(issued["key"])
    assert set(issued) == KEY_FIELDS | {"key"}
    assert issued["wallet"] == USER_WALLET and issued["scope"] == "write" and issued["revoked_at"] is None
    created = client.post("/identity", json={"display_name": "by the new key"}, headers=auth(issued["key"]))
    assert created.status_code == 201
    fetched = client.get(f"/keys/{issued['id']}", headers=auth(admin_key))
    assert fetched.status_code == 200
    assert fetched.get_json() == {name: value for name, value in issued.items() if name != "key"} | {
        "last_used_at": fetched.get_json()["last_used_at"]
    }


def test_create_key_answers_location_of_the_key(client, admin_key):
    response = client.post("/keys", json={"wallet": OTHER_WALLET.lower()}, headers=auth(admin_key))
    assert response.status_code == 201
    assert response.headers["Location"] == f"/keys/{response.get_json()['id']}"
    assert response.get_json()["wallet"] == OTHER_WALLET  # a new wallet became a User
    assert response.get_json()["role"] == "User"


def test_a_key_with_expires_in_expires_that_many_seconds_after_it_is_issued(issue):
    issued = issue(expires_in=3600)
    expires_at, created_at = (datetime.fromisoformat(issued[name].replace("Z", "+00:00")) for name in ("expires_at", "created_at"))
    assert expires_at - created_at == timedelta(seconds=3600)


@pytest.mark.parametrize(
    "body, field",
    [
        ({"wallet": "0x123"}, "wallet"),
        ({}, "wallet"),
        ({"wallet": USER_WALLET, "scope": "admin"}, "scope"),
        ({"wallet": USER_WALLET, "role": "Root"}, "role"),
        ({"wallet": USER_WALLET, "expires_in": 59}, "expires_in"),
        ({"wallet": USER_WALLET, "expires_in": 10 * 365 * 86_400 + 1}, "expires_in"),
        ({"wallet": USER_WALLET, "expires_in": "3600"}, "expires_in"),
        ({"wallet": USER_WALLET, "label": ""}, "label"),
        ({"wallet": USER_WALLET, "label": "x" * 129}, "label"),
        ({"wallet": USER_WALLET, "label": "a\u0000b"}, "label"),
        ({"wallet": USER_WALLET, "key": "idsk_mine"}, "key"),
    ],
)
def test_an_invalid_key_request_is_422_naming_the_field(client, admin_key, body, field):
    response = client.post("/keys", json=body, headers=auth(admin_key))
    assert response.status_code == 422
    assert response.mimetype == "application/problem+json"
    assert field in response.get_json()["errors"]


# --- who may do what --------------------------------------------------------------------------------

def test_a_user_key_may_not_see_or_manage_keys(client, admin_key, user_key):
    admin_key_id = client.get("/me", headers=auth(admin_key)).get_json()["key"]["id"]
    calls = [
        ("GET", "/keys", None), ("GET", f"/keys?wallet={USER_WALLET}", None), ("GET", f"/keys/{admin_key_id}", None),
        ("POST", "/keys", {"wallet": USER_WALLET, "role": "Admin"}),
        ("POST", f"/keys/{admin_key_id}/rotate", {}), ("DELETE", f"/keys/{admin_key_id}", None),
    ]
    for method, path, body in calls:
        response = client.open(path, method=method, json=body, headers=auth(user_key))
        assert response.status_code == 403, (method, path)
        assert response.get_json()["detail"] == "Only an Admin key may do this."
        assert admin_key not in response.get_data(as_text=True)
    assert client.get("/identity/x", headers=auth(admin_key)).status_code == 404  # the Admin key still works


def placeholder_path(rule):
    # A key's, webhook's or mirror's id must look like one (a UUID) for its route to match at all.
    return re.sub(
        r"<(?:[^:>]+:)?([^>]+)>",
        lambda m: MISSING_KEY_ID if m.group(1) in ("key_id", "webhook_id", "mirror_id") else "x", rule.rule,
    )


@pytest.mark.parametrize("role", ["User", "Admin"])
def test_a_read_only_key_gets_403_on_every_post_and_patch(app, client, issue, role):
    read_key = issue(scope="read", role=role, wallet=ADMIN_WALLET if role == "Admin" else USER_WALLET)["key"]
    # Sign-in takes no key (a read key sent with it is not looked at): the routes a key may call.
    routes = [
        (method, placeholder_path(rule))
        for rule in app.url_map.iter_rules()
        # The API's routes (the console's forms go by its session) but sign-in's, which take no key.
        if rule.endpoint.startswith("identities.") and not rule.rule.startswith("/auth/")
        for method in sorted(rule.methods & {"POST", "PATCH", "PUT"})
    ]
    assert {("POST", "/identity"), ("PATCH", "/identity/x"), ("POST", "/keys"), ("POST", "/me/key/rotate")} <= set(routes)
    for method, path in routes:
        response = client.open(path, method=method, json={"display_name": "x"}, headers=auth(read_key))
        assert response.status_code == 403, (method, path, response.get_json())
        assert response.mimetype == "application/problem+json"
        assert response.get_json()["detail"].startswith(READ_ONLY)
    assert client.get("/identities", headers=auth(read_key)).status_code == 200  # and it reads


def test_a_read_only_admin_key_reads_keys_and_changes_none(client, issue):
    read_admin = issue(scope="read", role="Admin", wallet=ADMIN_WALLET)
    other = issue()
    assert client.get("/keys", headers=auth(read_admin["key"])).status_code == 200
    assert client.get(f"/keys/{other['id']}", headers=auth(read_admin["key"])).status_code == 200
    refused = client.delete(f"/keys/{other['id']}", headers=auth(read_admin["key"]))
    assert refused.status_code == 403 and refused.get_json()["detail"].startswith(READ_ONLY)
    assert client.get("/me", headers=auth(other["key"])).status_code == 200  # not revoked


def test_a_read_only_key_may_revoke_itself(client, issue):
    read_key = issue(scope="read")["key"]
    assert client.delete("/me/key", headers=auth(read_key)).status_code == 204
    assert client.get("/me", headers=auth(read_key)).status_code == 401


# --- expiry -----------------------------------------------------------------------------------------

def test_an_expired_key_gets_exactly_the_401_of_an_unknown_key(app, client, issue):
    issued = issue(expires_in=60)
    set_key(app, issued["id"], expires_at=utcnow() - timedelta(seconds=1))
    for method, path in (("GET", "/me"), ("GET", "/identities"), ("POST", "/identity"), ("GET", "/keys")):
        expired = client.open(path, method=method, json={"display_name": "x"}, headers=auth(issued["key"]))
        unknown = client.open(path, method=method, json={"display_name": "x"}, headers=auth("idsk_" + "A" * 43))
        assert expired.status_code == unknown.status_code == 401
        assert expired.get_data() == unknown.get_data()
        assert without_request_id(expired) == without_request_id(unknown)


@pytest.mark.parametrize("app_config", [{"IDENTITY_KEY_CACHE_SECONDS": 3600}])
def test_a_cached_key_is_refused_as_soon_as_it_expires(app, client, issue):
    issued = issue(expires_in=60)
    set_key(app, issued["id"], expires_at=utcnow() + timedelta(seconds=2))
    assert client.get("/me", headers=auth(issued["key"])).status_code == 200  # looked up, and cached for an hour
    deadline = time.monotonic() + 30
    while client.get("/me", headers=auth(issued["key"])).status_code == 200:
        assert time.monotonic() < deadline, "the expired key was still accepted from the cache"
        time.sleep(0.2)
    assert client.get("/me", headers=auth(issued["key"])).status_code == 401


# --- rotation ---------------------------------------------------------------------------------------

def test_rotating_my_key_with_grace_gives_a_new_key_and_both_work_until_the_grace_ends(app, client, admin_key, issue):
    old = issue(scope="read", label="dashboard", expires_in=86_400)
    response = client.post("/me/key/rotate", json={"grace_seconds": 3600}, headers=auth(old["key"]))
    # A read-only key may not rotate itself: rotating issues a key.
    assert response.status_code == 403 and response.get_json()["detail"].startswith(READ_ONLY)
    old = issue(label="dashboard", expires_in=86_400)
    response = client.post("/me/key/rotate", json={"grace_seconds": 3600}, headers=auth(old["key"]))
    assert response.status_code == 201
    new = response.get_json()
    assert KEY.fullmatch(new["key"]) and new["key"] != old["key"] and new["id"] != old["id"]
    assert (new["wallet"], new["scope"], new["label"], new["expires_at"]) == (
        old["wallet"], old["scope"], old["label"], old["expires_at"]  # the term stays: a rotation does not extend it
    )
    assert new["created_by"] == USER_WALLET
    for key in (old["key"], new["key"]):
        assert client.get("/me", headers=auth(key)).status_code == 200
    stopping = client.get(f"/keys/{old['id']}", headers=auth(admin_key)).get_json()
    assert stopping["revoked_at"] is not None and stopping["revoked_at"] > new["created_at"]
    # The grace ends (here: as another node's clock would see it): the old key stops, the new one works.
    set_key(app, old["id"], revoked_at=utcnow() - timedelta(seconds=1))
    from identity.core.keys import forget_keys

    with app.app_context():
        forget_keys()
    assert client.get("/me", headers=auth(old["key"])).status_code == 401
    assert client.get("/me", headers=auth(new["key"])).status_code == 200


def test_a_key_in_its_grace_cannot_be_rotated_again(client, issue):
    old = issue()
    assert client.post("/me/key/rotate", json={"grace_seconds": 600}, headers=auth(old["key"])).status_code == 201
    again = client.post("/me/key/rotate", json={"grace_seconds": 600}, headers=auth(old["key"]))
    assert again.status_code == 409
    assert "rotated already" in again.get_json()["detail"]
    assert not KEY.search(again.get_data(as_text=True))


def test_rotating_without_grace_stops_the_old_key_at_once(client, issue):
    old = issue()
    response = client.post("/me/key/rotate", json={}, headers=auth(old["key"]))
    assert response.status_code == 201
    assert client.get("/me", headers=auth(old["key"])).status_code == 401
    assert client.get("/me", headers=auth(response.get_json()["key"])).status_code == 200


def test_an_admin_rotates_a_key_by_id(client, admin_key, issue):
    old = issue(label="worker")
    response = client.post(f"/keys/{old['id']}/rotate", json={"grace_seconds": 0}, headers=auth(admin_key))
    assert response.status_code == 201
    new = response.get_json()
    assert response.headers["Location"] == f"/keys/{new['id']}"
    assert (new["wallet"], new["label"], new["created_by"]) == (USER_WALLET, "worker", ADMIN_WALLET)
    assert client.get("/me", headers=auth(old["key"])).status_code == 401
    revoked = client.post(f"/keys/{old['id']}/rotate", json={}, headers=auth(admin_key))
    assert revoked.status_code == 409 and "revoked" in revoked.get_json()["detail"]
    for missing in (MISSING_KEY_ID, "not-a-key-id", "x" * 300):
        assert client.post(f"/keys/{missing}/rotate", json={}, headers=auth(admin_key)).status_code == 404


@pytest.mark.parametrize("body", [{"grace_seconds": -1}, {"grace_seconds": 86_401}, {"grace_seconds": "60"}, {"grace": 60}])
def test_an_invalid_grace_is_422_and_rotates_nothing(client, user_key, body):
    response = client.post("/me/key/rotate", json=body, headers=auth(user_key))
    assert response.status_code == 422
    assert client.get("/me", headers=auth(user_key)).status_code == 200


def test_an_expired_key_cannot_be_rotated_by_an_admin(app, client, admin_key, issue):
    old = issue(expires_in=60)
    set_key(app, old["id"], expires_at=utcnow() - timedelta(seconds=1))
    response = client.post(f"/keys/{old['id']}/rotate", json={}, headers=auth(admin_key))
    assert response.status_code == 409 and "expired" in response.get_json()["detail"]


# --- revocation -------------------------------------------------------------------------------------

def test_revoking_my_key_stops_only_that_key(client, issue):
    first, second = issue(), issue()
    assert client.delete("/me/key", headers=auth(first["key"])).status_code == 204
    assert client.get("/me", headers=auth(first["key"])).status_code == 401
    assert client.get("/me", headers=auth(second["key"])).status_code == 200


def test_an_admin_revokes_a_key_by_id_and_again_is_still_204(client, admin_key, issue):
    target = issue()
    first = client.delete(f"/keys/{target['id']}", headers=auth(admin_key))
    assert first.status_code == 204 and first.get_data() == b""
    assert client.get("/me", headers=auth(target["key"])).status_code == 401
    revoked_at = client.get(f"/keys/{target['id']}", headers=auth(admin_key)).get_json()["revoked_at"]
    assert revoked_at is not None
    assert client.delete(f"/keys/{target['id']}", headers=auth(admin_key)).status_code == 204
    assert client.get(f"/keys/{target['id']}", headers=auth(admin_key)).get_json()["revoked_at"] == revoked_at
    for missing in (MISSING_KEY_ID, "nope", "a\u0000b"):
        assert client.delete(f"/keys/{missing}", headers=auth(admin_key)).status_code == 404
        assert client.get(f"/keys/{missing}", headers=auth(admin_key)).status_code == 404


def test_revoking_a_key_within_its_grace_stops_it_at_once(client, admin_key, issue):
    old = issue()
    assert client.post("/me/key/rotate", json={"grace_seconds": 3600}, headers=auth(old["key"])).status_code == 201
    assert client.delete(f"/keys/{old['id']}", headers=auth(admin_key)).status_code == 204
    assert client.get("/me", headers=auth(old["key"])).status_code == 401


# --- GET /keys --------------------------------------------------------------------------------------

def test_the_key_listing_pages_by_page_and_by_cursor_visiting_each_key_once(client, admin_key, issue):
    issued = [issue(label=f"key {n}")["id"] for n in range(5)]
    page = client.get(f"/keys?wallet={USER_WALLET.lower()}&limit=2", headers=auth(admin_key)).get_json()
    assert (page["page"], page["limit"], page["total"]) == (1, 2, 5)
    seen = [key["id"] for key in page["data"]]
    while page["next"]:
        page = client.get(f"/keys?cursor={page['next']}", headers=auth(admin_key)).get_json()
        seen += [key["id"] for key in page["data"]]
    assert seen == issued[::-1]  # newest first, each once
    second = client.get(f"/keys?wallet={USER_WALLET}&limit=2&page=2", headers=auth(admin_key)).get_json()
    assert [key["id"] for key in second["data"]] == issued[::-1][2:4]
    everything = client.get("/keys?limit=100", headers=auth(admin_key)).get_json()
    assert everything["total"] == 6 and everything["next"] is None  # and the Admin's own key


def test_the_key_listing_takes_a_wallet_in_any_case(client, admin_key, issue):
    issue()
    for wallet in (USER_WALLET, USER_WALLET.lower(), USER_WALLET.upper().replace("0X", "0x"), "0x1f669A8Fce00EEA084E8c9f307C8Eda89CcF2AcE"):
        response = client.get(f"/keys?wallet={wallet}", headers=auth(admin_key))
        assert response.status_code == 200, wallet
    assert client.get(f"/keys?wallet={USER_WALLET.lower()}", headers=auth(admin_key)).get_json()["total"] == 1


def test_the_key_listing_filters_live_keys(client, admin_key, issue):
    live, revoked = issue(), issue()
    client.delete(f"/keys/{revoked['id']}", headers=auth(admin_key))
    active = client.get(f"/keys?wallet={USER_WALLET}&active=true", headers=auth(admin_key)).get_json()
    inactive = client.get(f"/keys?wallet={USER_WALLET}&active=false", headers=auth(admin_key)).get_json()
    assert [key["id"] for key in active["data"]] == [live["id"]]
    assert [key["id"] for key in inactive["data"]] == [revoked["id"]]


@pytest.mark.parametrize(
    "query, parameter",
    [
        ("limit=0", "limit"), ("limit=101", "limit"), ("page=0", "page"), ("page=200&limit=100", "page"),
        ("active=yes", "active"), ("wallet=0x12", "wallet"), ("cursor=forged.cursor", "cursor"), ("color=red", "color"),
    ],
)
def test_an_invalid_key_listing_parameter_is_400_naming_it(client, admin_key, query, parameter):
    response = client.get(f"/keys?{query}", headers=auth(admin_key))
    assert response.status_code == 400
    assert parameter in response.get_json()["errors"]


def test_a_cursor_continues_only_its_own_listing(client, admin_key, issue):
    for _ in range(3):
        issue()
    cursor = client.get(f"/keys?wallet={USER_WALLET}&limit=1", headers=auth(admin_key)).get_json()["next"]
    response = client.get(f"/keys?cursor={cursor}&wallet={OTHER_WALLET}", headers=auth(admin_key))
    assert response.status_code == 400 and "wallet" in response.get_json()["errors"]
    response = client.get(f"/keys?cursor={cursor}&page=2", headers=auth(admin_key))
    assert response.status_code == 400 and "page" in response.get_json()["errors"]


# --- GET /users/<wallet> ----------------------------------------------------------------------------

def test_a_user_is_shown_to_any_key_with_its_identity_count(client, create, admin_key, user_key):
    ids = [create({"display_name": f"identity {n}"}).get_json()["identity_id"] for n in range(3)]
    client.patch(f"/identity/{ids[0]}", json={"status": "removed"}, headers=auth(admin_key))
    for key in (user_key, admin_key):
        response = client.get(f"/users/{USER_WALLET.lower()}", headers=auth(key))
        assert response.status_code == 200
        body = response.get_json()
        assert (body["wallet"], body["role"], body["api_key"], body["identity_count"]) == (USER_WALLET, "User", "", 2)
    admin = client.get(f"/users/{ADMIN_WALLET}", headers=auth(user_key)).get_json()
    assert (admin["role"], admin["identity_count"]) == ("Admin", 0)


def test_an_unknown_or_malformed_wallet_is_404(client, user_key):
    for wallet in (OTHER_WALLET, "0x123", "0xFb6916095ca1df60bB79Ce92cE3Ea74c37c5d359", "nobody"):
        response = client.get(f"/users/{wallet}", headers=auth(user_key))
        assert response.status_code == 404
        assert "wallet" in response.get_json()["detail"]


# --- last use, logs and the plaintext ---------------------------------------------------------------

def test_last_used_at_is_the_last_use_the_writer_recorded(app, client, admin_key, issue):
    issued = issue()
    assert issued["last_used_at"] is None
    client.get("/me", headers=auth(issued["key"]))
    assert client.get(f"/keys/{issued['id']}", headers=auth(admin_key)).get_json()["last_used_at"] is None
    with app.app_context():
        key_use.write_noted()  # what the serving process's writer does every IDENTITY_KEY_USE_INTERVAL
    first = client.get(f"/keys/{issued['id']}", headers=auth(admin_key)).get_json()["last_used_at"]
    assert first is not None
    for _ in range(3):
        client.get("/me", headers=auth(issued["key"]))
    with app.app_context():
        key_use.write_noted()
    assert client.get(f"/keys/{issued['id']}", headers=auth(admin_key)).get_json()["last_used_at"] == first


@pytest.fixture
def every_log_line(caplog):
    """Every record logged during the test, at any level, by any logger, as its full text and extras."""
    caplog.set_level(logging.DEBUG)
    return lambda: [str(record.__dict__) + record.getMessage() for record in caplog.records]


def test_key_events_are_logged_with_the_key_id_and_the_acting_wallet(client, admin_key, issue, caplog):
    caplog.set_level(logging.INFO, logger="identity.keys")
    issued = issue()
    rotated = client.post("/me/key/rotate", json={"grace_seconds": 60}, headers=auth(issued["key"])).get_json()
    client.delete(f"/keys/{rotated['id']}", headers=auth(admin_key))
    events = [record for record in caplog.records if record.name == "identity.keys"]
    assert [(record.key_id, record.acting_wallet) for record in events] == [
        (issued["id"], ADMIN_WALLET), (issued["id"], USER_WALLET), (rotated["id"], ADMIN_WALLET),
    ]
    assert events[1].new_key_id == rotated["id"]
    assert [record.getMessage().split()[2] for record in events] == ["issued", "rotated", "revoked"]


def test_the_plaintext_of_a_key_is_in_its_201_and_nowhere_else(app, client, admin_key, every_log_line):
    answers = []

    def call(method, path, key=admin_key, **kwargs):
        response = client.open(path, method=method, headers=auth(key), **kwargs)
        answers.append(response)
        return response

    issued = call("POST", "/keys", json={"wallet": USER_WALLET, "label": "secret holder"}).get_json()
    rotated = call("POST", "/me/key/rotate", key=issued["key"], json={"grace_seconds": 60}).get_json()
    keys = [issued["key"], rotated["key"]]
    call("GET", "/me", key=issued["key"])
    call("GET", "/me", key=rotated["key"])
    call("GET", "/keys")
    call("GET", f"/keys/{issued['id']}")
    call("POST", "/keys", json={"wallet": issued["key"], "label": issued["key"] * 3})  # 422
    call("GET", f"/users/{issued['key']}")  # 404
    call("POST", f"/keys/{issued['id']}/rotate", json={})  # 409: in its grace
    call("DELETE", "/me/key", key=issued["key"])
    call("GET", "/me", key=issued["key"])  # 401
    with app.app_context():
        stored = [str(row) for row in db.session.execute(select(ApiKey)).scalars()]
        stored += [str(value) for row in db.session.execute(select(ApiKey.__table__)) for value in row]
    shown = [answer for answer in answers if any(key in answer.get_data(as_text=True) for key in keys)]
    assert [answer.status_code for answer in shown] == [201, 201]
    for key in keys:
        assert not any(key in str(answer.headers) for answer in answers)
        assert not any(key in line for line in every_log_line())
        assert not any(key in value for value in stored)
