"""End to end over real HTTP: gunicorn with several workers, concurrent clients, and kill -9."""

import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from tests.conftest import ADMIN_WALLET
from tests.live import LiveServer, prepare_database


@pytest.fixture
def database_url(tmp_path):
    return f"sqlite:///{tmp_path / 'live.db'}"


@pytest.fixture
def key(database_url):
    return prepare_database(database_url, ADMIN_WALLET)


@pytest.fixture
def server(database_url, key):
    live = LiveServer(database_url, workers=2).start()
    yield live
    live.stop()


def post(session, url, key, body):
    return session.post(url + "/identity", json=body, headers={"x-api-key": key}, timeout=30)


def test_concurrent_clients_create_and_read_back(server, key):
    distinct = [{"display_name": f"concurrent {i}"} for i in range(160)]
    bodies = distinct + distinct[::4]  # a fifth of the requests repeat earlier content
    local = threading.local()

    def create(body):
        local.session = getattr(local, "session", None) or requests.Session()
        response = post(local.session, server.url, key, body)
        return body["display_name"], response.status_code, response.json()

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(create, bodies))

    statuses = [status for _, status, _ in results]
    assert set(statuses) <= {201, 409}
    created = {name: body["identity_id"] for name, status, body in results if status == 201}
    assert len(created) == len(distinct) == statuses.count(201)
    for name, status, body in results:
        if status == 409:
            assert body["identity_id"] == created[name]

    with requests.Session() as session:
        for identity_id in created.values():
            response = session.get(f"{server.url}/identity/{identity_id}", headers={"x-api-key": key}, timeout=10)
            assert response.status_code == 200
            assert response.json()["identity_id"] == identity_id


def test_acknowledged_creates_survive_kill_9(tmp_path, database_url, key):
    server = LiveServer(database_url, workers=2).start()
    acknowledged = []
    stop = threading.Event()

    def keep_creating(worker):
        with requests.Session() as session:
            n = 0
            while not stop.is_set():
                n += 1
                try:
                    response = post(session, server.url, key, {"display_name": f"crash {worker}-{n}"})
                except requests.RequestException:
                    continue  # the server died under this request: it was never acknowledged
                if response.status_code == 201:
                    acknowledged.append(response.json()["identity_id"])

    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = [pool.submit(keep_creating, w) for w in range(4)]
        while len(acknowledged) < 150:
            threading.Event().wait(0.05)
        server.kill()  # while requests are still in flight
        stop.set()
        for future in futures:
            future.result()

    assert len(acknowledged) >= 150
    restarted = LiveServer(database_url, workers=2).start()
    try:
        with requests.Session() as session:
            for identity_id in acknowledged:
                response = session.get(f"{restarted.url}/identity/{identity_id}", headers={"x-api-key": key}, timeout=10)
                assert response.status_code == 200, identity_id
    finally:
        restarted.stop()
    with sqlite3.connect(tmp_path / "live.db") as connection:
        assert connection.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


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
