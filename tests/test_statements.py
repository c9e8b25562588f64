"""Statements whose SQL is made once (identity.statements), and the write transaction's setup sent on
the driver's connection (identity.extensions): the same rows and the same errors as SQLAlchemy's
own way of running them, and no connection left in the pool without its busy timeout."""

import sqlite3
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import pytest
from sqlalchemy import event, insert, select, text
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError

from identity import service
from identity.extensions import db
from identity.models import OFF_CHAIN, Change, Identity, User, new_id
from identity.statements import HeldReads, write_connection

IDENTITIES, CHANGES, USERS = Identity.__table__, Change.__table__, User.__table__
WALLET = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"
AT = datetime(2026, 11, 24, 19, 5, 7, 123456, tzinfo=UTC)


def a_user():
    return {"id": new_id(), "wallet": WALLET, "role": "User", "created_at": AT, "updated_at": AT, "last_login": None}


def an_identity(creator_id, number):
    """Every column, with the values that need converting: a uint256 past 64 bits, None, a boolean, times."""
    digits = f"{number:064x}"
    return {
        "id": new_id(), "identity_id": f"bafkrei{digits[-52:]}", "content_id": f"bafkreic{digits[-51:]}",
        "identity_hash": f"0x{digits}", "display_name": f"Row {number}", "description": None,
        "image": "https://example.org/a.png", "external_reference": None, "corpora_id": None, "semantic": None,
        **OFF_CHAIN, "assets_sum": 2**255 + number, "is_user": True,
        "created_at": AT, "updated_at": AT, "creator_id": creator_id,
    }


def stored(connection, sql, key):
    """The row as the driver gives it back: the bytes each path stored, before any conversion."""
    return tuple(connection.exec_driver_sql(sql, (key,) if connection.dialect.positional else {"key": key}).one())


def row_sql(connection, table, column):
    placeholder = "?" if connection.dialect.positional else "%(key)s"
    return f"SELECT * FROM {table} WHERE {column} = {placeholder}"


def test_a_creates_writes_store_exactly_what_a_core_insert_stores(app):
    user = a_user()
    by_core, by_writes = an_identity(user["id"], 1), an_identity(user["id"], 2)
    entry = {"identity_id": "x", "at": AT, "wallet": WALLET, "kind": "changed", "fields": {"n": {"after": 2**70}}}
    with app.app_context():
        with db.engine.begin() as connection:
            connection.execute(insert(USERS), user)
            connection.execute(insert(IDENTITIES), by_core)
            connection.execute(insert(CHANGES), {**entry, "identity_id": by_core["identity_id"]})
        with write_connection() as writes:
            writes.insert(IDENTITIES, by_writes)
            writes.insert(CHANGES, {**entry, "identity_id": by_writes["identity_id"]})
        with db.engine.connect() as connection:
            identities = row_sql(connection, "identities", "id")
            core_row, our_row = stored(connection, identities, by_core["id"]), stored(connection, identities, by_writes["id"])
            changes = row_sql(connection, "identity_changes", "identity_id")
            core_entry = stored(connection, changes, by_core["identity_id"])
            our_entry = stored(connection, changes, by_writes["identity_id"])

    differing = {"id", "identity_id", "content_id", "identity_hash", "display_name", "assets_sum"}
    keys = list(IDENTITIES.c.keys())
    assert [value for key, value in zip(keys, our_row, strict=True) if key not in differing] == [
        value for key, value in zip(keys, core_row, strict=True) if key not in differing
    ]
    assert int(our_row[keys.index("assets_sum")]) == 2**255 + 2
    # Each entry's seq comes from the database; the rest is the same bytes.
    assert our_entry[2:] == core_entry[2:] and our_entry[0] == core_entry[0] + 1


def test_a_duplicate_in_a_creates_writes_is_sqlalchemys_integrity_error_and_undoes_the_transaction(app):
    with app.app_context():
        user = a_user()
        with pytest.raises(IntegrityError), write_connection() as writes:
            writes.insert(USERS, user)
            writes.insert(USERS, {**user, "id": new_id()})  # the same wallet
        assert db.session.execute(select(USERS.c.wallet)).all() == []
        db.session.rollback()  # out of the snapshot of that read
        # The connection went back to the pool in working order: the next write commits.
        with write_connection() as writes:
            writes.insert(USERS, user)
        assert db.session.execute(select(USERS.c.id)).scalar_one() == user["id"]


def test_a_creates_writes_refuse_values_that_leave_a_column_to_a_default(app):
    with app.app_context(), pytest.raises(ValueError, match="role"), write_connection() as writes:
        writes.insert(USERS, {"id": new_id(), "wallet": WALLET, "created_at": AT, "updated_at": AT})


