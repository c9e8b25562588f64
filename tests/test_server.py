"""Key rotation and revocation seen by every worker of a real gunicorn."""

import sqlite3
from concurrent.futures import ThreadPoolExecutor

import requests

from tests.conftest import ADMIN_WALLET
from tests.live import LiveServer


def test_rotation_and_revocation_take_effect_in_every_worker_at_once(database_path, issue_key):
    from tests.live import flask_cli

    old_key = issue_key(ADMIN_WALLET, "Admin")
    database_url = f"sqlite:///{database_path}"
    server = LiveServer(database_url, workers=3).start()
    try:
        def statuses(api_key, count=30):
            def fetch(_):
                url = f"{server.url}/identity/did:identity:ipfs:nope"
                return requests.get(url, headers={"x-api-key": api_key}, timeout=30).status_code

            # Concurrent, so that every worker answers some of them.
            with ThreadPoolExecutor(max_workers=6) as pool:
                return set(pool.map(fetch, range(count)))

        assert statuses(old_key) == {404}
        with sqlite3.connect(database_path) as connection:
            key_id = connection.execute("SELECT id FROM api_keys").fetchone()[0]
        new_key = flask_cli(database_url, "keys", "rotate", key_id).strip().splitlines()[-1]
        # No worker caches keys: the bound is zero, the very next request is refused.
        assert statuses(old_key) == {401}
        assert statuses(new_key) == {404}
        flask_cli(database_url, "keys", "revoke", "--wallet", ADMIN_WALLET)
        assert statuses(new_key) == {401}
    finally:
        server.stop()
