"""The one way to the database (identity.storage.database): a write transaction that holds SQLite's write
lock from its first statement, reads of one statement, and no connection left in the pool without its
busy timeout."""

import sqlite3
import threading
import time
from datetime import UTC, datetime

import pytest
from sqlalchemy import insert, select, text
from sqlalchemy.exc import OperationalError

from identity.core import identities
from identity.core.users import user_of_wallet
from identity.storage.database import db, one_statement, write_transaction
from identity.storage.models import User, new_id

USERS = User.__table__
WALLET = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"
AT = datetime(2026, 11, 24, 19, 5, 7, 123456, tzinfo=UTC)


def a_user(wallet=WALLET):
    return {"id": new_id(), "wallet": wallet, "role": "User", "created_at": AT, "updated_at": AT, "last_login": None}


def test_a_wallet_whose_user_another_writer_made_gets_that_user_and_a_new_one_gets_its_own(app):
    """A create reads its creator before it takes the write lock; a wallet not seen then gets its user
    under the lock, unless another node made it in between: then the create is that user's."""
    theirs = a_user()
    other_wallet = "0x5bAeb6053F3E94C9b9A09f33669435E7Ef1BeAed".lower()
    with app.app_context():
        with write_transaction() as session:
            session.execute(insert(USERS), theirs)
        with write_transaction() as session:
            user = user_of_wallet(session, WALLET, now=AT)
        with write_transaction() as session:
            other = user_of_wallet(session, other_wallet, now=AT)
        rows = db.session.execute(select(USERS.c.id, USERS.c.wallet)).all()
        db.session.commit()
    assert (user["id"], user["wallet"], user["role"]) == (theirs["id"], WALLET, "User")
    assert other["id"] != theirs["id"]
    assert sorted(rows) == sorted([(theirs["id"], WALLET), (other["id"], other_wallet)])


def pooled_busy_timeouts(count):
    """The busy timeout of `count` of the pool's connections, all checked out at once."""
    connections = [db.engine.connect() for _ in range(count)]
    try:
        return [connection.exec_driver_sql("PRAGMA busy_timeout").scalar() for connection in connections]
    finally:
        for connection in connections:
            connection.close()


@pytest.mark.sqlite_only
def test_a_writer_that_waited_for_the_lock_and_gave_up_leaves_every_pooled_connection_its_busy_timeout(app, database_url):
    app.config["IDENTITY_SQLITE_BUSY_TIMEOUT_MS"] = 300
    locker = sqlite3.connect(database_url.removeprefix("sqlite:///"), isolation_level=None)
    with app.app_context():
        configured = db.session.execute(text("PRAGMA busy_timeout")).scalar()
        db.session.remove()
        locker.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(OperationalError, match="locked"), write_transaction():
                pass
            with pytest.raises(OperationalError, match="locked"), write_transaction(wait=False):
                pass
        finally:
            locker.rollback()
        with write_transaction() as session:  # the lock is free: taken on the first try
            session.execute(insert(USERS), a_user())
        assert db.session.execute(select(USERS.c.wallet)).scalar_one() == WALLET
        db.session.remove()
        assert pooled_busy_timeouts(6) == [configured] * 6
    locker.close()


@pytest.mark.sqlite_only
def test_a_writer_waits_for_another_processs_write_lock_then_writes(app, database_url):
    """Under threads or a sync worker as under gevent's (tests/storage/test_faults.py), a writer that finds
    SQLite's write lock held by another process waits for it, and writes once it is free: no 503 for a lock
    held well within the busy timeout."""
    locker = sqlite3.connect(database_url.removeprefix("sqlite:///"), isolation_level=None, check_same_thread=False)
    with app.app_context():
        locker.execute("BEGIN IMMEDIATE")
        release = threading.Timer(0.4, locker.rollback)
        release.start()
        started = time.monotonic()
        try:
            with write_transaction() as session:
                session.execute(insert(USERS), a_user())
        finally:
            release.join()
        waited = time.monotonic() - started
        assert db.session.execute(select(USERS.c.wallet)).scalar_one() == WALLET
        db.session.remove()
    locker.close()
    assert waited >= 0.35


def test_a_read_of_one_statement_inside_a_transaction_joins_it(app):
    """A one-statement read in a session that has begun reads in that transaction: it sees its writes."""
    with app.app_context():
        with write_transaction() as session:
            session.execute(insert(USERS), a_user())
            with one_statement() as connection:
                assert connection is session.connection()
                assert connection.execute(select(USERS.c.wallet)).scalar_one() == WALLET


def test_reads_after_the_database_went_away_under_the_pool_read_again(app, client, create, user_key):
    identity_id = create({"display_name": "Broken"}).get_json()["identity_id"]
    with app.app_context():
        assert identities.get_identity_row(identity_id) is not None
        # The database goes away under the process's connections (a server restarted, a file replaced).
        for connection in [db.engine.connect() for _ in range(3)]:
            connection.invalidate()
            connection.close()
        assert identities.get_identity_row(identity_id) is not None