def test_a_creator_that_another_writer_made_a_user_since_the_creates_read_gets_that_user(app):
    """A create reads its creator before it takes the write lock; a wallet not seen then gets its user
    under the lock, unless another node made it in between: then the create is that user's."""
    theirs = a_user()
    with app.app_context():
        with write_connection() as writes:
            writes.insert(USERS, theirs)
        with write_connection() as writes:
            user = service._new_creator(writes, WALLET, AT)
        with write_connection() as writes:
            other = service._new_creator(writes, WALLET.lower().replace("5a", "5b"), AT)
        rows = db.session.execute(select(USERS.c.id, USERS.c.wallet).order_by(USERS.c.created_at, USERS.c.wallet)).all()
    assert (user["id"], user["wallet"], user["role"]) == (theirs["id"], WALLET, "User")
    assert other["id"] != theirs["id"]
    assert sorted(rows) == sorted([(theirs["id"], WALLET), (other["id"], other["wallet"])])


def pooled_busy_timeouts(app, count):
    """The busy timeout of `count` of the pool's connections, all checked out at once."""
    connections = [db.engine.raw_connection() for _ in range(count)]
    try:
        return [connection.cursor().execute("PRAGMA busy_timeout").fetchone()[0] for connection in connections]
    finally:
        for connection in connections:
            connection.close()


@pytest.mark.sqlite_only
def test_a_writer_that_waited_for_the_lock_and_gave_up_leaves_every_pooled_connection_its_busy_timeout(app, database_url):
    app.config["IDENTITY_SQLITE_BUSY_TIMEOUT_MS"] = 300
    locker = sqlite3.connect(database_url.removeprefix("sqlite:///"), isolation_level=None)
    with app.app_context():
        db.session.remove()
        configured = db.session.execute(text("PRAGMA busy_timeout")).scalar()
        db.session.remove()
        locker.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(OperationalError, match="locked"), write_connection():
                pass
        finally:
            locker.rollback()
        with write_connection() as writes:  # the lock is free: taken on the first try
            writes.insert(USERS, a_user())
        assert db.session.execute(select(USERS.c.wallet)).scalar_one() == WALLET
        db.session.remove()
        assert pooled_busy_timeouts(app, 6) == [configured] * 6
    locker.close()


@pytest.mark.sqlite_only
def test_outside_gevent_a_writer_waits_for_the_lock_in_sqlite_without_asking_again(app, database_url):
    """Under threads or a sync worker, SQLite's busy handler waits for another process's write lock,
    with the GIL released: the writer asks for the lock once, and writes when it is free. (Under
    gevent's worker it asks again and again, between cooperative pauses: tests/test_faults.py.)"""
    locker = sqlite3.connect(database_url.removeprefix("sqlite:///"), isolation_level=None, check_same_thread=False)
    asked = []
    with app.app_context():
        db.session.remove()
        db.engine.dispose()  # every connection from here on is traced: each statement SQLite starts
        event.listen(db.engine, "connect", lambda connection, _record: connection.set_trace_callback(asked.append))
        locker.execute("BEGIN IMMEDIATE")
        release = threading.Timer(0.4, locker.rollback)
        release.start()
        started = time.monotonic()
        try:
            with write_connection() as writes:
                writes.insert(USERS, a_user())
        finally:
            release.join()
        waited, begun = time.monotonic() - started, asked.count("BEGIN IMMEDIATE")
        assert db.session.execute(select(USERS.c.wallet)).scalar_one() == WALLET
        db.session.remove()
    locker.close()
    assert waited >= 0.35
    assert begun == 1


def test_threads_that_read_at_once_each_get_their_row(app, client, create, user_key):
    """On SQLite one connection is kept for one-statement reads; a thread that finds it in use reads on
    a pooled one (statements.HeldReads)."""
    ids = [create({"display_name": f"Read {number}"}).get_json()["identity_id"] for number in range(8)]
    start = threading.Barrier(len(ids))

    def read(identity_id):
        with app.app_context():
            start.wait()
            return service.get_identity_row(identity_id)[0]

    with ThreadPoolExecutor(len(ids)) as pool:
        rows = list(pool.map(read, ids))

    assert [row[IDENTITIES.c.keys().index("identity_id")] for row in rows] == ids


def test_a_read_whose_connection_broke_fails_once_and_the_next_reads_again(app, client, create, user_key, database_url):
    identity_id = create({"display_name": "Broken"}).get_json()["identity_id"]
    with app.app_context():
        assert service.get_identity_row(identity_id) is not None
        engine = db.engine
        # The database goes away under the process's connections (a server restarted, a file replaced).
        for connection in [engine.raw_connection() for _ in range(3)]:
            connection.invalidate()
        if engine.dialect.name == "sqlite":
            held = HeldReads.of(engine)
            held.connection.dbapi_connection.close()
        try:
            service.get_identity_row(identity_id)
        except DBAPIError:
            pass  # at most once: the connection it was on is invalidated
        assert service.get_identity_row(identity_id) is not None


def test_a_disposed_engine_gives_the_kept_connection_back(app, client, create, user_key, database_path):
    """(SQLite only, as database_path makes it: only SQLite keeps a connection for one-statement reads.)"""
    identity_id = create({"display_name": "Kept"}).get_json()["identity_id"]
    with app.app_context():
        engine = db.engine
        service.get_identity_row(identity_id)
        kept = HeldReads.of(engine).connection
        assert kept is not None
        engine.dispose()
        assert HeldReads.of(engine).connection is None
        assert kept.dbapi_connection is None  # closed, not left open behind a pool that is gone
        assert service.get_identity_row(identity_id) is not None
