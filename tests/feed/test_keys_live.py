"""Keys over HTTP on real gunicorn with two worker processes: a rotation's grace and a revocation hold
on every worker, and no key reaches the server's logs."""

import json
import time
from datetime import datetime

import pytest
import requests

from tests.common.apps import ADMIN_WALLET, USER_WALLET
from tests.common.live import LiveServer, prepare_database

CACHE_SECONDS = 2
GRACE_SECONDS = 8
# How long past the moment a key must stop the test waits before it calls the key still working: far
# more than the cache time, so that only a key that never stops fails it.
MARGIN_SECONDS = CACHE_SECONDS + 20


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    database_url = f"sqlite:///{tmp_path_factory.mktemp('keys-live') / 'identity.db'}"
    admin_key = prepare_database(database_url, ADMIN_WALLET)
    server = LiveServer(database_url, workers=2, env={"IDENTITY_KEY_CACHE_SECONDS": str(CACHE_SECONDS)}).start()
    server.api_key = admin_key
    yield server
    server.stop()


def me(node, key):
    """GET /me on a new connection each time, so that the two workers share the requests."""
    return requests.get(f"{node.url}/me", headers={"x-api-key": key, "Connection": "close"}, timeout=10).status_code


def issue(node):
    response = requests.post(f"{node.url}/keys", json={"wallet": USER_WALLET}, headers={"x-api-key": node.api_key}, timeout=10)
    assert response.status_code == 201, response.text
    return response.json()


def moment(timestamp):
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


def wait_until_refused(node, key, deadline):
    """Poll until `key` is refused 10 times in a row (both workers, then); returns when the first of those
    answers arrived, or fails at `deadline`."""
    refused_since, in_a_row = None, 0
    while in_a_row < 10:
        assert time.time() < deadline, "the key still works on some worker"
        status = me(node, key)
        if status == 401:
            refused_since = refused_since or time.time()
            in_a_row += 1
        else:
            assert status == 200
            refused_since, in_a_row = None, 0
            time.sleep(0.1)
    return refused_since


def test_during_a_rotations_grace_both_keys_work_on_every_worker_and_after_it_the_old_one_stops(node):
    old = issue(node)
    for _ in range(20):  # both workers look the old key up and cache it
        assert me(node, old["key"]) == 200
    rotated = requests.post(
        f"{node.url}/me/key/rotate", json={"grace_seconds": GRACE_SECONDS},
        headers={"x-api-key": old["key"]}, timeout=10,
    )
    assert rotated.status_code == 201
    new = rotated.json()
    stops_at = moment(requests.get(f"{node.url}/keys/{old['id']}", headers={"x-api-key": node.api_key}, timeout=10).json()["revoked_at"])
    checked = 0
    for _ in range(10):
        for key in (old["key"], new["key"]):
            status = me(node, key)
            if time.time() < stops_at:  # answered within the grace: it must have worked
                assert status == 200
                checked += key == old["key"]
    assert checked, "no request of the old key was answered within its grace"
    refused_since = wait_until_refused(node, old["key"], stops_at + MARGIN_SECONDS)
    assert refused_since >= stops_at  # never before the grace ended
    for _ in range(10):
        assert me(node, new["key"]) == 200


def test_a_key_an_admin_revokes_stops_on_every_worker_within_the_cache_time(node):
    target = issue(node)
    for _ in range(20):
        assert me(node, target["key"]) == 200
    revoked = requests.delete(f"{node.url}/keys/{target['id']}", headers={"x-api-key": node.api_key}, timeout=10)
    assert revoked.status_code == 204
    wait_until_refused(node, target["key"], time.time() + MARGIN_SECONDS)


def test_key_events_reach_the_logs_with_key_ids_and_no_key_ever_does(node):
    issued = issue(node)
    me(node, issued["key"])
    rotated = requests.post(f"{node.url}/me/key/rotate", json={}, headers={"x-api-key": issued["key"]}, timeout=10).json()
    requests.delete(f"{node.url}/me/key", headers={"x-api-key": rotated["key"]}, timeout=10)
    me(node, rotated["key"])  # a refused key is not logged either
    logs = node.stdout() + node.stderr()
    for key in (issued["key"], rotated["key"], node.api_key):
        assert key not in logs
    events = [
        line for line in (json.loads(text) for text in node.stderr().splitlines() if text.startswith("{"))
        if line.get("logger") == "identity.keys" and line.get("key_id") in (issued["id"], rotated["id"])
    ]
    assert [(line["key_id"], line["acting_wallet"], line["message"].split()[2]) for line in events] == [
        (issued["id"], ADMIN_WALLET, "issued"), (issued["id"], USER_WALLET, "rotated"), (rotated["id"], USER_WALLET, "revoked"),
    ]
