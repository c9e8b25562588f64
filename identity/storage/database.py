"""The database: Flask-SQLAlchemy's `db` and Flask-Migrate's `migrate`, created unbound so the factory
can bind them to any app; SQLite's settings; and the two ways a request uses the session: a write
transaction that holds the write lock from its first statement, and a read that is one statement.

Every statement of the service goes through Flask-SQLAlchemy's engine: on the session (ORM, or Core statements
executed on it), or, for a read of one statement outside any transaction, on a connection of the engine's pool.
"""

import os
import sqlite3
import threading
import time
from contextlib import contextmanager

from blinker import Namespace
from flask import current_app
from flask_migrate import Migrate
from flask_sqlalchemy import SQLAlchemy
from sqlalchemy import event
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import DeclarativeBase, Session

from .faults import SQLITE_BUSY, sqlite_code


class Base(DeclarativeBase):
    pass


# Objects stay readable after commit: a view serializes what it just wrote without a reload.
db = SQLAlchemy(model_class=Base, session_options={"expire_on_commit": False})
migrate = Migrate()

def sqlite_file(url):
    """The path of the file an SQLite `url` (a SQLAlchemy URL) names; None for a database in memory or of
    another kind. A URI filename (`sqlite:///file:PATH?mode=ro&uri=true`) names PATH."""
    if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:"):
        return None
    database = url.database
    if url.query.get("uri"):
        database = database.removeprefix("file:").partition("?")[0]
        if not database or database == ":memory:" or url.query.get("mode") == "memory":
            return None
    return database


def missing_sqlite_file(url):
    """The path of the SQLite file `url` names when no such file exists, else None. Opening it would create
    it, empty: a command that only reads or writes a database checks this first, so that a mistyped
    DATABASE_URL leaves nothing behind (only `db upgrade` creates the database)."""
    path = sqlite_file(url)
    return path if path is not None and not os.path.exists(path) else None


# Sent after a session's commit with what its transaction noted (note below), `notes` a set of words: so
# that work which must follow a commit (waking the live feeds) hangs on the session's commit, and the
# code that writes knows nothing of it.
committed = Namespace().signal("identity.committed")
_NOTES = "identity_notes"


def note(session, what):
    """Note `what` in `session`'s transaction, for the `committed` signal sent after its commit."""
    session.info.setdefault(_NOTES, set()).add(what)


@event.listens_for(Session, "after_commit")
def _send_notes(session):
    notes = session.info.pop(_NOTES, None)
    if notes:
        committed.send(session, notes=notes)


@event.listens_for(Session, "after_rollback")
def _drop_notes(session):
    session.info.pop(_NOTES, None)


# Execution options the "begin" event reads (see tune_sqlite): a transaction that will write (SQLite's
# BEGIN IMMEDIATE), one that must not wait for the write lock, and a read that is one statement.
WRITE = "identity_write"
NO_WAIT = "identity_no_wait"
ONE_STATEMENT = "identity_one_statement"
# The busy timeout a pooled SQLite connection has now, in its `info`.
BUSY_TIMEOUT = "identity_busy_timeout"


def tune_sqlite(engine, busy_timeout_ms):
    """WAL, a busy timeout, foreign keys, and BEGIN IMMEDIATE for write transactions.

    SQLAlchemy's pysqlite recipe ("Serializable isolation / Savepoints / Transactional DDL"): the
    driver's own transaction handling is turned off, and the "begin" event emits BEGIN itself.
    """
    busy_timeout_ms = int(busy_timeout_ms)

    @event.listens_for(engine, "connect")
    def on_connect(dbapi_connection, record):
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {busy_timeout_ms}")
        cursor.execute("PRAGMA journal_mode = WAL")
        # In WAL mode NORMAL loses nothing when processes die, only on power loss.
        cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.close()
        record.info[BUSY_TIMEOUT] = busy_timeout_ms

    @event.listens_for(engine, "begin")
    def on_begin(connection):
        options = connection.get_execution_options()
        # A writer that must not wait gets no busy timeout; any other transaction, the connection's own.
        timeout = 0 if options.get(NO_WAIT) else busy_timeout_ms
        if connection.info.get(BUSY_TIMEOUT) != timeout:
            connection.info[BUSY_TIMEOUT] = None  # unknown until the pragma has run
            connection.exec_driver_sql(f"PRAGMA busy_timeout = {timeout}")
            connection.info[BUSY_TIMEOUT] = timeout
        # A deferred transaction that later writes can fail at once with SQLITE_BUSY; taking the write
        # lock up front makes writers queue instead. One statement is its own transaction: no BEGIN.
        if not options.get(ONE_STATEMENT):
            connection.exec_driver_sql("BEGIN IMMEDIATE" if options.get(WRITE) else "BEGIN")


