"""Faults of the database seen through real gunicorn: locked, read-only, full, or without its schema."""

import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from identity.storage.database import db
from tests.common.apps import ADMIN_WALLET, USER_WALLET, make_app
from tests.common.live import LiveServer, flask_cli

# Holds SQLite's write lock until killed, as another process's long write would.
LOCKER = (
    "import sqlite3, sys, time\n"
    "connection = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
    "connection.execute('BEGIN IMMEDIATE')\n"
    "print('locked', flush=True)\n"
    "time.sleep(60)\n"
)


def hold_the_write_lock(database_path):
    """Another process holding SQLite's write lock until it is killed."""
    locker = subprocess.Popen([sys.executable, "-c", LOCKER, str(database_path)], stdout=subprocess.PIPE, text=True)
    assert locker.stdout.readline().strip() == "locked"
    return locker


def issue(database_url, wallet, role):
    return flask_cli(database_url, "keys", "create", "--wallet", wallet, "--role", role).strip().splitlines()[-1]


def log_lines(text):
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def test_a_keys_first_read_answers_within_a_second_while_another_process_holds_the_write_lock(database_path, tmp_path):
    database_url = f"sqlite:///{database_path}"
    admin, reader = issue(database_url, ADMIN_WALLET, "Admin"), issue(database_url, USER_WALLET, "User")
    env = {"IDENTITY_KEY_USE_INTERVAL": "1"}
    server = LiveServer(database_url, workers=None, env=env, output_dir=tmp_path).start()
    locker = None
    try:
        created = requests.post(
            server.url + "/identity", json={"display_name": "Locked out"}, headers={"x-api-key": admin}, timeout=10
        )
        assert created.status_code == 201
        locker = hold_the_write_lock(database_path)
        started = time.monotonic()
        # The reader's key has never been used: its use is noted, and cannot be written now.
        response = requests.get(
            f"{server.url}/identity/{created.json()['identity_id']}", headers={"x-api-key": reader}, timeout=15
        )
        elapsed = time.monotonic() - started
        time.sleep(2.5)  # the writer of the keys' uses tries (every second here), and finds the lock taken
    finally:
        if locker:
            locker.kill()
            locker.wait(timeout=10)
        server.stop()
    assert response.status_code == 200
    assert elapsed < 1.0
    warnings = [line for line in log_lines(server.stderr()) if line["level"] == "WARNING"]
    assert any("last_used_at" in line["message"] and "locked" in line["message"] for line in warnings), warnings


def test_a_create_waiting_for_the_write_lock_leaves_its_worker_answering_reads(database_path, tmp_path):
    # One gevent worker: the GET can only be answered by the worker whose POST is waiting for the lock.
    database_url = f"sqlite:///{database_path}"
    admin = issue(database_url, ADMIN_WALLET, "Admin")
    server = LiveServer(database_url, workers=1, output_dir=tmp_path).start()
    locker = None
    try:
        created = requests.post(
            server.url + "/identity", json={"display_name": "Read meanwhile"}, headers={"x-api-key": admin}, timeout=10
        )
        assert created.status_code == 201
        locker = hold_the_write_lock(database_path)
        with ThreadPoolExecutor(max_workers=1) as pool:
            waiting = pool.submit(
                requests.post, server.url + "/identity", json={"display_name": "Waits for the lock"},
                headers={"x-api-key": admin}, timeout=15,
            )
            time.sleep(0.5)  # the create is waiting for the lock by now
            assert not waiting.done()
            started = time.monotonic()
            read = requests.get(f"{server.url}/identity/{created.json()['identity_id']}", headers={"x-api-key": admin}, timeout=15)
            elapsed = time.monotonic() - started
            locker.kill()  # the other process's write ends: the lock is free
            locker.wait(timeout=10)
            written = waiting.result(timeout=15)
    finally:
        if locker and locker.poll() is None:
            locker.kill()
            locker.wait(timeout=10)
        server.stop()
    assert read.status_code == 200
    assert elapsed < 1.0  # SQLite's own busy handler would have held the worker for the whole wait
    assert written.status_code == 201, written.text


@pytest.mark.sqlite_only
def test_on_a_read_only_database_reads_answer_200_creates_503_and_readyz_says_why(database_path, tmp_path):
    # SQLite opening the file read-only, as it does for a file its user cannot write or on a
    # read-only mount (the suite runs as root, who may write any file, so the URL asks for it).
    database_url = f"sqlite:///{database_path}"
    key = issue(database_url, ADMIN_WALLET, "Admin")
    server = LiveServer(database_url, workers=None, output_dir=tmp_path).start()
    try:  # one identity to read, written while the database is still writable
        response = requests.post(
            server.url + "/identity", json={"display_name": "Kept"}, headers={"x-api-key": key}, timeout=10
        )
        identity_id = response.json()["identity_id"]
    finally:
        server.stop()
    read_only_url = f"sqlite:///file:{database_path}?mode=ro&uri=true"
    server = LiveServer(read_only_url, workers=None, env={"IDENTITY_KEY_USE_INTERVAL": "1"}, output_dir=tmp_path)
    server.launch()
    try:
        ready = wait_for_an_answer(server.url + "/readyz")
        headers = {"x-api-key": key}
        reads = [requests.get(f"{server.url}/identity/{identity_id}", headers=headers, timeout=10) for _ in range(3)]
        create = requests.post(server.url + "/identity", json={"display_name": "Refused"}, headers=headers, timeout=10)
        time.sleep(1.5)  # the writer of the keys' uses tries (every second here)
    finally:
        server.stop()
    assert ready.status_code == 503
    assert ready.headers["Content-Type"] == "application/problem+json"
    assert "read-only" in ready.json()["detail"]
    assert [read.status_code for read in reads] == [200, 200, 200]
    assert create.status_code == 503
    assert create.headers["Content-Type"] == "application/problem+json" and int(create.headers["Retry-After"]) > 0
    messages = [line["message"] for line in log_lines(server.stderr()) if line["level"] == "WARNING"]
    assert any(message.startswith("database unavailable: read-only") for message in messages), messages
    assert any("last_used_at" in message and "read-only" in message for message in messages), messages


