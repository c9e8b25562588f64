"""x-api-key: who gets in, what a refusal looks like, and what is kept of a key."""

import re
import time

import pytest
from sqlalchemy import select
from sqlalchemy.engine import make_url

from identity.core import keys
from identity.storage.database import db
from identity.storage.models import ApiKey
from tests.common.apps import USER_WALLET

UNKNOWN = "did:identity:ipfs:bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku"
ROUTES = [("GET", "/identity/did:identity:ipfs:x"), ("GET", "/identities/x"), ("POST", "/identity"), ("POST", "/identities")]


def call(client, method, path, key=None):
    headers = {} if key is None else {"x-api-key": key}
    return client.open(path, method=method, json={"display_name": "x"}, headers=headers)


def refusal(response):
    assert response.status_code == 401
    assert response.mimetype == "application/problem+json"
    assert response.headers["WWW-Authenticate"] == 'ApiKey header="x-api-key"'
    return response.get_json()


@pytest.mark.parametrize("method, path", ROUTES)
def test_missing_unknown_and_revoked_keys_get_the_same_401(app, client, user_key, method, path):
    with app.app_context():
        keys.revoke_key(wallet=USER_WALLET)
    missing = refusal(call(client, method, path))
    unknown = refusal(call(client, method, path, "idsk_" + "A" * 43))
    revoked = refusal(call(client, method, path, user_key))
    empty = refusal(call(client, method, path, ""))
    assert missing == unknown == revoked == empty


@pytest.mark.parametrize("key", ["x" * 10_000, "idsk_\u00e9t\u00e9", "Bearer idsk_abc"])
def test_odd_keys_are_401_not_errors(client, key):
    response = client.get("/identity/x", headers={"x-api-key": key.encode("utf-8").decode("latin-1")})
    refusal(response)


def test_a_refusal_never_echoes_the_key(client):
    key = "idsk_" + "S" * 43
    response = call(client, "POST", "/identity", key)
    assert key not in response.get_data(as_text=True)
    assert all(key not in value for _, value in response.headers.items())


def test_health_routes_need_no_key(client):
    for path in ("/healthz", "/readyz"):
        response = client.get(path)
        assert response.status_code == 200
        assert response.get_json() == {"status": "ok"}


def test_keys_have_a_greppable_prefix_and_256_bits(app):
    with app.app_context():
        issued = {keys.issue_key(USER_WALLET)[0] for _ in range(20)}
    assert len(issued) == 20
    for key in issued:
        assert re.fullmatch(r"idsk_[A-Za-z0-9_-]{43}", key)  # 43 base64url characters carry 256 bits


def test_only_the_sha256_of_a_key_is_stored(app, user_key):
    import hashlib

    with app.app_context():
        stored = db.session.execute(select(ApiKey.key_hash)).scalars().all()
        every_value = [str(row) for table in db.metadata.sorted_tables for row in db.session.execute(select(table))]
    assert hashlib.sha256(user_key.encode()).hexdigest() in stored
    assert not any(user_key in value for value in every_value)


@pytest.mark.sqlite_only
def test_the_key_is_nowhere_in_the_sqlite_files(database_url, user_key):
    from pathlib import Path

    path = Path(make_url(database_url).database)
    files = [path, path.with_name(path.name + "-wal")]  # recent writes sit in the WAL until a checkpoint
    assert not any(user_key.encode() in file.read_bytes() for file in files if file.exists())


def test_key_of_a_revoked_wallet_stops_working_at_once(app, client, user_key):
    assert call(client, "POST", "/identity", user_key).status_code == 201
    with app.app_context():
        assert keys.revoke_key(wallet=USER_WALLET) == 1
    refusal(call(client, "POST", "/identity", user_key))


@pytest.mark.parametrize("app_config", [{"IDENTITY_KEY_CACHE_SECONDS": 1}])
def test_a_key_revoked_by_another_process_stops_working_within_the_cache_time(app, client, user_key, database_url):
    from tests.common.apps import make_app

    assert call(client, "POST", "/identity", user_key).status_code == 201  # looked up, then trusted
    looked_up = time.monotonic()
    other_worker = make_app(database_url)
    with other_worker.app_context():
        assert keys.revoke_key(wallet=USER_WALLET) == 1
        db.engine.dispose()
    trusted = client.get("/identity/x", headers={"x-api-key": user_key}).status_code
    if time.monotonic() - looked_up < 1:  # within the cache time, this process still believes its lookup
        assert trusted == 404
    time.sleep(max(0.0, looked_up + 1.05 - time.monotonic()))
    refusal(call(client, "POST", "/identity", user_key))


def test_a_key_revoked_in_this_process_stops_working_at_once(app, client, user_key):
    assert client.get("/identity/x", headers={"x-api-key": user_key}).status_code == 404
    with app.app_context():
        keys.revoke_key(wallet=USER_WALLET)
    refusal(call(client, "GET", "/identity/x", user_key))


def test_a_full_key_cache_drops_its_least_recently_used_lookup_not_all(database_url, monkeypatch):
    from tests.common.apps import ADMIN_WALLET, OTHER_WALLET, make_app

    monkeypatch.setattr(keys, "MAX_CACHED_KEYS", 2)
    app = make_app(database_url)
    try:
        with app.app_context():
            issued = [keys.issue_key(wallet)[0] for wallet in (USER_WALLET, OTHER_WALLET, ADMIN_WALLET)]
        client = app.test_client()
        for key in (issued[0], issued[1], issued[0], issued[2]):  # the second is then the least recently used
            assert client.get("/identity/x", headers={"x-api-key": key}).status_code == 404
        cached = app.extensions[keys.CACHE].lookups
        assert len(cached) == 2
        assert set(cached) == {keys.hash_api_key(issued[0]), keys.hash_api_key(issued[2])}
    finally:
        with app.app_context():
            db.engine.dispose()