@contextmanager
def one_statement():
    """A connection for a read that is a single statement: outside any transaction, so that its statement is
    its only round trip (no BEGIN before it, no ROLLBACK after it). Within a transaction the request's session
    has begun already, the read simply joins it.

    Outside one, the read takes a connection of Flask-SQLAlchemy's engine from the pool for its statement
    and gives it back at once: a GET of one row never makes a session, whose making, bookkeeping and
    closing at the request's end cost more than the statement (docs/performance.md). One statement sees
    one snapshot anyway. On SQLite the "begin" event emits no BEGIN for it; on a server database the
    connection runs in autocommit (SQLAlchemy's per-connection isolation level, reset when the connection
    goes back to the pool).
    """
    registry = db.session
    if registry.registry.has() and registry().in_transaction():
        yield registry().connection()
        return
    engine = db.engine
    sqlite = engine.dialect.name == "sqlite"
    with engine.connect().execution_options(**({ONE_STATEMENT: True} if sqlite else {"isolation_level": "AUTOCOMMIT"})) as connection:
        yield connection


@contextmanager
def write_transaction(wait=True):
    """The request's session in a transaction that holds the database's write lock from its first
    statement (on SQLite; a server database locks rows as they are written). Commits at the end.

    `wait=False`: on SQLite, fail at once (OperationalError, "database is locked") rather than wait
    for another connection's write lock; for writes that are best effort.
    """
    session = db.session()
    # Whatever the session has open (a read of this same request) ends first: the write lock must
    # not be waited for by a transaction of this very request, and a begun connection takes no options.
    if session.in_transaction():
        session.commit()
    writers = current_app.extensions.get(WRITERS) if wait else None
    if writers is None:
        session.connection(execution_options={WRITE: True, NO_WAIT: not wait})
        yield from _committed(session)
        return
    with in_turn(writers) as deadline:
        wait_for_the_write_lock(lambda: _begin_writing(session), deadline)
        yield from _committed(session)


def _committed(session):
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise


# The app's lock for its writers on SQLite, in app.extensions (see wait_for_writes_in_turn).
WRITERS = "identity_sqlite_writers"


def wait_for_writes_in_turn(app):
    """Give `app` (on SQLite) the lock its writers take in turn: made here, in the process that serves,
    so that under gevent's worker it is gevent's (the module is imported before gevent patches threading)."""
    app.extensions[WRITERS] = threading.RLock()


@contextmanager
def in_turn(writers):
    """Hold `writers` (see wait_for_writes_in_turn) for the block; it gets the deadline of its wait for
    SQLite's lock (see wait_for_the_write_lock): both waits together last at most the busy timeout.

    One writer of a process at a time waits for SQLite's lock; the others wait here, in turn and without a
    cost (a gevent lock under gevent's worker, a thread lock elsewhere).
    """
    timeout = current_app.config["IDENTITY_SQLITE_BUSY_TIMEOUT_MS"] / 1000
    deadline = time.monotonic() + timeout
    if not writers.acquire(timeout=timeout):
        raise OperationalError("BEGIN IMMEDIATE", None, sqlite3.OperationalError("database is locked"))
    try:
        yield deadline
    finally:
        writers.release()


def _begin_writing(session):
    """Take SQLite's write lock for `session` without waiting (OperationalError if it is taken)."""
    try:
        session.connection(execution_options={WRITE: True, NO_WAIT: True})
    except OperationalError:
        session.rollback()
        raise


# How long a writer that found SQLite's write lock taken pauses before it asks again: doubling from the
# first figure up to the second, in seconds.
LOCK_PAUSES = (0.0002, 0.004)


def wait_for_the_write_lock(take, deadline):
    """`take()` (which takes SQLite's write lock without waiting, or raises OperationalError) again and
    again while another connection holds the lock, until `deadline` (time.monotonic(); then the
    OperationalError "database is locked", a 503). Returns what `take()` returns.

    SQLite's own wait (its busy handler) sleeps inside the C call in steps of 1 to 100 ms, so a lock freed
    after a fraction of a millisecond, as a create's is, is seen only when the sleep ends: the writer and
    its core idle meanwhile. Asked without a wait and paused here, a writer takes the lock within
    LOCK_PAUSES[1] of its release (the measured gain: docs/performance.md, "Where a request's time goes").
    Under gevent's worker, whose greenlets
    share the thread, the sleep in C would also stop every other request of the worker; time.sleep,
    which gevent makes cooperative, serves them meanwhile.
    """
    pause = LOCK_PAUSES[0]
    while True:
        try:
            return take()
        except OperationalError as error:
            if sqlite_code(error) != SQLITE_BUSY or time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, LOCK_PAUSES[1])