def wait_for_an_answer(url, timeout=30):
    deadline = time.monotonic() + timeout
    while True:
        try:
            return requests.get(url, timeout=5)
        except requests.ConnectionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def test_readyz_is_503_on_a_database_without_the_schema_and_names_the_upgrade(empty_database_url):
    app = make_app(empty_database_url)
    try:
        response = app.test_client().get("/readyz")
    finally:
        with app.app_context():
            db.engine.dispose()
    assert response.status_code == 503
    assert response.headers["Content-Type"] == "application/problem+json"
    assert "flask --app app db upgrade" in response.get_json()["detail"]


@pytest.mark.sqlite_only
def test_readyz_is_503_on_a_schema_behind_the_latest_migration_and_200_after_the_upgrade(database_path):
    database_url = f"sqlite:///{database_path}"
    flask_cli(database_url, "db", "downgrade")
    app = make_app(database_url)
    try:
        behind = app.test_client().get("/readyz")
        flask_cli(database_url, "db", "upgrade")
        upgraded = app.test_client().get("/readyz")
    finally:
        with app.app_context():
            db.engine.dispose()
    assert behind.status_code == 503
    assert "flask --app app db upgrade" in behind.get_json()["detail"]
    assert upgraded.status_code == 200


@pytest.mark.postgresql_only
def test_on_a_read_only_postgresql_reads_answer_200_and_creates_and_readyz_503(database_url, postgres_server):
    from sqlalchemy import create_engine
    from sqlalchemy.engine import make_url

    from identity.core import keys

    app = make_app(database_url)
    with app.app_context():
        key, _ = keys.issue_key(ADMIN_WALLET, "Admin")
    client = app.test_client()
    headers = {"x-api-key": key}
    identity_id = client.post("/identity", json={"display_name": "Kept"}, headers=headers).get_json()["identity_id"]
    name = make_url(database_url).database
    admin = create_engine(database_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            connection.exec_driver_sql(f'ALTER DATABASE "{name}" SET default_transaction_read_only = on')
        with app.app_context():
            db.engine.dispose()  # new connections take the database's new default
        read = client.get(f"/identity/{identity_id}", headers=headers)
        create = client.post("/identity", json={"display_name": "Refused"}, headers=headers)
        ready = client.get("/readyz")
    finally:
        with admin.connect() as connection:
            connection.exec_driver_sql(f'ALTER DATABASE "{name}" RESET default_transaction_read_only')
        admin.dispose()
        with app.app_context():
            db.engine.dispose()
    assert read.status_code == 200
    assert create.status_code == 503
    assert create.headers["Content-Type"] == "application/problem+json" and int(create.headers["Retry-After"]) > 0
    assert ready.status_code == 503


@pytest.fixture
def small_disk(tmp_path):
    """A 4 MiB filesystem of its own (tmpfs), so that filling it fills no other disk. Mounting needs root,
    which CI has; elsewhere the test is skipped and says why."""
    mount_point = tmp_path / "small-disk"
    mount_point.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount_point)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small filesystem here (needs root): {mounted.stderr.decode().strip()}")
    yield mount_point
    subprocess.run(["umount", "-l", str(mount_point)], check=False)


def fill(directory):
    """Write a file in `directory` until its filesystem has no byte left."""
    with open(directory / "filler", "wb", buffering=0) as filler:  # unbuffered: nothing left to flush at close
        for size in (65536, 1):
            try:
                while True:
                    filler.write(b"\0" * size)
            except OSError:
                pass


@pytest.mark.sqlite_only
def test_on_a_full_disk_reads_answer_200_creates_503_and_readyz_says_why(database_path, small_disk, tmp_path):
    database = small_disk / "identity.db"
    database.write_bytes(database_path.read_bytes())
    database_url = f"sqlite:///{database}"
    key = issue(database_url, ADMIN_WALLET, "Admin")
    server = LiveServer(database_url, workers=None, env={"IDENTITY_KEY_USE_INTERVAL": "1"}, output_dir=tmp_path)
    server.start()
    try:
        headers = {"x-api-key": key}
        kept = requests.post(server.url + "/identity", json={"display_name": "Kept"}, headers=headers, timeout=10)
        fill(small_disk)
        # Creates until one fails: SQLite may still have room in pages it already holds.
        creates = [
            requests.post(server.url + "/identity", json={"display_name": f"Refused {n}"}, headers=headers, timeout=10)
            for n in range(200)
        ]
        read = requests.get(f"{server.url}/identity/{kept.json()['identity_id']}", headers=headers, timeout=10)
        ready = requests.get(server.url + "/readyz", timeout=10)
        time.sleep(1.5)  # the writer of the keys' uses tries (every second here)
    finally:
        server.stop()
    statuses = [create.status_code for create in creates]
    assert kept.status_code == 201
    assert 503 in statuses and set(statuses) <= {201, 503}, statuses
    refused = creates[statuses.index(503)]
    assert refused.headers["Content-Type"] == "application/problem+json" and int(refused.headers["Retry-After"]) > 0
    assert read.status_code == 200
    assert ready.status_code == 503 and "disk is full" in ready.json()["detail"]
    messages = [line["message"] for line in log_lines(server.stderr()) if line["level"] == "WARNING"]
    assert any(message.startswith("database unavailable: disk full") for message in messages), messages
    assert any("last_used_at" in message and "disk full" in message for message in messages), messages
