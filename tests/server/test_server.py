"""Key rotation and revocation seen by every worker of a real gunicorn."""

import sqlite3
import time
from concurrent.futures import ThreadPoolExecutor

import requests

from tests.common.apps import ADMIN_WALLET
from tests.common.live import LiveServer

KEY_CACHE_SECONDS = 1


def test_rotation_and_revocation_take_effect_in_every_worker_within_the_key_cache_time(database_path, issue_key):
    from tests.common.live import flask_cli

    old_key = issue_key(ADMIN_WALLET, "Admin")
    database_url = f"sqlite:///{database_path}"
    server = LiveServer(database_url, workers=3, env={"IDENTITY_KEY_CACHE_SECONDS": str(KEY_CACHE_SECONDS)}).start()
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
        # Each worker trusts a lookup for IDENTITY_KEY_CACHE_SECONDS: past that, none may accept the old key.
        time.sleep(KEY_CACHE_SECONDS + 0.5)
        assert statuses(old_key) == {401}
        assert statuses(new_key) == {404}
        flask_cli(database_url, "keys", "revoke", "--wallet", ADMIN_WALLET)
        time.sleep(KEY_CACHE_SECONDS + 0.5)
        assert statuses(new_key) == {401}
    finally:
        server.stop()


def test_twenty_threads_serve_twenty_four_clients_with_only_2xx_and_no_wait_on_the_pool(database_url, issue_key, report):
    """One process of 20 threads shares one connection pool: every thread must get a connection at once."""
    api_key = issue_key(ADMIN_WALLET, "Admin")
    server = LiveServer(
        database_url, workers=1, env={"GUNICORN_WORKER_CLASS": "gthread", "GUNICORN_THREADS": "20"}
    ).start()
    try:
        headers = {"x-api-key": api_key}

        def client(number):
            outcomes = []
            with requests.Session() as session:
                for round_ in range(15):
                    started = time.monotonic()
                    created = session.post(
                        f"{server.url}/identity", json={"display_name": f"Client {number} round {round_}"},
                        headers=headers, timeout=60,
                    )
                    outcomes.append((created.status_code, time.monotonic() - started))
                    for path in (f"/identity/{created.json().get('identity_id')}", "/readyz"):
                        started = time.monotonic()
                        answer = session.get(server.url + path, headers=headers, timeout=60)
                        outcomes.append((answer.status_code, time.monotonic() - started))
            return outcomes

        with ThreadPoolExecutor(max_workers=24) as pool:
            outcomes = [outcome for outcomes in pool.map(client, range(24)) for outcome in outcomes]
    finally:
        server.stop()
    statuses = {status for status, _ in outcomes}
    slowest = max(seconds for _, seconds in outcomes)
    report(f"20 threads, 24 clients: {len(outcomes)} requests, statuses {sorted(statuses)}, slowest {slowest:.2f} s")
    assert statuses <= {200, 201}
    assert slowest < 5
