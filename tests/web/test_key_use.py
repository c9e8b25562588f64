"""A request made with a key writes nothing: last_login is the user's last sign-in, and a key's last use is
noted in memory and written off the request's path, at most once an interval (identity.core.key_use)."""

import logging
import sqlite3
import time
from datetime import timedelta

import pytest
import requests
from sqlalchemy import select, update

from identity.core import key_use, keys, sessions
from identity.storage.database import db
from identity.storage.models import ApiKey, User, utcnow
from tests.common.apps import ADMIN_WALLET, USER_WALLET
from tests.common.live import LiveServer, flask_cli


def last_login(app, wallet):
    with app.app_context():
        return db.session.execute(select(User.last_login).where(User.wallet == wallet)).scalar_one()


def last_used_at(app, key):
    with app.app_context():
        return db.session.execute(
            select(ApiKey.last_used_at).where(ApiKey.key_hash == keys.hash_api_key(key))
        ).scalar_one()


def write_noted(app):
    with app.app_context():
        return key_use.write_noted()


def test_requests_made_with_a_key_are_not_logins(app, client, user_key):
    auth = {"x-api-key": user_key}
    created = client.post("/identity", json={"display_name": "Not a login"}, headers=auth)
    assert created.status_code == 201
    for _ in range(3):
        assert client.get(created.headers["Location"], headers=auth).status_code == 200
    assert client.get("/me", headers=auth).status_code == 200
    write_noted(app)  # the key's use is recorded; the user's last_login is not
    assert last_login(app, USER_WALLET) is None
    assert created.get_json()["creator"]["last_login"] is None
    assert client.get(created.headers["Location"], headers=auth).get_json() == created.get_json()


def test_a_read_writes_nothing_to_the_database_not_even_a_keys_first(client, user_key, create, database_path):
    identity = create({"display_name": "Read only"}).headers["Location"]
    with client.application.app_context():
        other, _ = keys.issue_key(ADMIN_WALLET, "Admin")  # never used before its first read below
    # PRAGMA data_version moves whenever another connection commits a change to the file.
    with sqlite3.connect(database_path) as observer:
        before = observer.execute("PRAGMA data_version").fetchone()[0]
        for key in (other, user_key, other):
            assert client.get(identity, headers={"x-api-key": key}).status_code == 200
        assert observer.execute("PRAGMA data_version").fetchone()[0] == before


def test_a_keys_use_is_written_by_the_writer_not_by_the_request(app, client, user_key):
    assert client.get("/me", headers={"x-api-key": user_key}).status_code == 200
    assert last_used_at(app, user_key) is None
    assert write_noted(app) is True
    written = last_used_at(app, user_key)
    assert written is not None and abs(utcnow() - written) < timedelta(seconds=5)
    assert client.get("/me", headers={"x-api-key": user_key}).get_json()["key"]["last_used_at"] is not None


@pytest.mark.parametrize("app_config", [{"IDENTITY_KEY_CACHE_SECONDS": 0}])  # the test edits the row behind the cache
def test_a_keys_use_is_written_at_most_once_an_interval(app, client, user_key):
    client.get("/me", headers={"x-api-key": user_key})
    write_noted(app)
    first = last_used_at(app, user_key)
    for _ in range(3):
        client.get("/me", headers={"x-api-key": user_key})
        write_noted(app)
    assert last_used_at(app, user_key) == first

    with app.app_context():
        db.session.execute(update(ApiKey).values(last_used_at=first - timedelta(seconds=61)))
        db.session.commit()
    client.get("/me", headers={"x-api-key": user_key})
    write_noted(app)
    assert last_used_at(app, user_key) > first


def test_two_processes_write_a_keys_use_once_an_interval_between_them(app, database_url, user_key):
    from tests.common.apps import make_app

    other = make_app(database_url)
    try:
        for each in (app, other):
            assert each.test_client().get("/me", headers={"x-api-key": user_key}).status_code == 200
        write_noted(app)
        first = last_used_at(app, user_key)
        write_noted(other)  # its use came later, but within the interval of the one written
        assert last_used_at(app, user_key) == first
    finally:
        with other.app_context():
            db.engine.dispose()


def test_while_the_database_is_locked_the_uses_wait_for_the_next_write(app, client, user_key, database_path, caplog):
    assert client.get("/me", headers={"x-api-key": user_key}).status_code == 200
    locker = sqlite3.connect(database_path, isolation_level=None)
    try:
        locker.execute("BEGIN IMMEDIATE")
        started = time.monotonic()
        with caplog.at_level(logging.WARNING, logger="identity.core.key_use"):
            assert write_noted(app) is False
        assert time.monotonic() - started < 1.0  # it did not wait for the lock
    finally:
        locker.execute("ROLLBACK")
        locker.close()
    [warning] = [record.getMessage() for record in caplog.records if record.name == "identity.core.key_use"]
    assert "last_used_at" in warning and "locked" in warning
    assert last_used_at(app, user_key) is None
    assert write_noted(app) is True
    assert last_used_at(app, user_key) is not None


def test_a_console_sign_in_with_a_key_is_a_login(app, admin_key):
    assert last_login(app, ADMIN_WALLET) is None
    with app.test_request_context():
        sessions.open_session(admin_key)
    signed_in = last_login(app, ADMIN_WALLET)
    assert signed_in is not None and abs(utcnow() - signed_in) < timedelta(seconds=5)


def test_a_served_process_writes_the_uses_it_noted_as_it_stops(database_path, tmp_path):
    database_url = f"sqlite:///{database_path}"
    key = flask_cli(database_url, "keys", "create", "--wallet", USER_WALLET).strip().splitlines()[-1]
    server = LiveServer(database_url, workers=1, output_dir=tmp_path).start()  # the interval is a minute
    try:
        assert requests.get(server.url + "/me", headers={"x-api-key": key}, timeout=10).status_code == 200
        with sqlite3.connect(database_path) as connection:
            assert connection.execute("SELECT last_used_at FROM api_keys").fetchone() == (None,)
    finally:
        server.stop()
    with sqlite3.connect(database_path) as connection:
        (written,) = connection.execute("SELECT last_used_at FROM api_keys").fetchone()
    assert written is not None


def test_a_served_process_writes_the_uses_it_noted_every_interval(database_path, tmp_path):
    database_url = f"sqlite:///{database_path}"
    key = flask_cli(database_url, "keys", "create", "--wallet", USER_WALLET).strip().splitlines()[-1]
    server = LiveServer(database_url, workers=1, env={"IDENTITY_KEY_USE_INTERVAL": "1"}, output_dir=tmp_path).start()
    try:
        assert requests.get(server.url + "/me", headers={"x-api-key": key}, timeout=10).status_code == 200
        deadline, written = time.monotonic() + 10, None
        while written is None and time.monotonic() < deadline:
            time.sleep(0.2)
            with sqlite3.connect(database_path) as connection:
                (written,) = connection.execute("SELECT last_used_at FROM api_keys").fetchone()
    finally:
        server.stop()
    assert written is not None
