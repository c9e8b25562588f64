"""`flask --app app backup PATH` against a serving, writing gunicorn (its restore: test_restore.py)."""

import os
import sqlite3
import subprocess
import threading
import time

import pytest
import requests

from tests.common.apps import ADMIN_WALLET
from tests.common.live import BIN, ROOT, LiveServer, flask_cli

WRITERS = 4


def run_backup(database_url, path):
    env = {**os.environ, "DATABASE_URL": database_url}
    return subprocess.run(
        [str(BIN / "flask"), "--app", "app", "backup", str(path)], cwd=ROOT, env=env,
        capture_output=True, text=True, timeout=120,
    )


def issue(database_url):
    return flask_cli(database_url, "keys", "create", "--wallet", ADMIN_WALLET, "--role", "Admin").strip().splitlines()[-1]


def create(server, key, name):
    response = requests.post(server.url + "/identity", json={"display_name": name}, headers={"x-api-key": key}, timeout=30)
    assert response.status_code == 201, response.text
    return response.json()["identity_id"]


class Writers:
    """WRITERS clients creating identities until stopped; each acknowledged id with its time."""

    def __init__(self, server, key):
        self.server, self.key = server, key
        self.acknowledged = []  # (monotonic time of the 201, identity_id)
        self.failures = []
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self.write, args=(number,)) for number in range(WRITERS)]

    def write(self, number):
        session = requests.Session()
        count = 0
        while not self.stop.is_set() and count < 5000:
            count += 1
            response = session.post(
                self.server.url + "/identity", json={"display_name": f"Writer {number} #{count}"},
                headers={"x-api-key": self.key}, timeout=30,
            )
            if response.status_code == 201:
                self.acknowledged.append((time.monotonic(), response.json()["identity_id"]))
            else:
                self.failures.append(response.status_code)

    def __enter__(self):
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=60)


def stored_ids(path):
    with sqlite3.connect(path) as connection:
        return {row[0] for row in connection.execute("SELECT identity_id FROM identities")}


def integrity(path):
    with sqlite3.connect(path) as connection:
        return [row[0] for row in connection.execute("PRAGMA integrity_check")]


def test_backup_while_serving_and_writing_holds_every_create_acknowledged_before_it(database_path, tmp_path):
    database_url = f"sqlite:///{database_path}"
    key = issue(database_url)
    server = LiveServer(database_url, workers=None).start()
    copy = tmp_path / "backup" / "identity.db"
    copy.parent.mkdir()
    try:
        with Writers(server, key) as writers:
            time.sleep(1.5)
            began = time.monotonic()
            result = run_backup(database_url, copy)
            time.sleep(1)
        acknowledged_after = len(writers.acknowledged)
    finally:
        server.stop()
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == str(copy)
    assert writers.failures == []
    before = {identity_id for at, identity_id in writers.acknowledged if at < began}
    assert len(before) > 10 and acknowledged_after > len(before)  # writes went on before and during it
    assert integrity(copy) == ["ok"]
    assert before <= stored_ids(copy)
    # A self-contained file: no journal beside it.
    assert sorted(path.name for path in copy.parent.iterdir()) == ["identity.db"]


def test_backup_refuses_to_overwrite_a_file(database_path, tmp_path):
    existing = tmp_path / "existing.db"
    existing.write_bytes(b"keep me")
    result = run_backup(f"sqlite:///{database_path}", existing)
    assert result.returncode != 0
    assert "exists already" in result.stderr
    assert existing.read_bytes() == b"keep me"


@pytest.mark.postgresql_only
def test_backup_on_postgresql_exits_non_zero_and_points_to_pg_dump(database_url, tmp_path):
    result = run_backup(database_url, tmp_path / "copy.db")
    assert result.returncode != 0
    assert "pg_dump" in result.stderr
    assert not (tmp_path / "copy.db").exists()
