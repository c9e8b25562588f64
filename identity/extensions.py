"""The Flask extensions, created unbound so the factory can bind them to any app, and the one way the
service takes the database's write lock."""

import sqlite3
import threading
import time
from contextlib import contextmanager

from flask import current_app
from flask_migrate import Migrate
from flask_sqlalchemy import SQLAlchemy
from gevent import monkey
from sqlalchemy import event
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.orm import DeclarativeBase

from .faults import SQLITE_BUSY, sqlite_code


class Base(DeclarativeBase):
    pass


# Objects stay readable after commit: a view serializes what it just wrote without a reload.
db = SQLAlchemy(model_class=Base, session_options={"expire_on_commit": False})
migrate = Migrate()

# The execution option that marks a session's transaction as a writer (see write_transaction).
WRITE = "identity_write"
# And one that may not wait for the write lock: it fails at once if another holds it (see try_write_transaction).
NO_WAIT = "identity_no_wait"
# And one for a read that is a single statement: no BEGIN around it (see single_read).
SINGLE_READ = "identity_single_read"


def tune_sqlite(engine, busy_timeout_ms):
    """WAL, a busy timeout, foreign keys, and BEGIN IMMEDIATE for write transactions.

    The pysqlite recipe of SQLAlchemy's documentation ("Serializable isolation / Savepoints /
    Transactional DDL"): the driver's own transaction handling is turned off, and the "begin" event
    emits BEGIN itself.
    """

    @event.listens_for(engine, "connect")
    def on_connect(dbapi_connection, _record):
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        cursor.execute("PRAGMA journal_mode = WAL")
        # In WAL mode NORMAL loses nothing when processes die, only on power loss.
        cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def on_begin(connection):
        # A deferred transaction that later writes can fail at once with SQLITE_BUSY; taking the
        # write lock up front makes writers queue on the busy timeout instead.
        options = connection.get_execution_options()
        # A writer that must not wait gets no busy timeout; the connection gets its own back after.
        timeout = 0 if options.get(NO_WAIT) else int(busy_timeout_ms)
        pragma = [] if connection.info.get(NO_WAIT, int(busy_timeout_ms)) == timeout else [f"PRAGMA busy_timeout = {timeout}"]
        # Noted first: whatever fails after, the checkin event puts the connection's own timeout back.
        connection.info[NO_WAIT] = timeout
        # One statement is its own transaction: a BEGIN and a ROLLBACK would only add round trips.
        begin = [] if options.get(SINGLE_READ) else ["BEGIN IMMEDIATE" if options.get(WRITE) else "BEGIN"]
        # Sent on the DBAPI connection, as the connect event sends the other pragmas: a BEGIN needs
        # nothing of a statement's execution (run as one, it was a third of the CPU of an empty write
        # transaction), and the Connection is in the middle of beginning its transaction anyway.
        send_to_driver(connection.connection.dbapi_connection, pragma + begin, engine.dialect)

    @event.listens_for(engine, "checkin")
    def on_checkin(dbapi_connection, record):
        # A connection goes back to the pool with its own busy timeout: the next to check it out (a
        # GET's one statement, which begins nothing) waits as long as any other.
        if dbapi_connection is not None and record.info.get(NO_WAIT, int(busy_timeout_ms)) != int(busy_timeout_ms):
            try:
                send_to_driver(dbapi_connection, [f"PRAGMA busy_timeout = {int(busy_timeout_ms)}"], engine.dialect)
            except DBAPIError as error:
                record.invalidate(error)  # the pool opens a fresh one, with every setting, when next asked
            else:
                record.info[NO_WAIT] = int(busy_timeout_ms)


def send_to_driver(dbapi_connection, statements, dialect):
    """Run `statements` (SQL that sets up the connection: pragmas, BEGIN) on a DBAPI connection, in
    order; a driver's error is raised as SQLAlchemy's (DBAPIError.instance), as a Connection raises it."""
    if not statements:
        return
    cursor = dbapi_connection.cursor()
    try:
        for statement in statements:
            try:
                cursor.execute(statement)
            except dialect.loaded_dbapi.Error as error:
                raise DBAPIError.instance(statement, None, error, dialect.loaded_dbapi.Error) from error
    finally:
        cursor.close()


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
        if deadline is None:  # SQLite's busy handler waits (see in_turn)
            session.connection(execution_options={WRITE: True})
        else:
            wait_for_the_write_lock(lambda: _begin_writing(session), deadline)
        yield from _committed(session)


@contextmanager
def in_turn(writers):
    """Hold `writers` (see wait_for_writes_in_turn) for the block; it gets the deadline of its wait for
    SQLite's lock (both waits together last at most the busy timeout), or None where SQLite's own busy
    handler is to wait for it, for the whole busy timeout. `writers` None (a server database): nothing
    to hold, and None.

    SQLite's busy handler sleeps inside the C call, with the GIL released: under a sync worker or
    threads nothing else of the process needs the thread meanwhile, and the wait costs no CPU. Only
    under gevent's worker, whose greenlets share the thread, would that sleep stop every other
    request of the worker (see wait_for_the_write_lock). Where a writer of this process had to wait
    here first, part of the busy timeout is spent: wait_for_the_write_lock keeps to what is left.
    """
    if writers is None:
        yield None
        return
    # One writer of this process at a time waits for SQLite's lock and writes; the others wait here,
    # in turn and without a cost (a gevent lock under gevent's worker, a thread lock elsewhere).
    timeout = current_app.config["IDENTITY_SQLITE_BUSY_TIMEOUT_MS"] / 1000
    deadline = time.monotonic() + timeout
    if writers.acquire(blocking=False):
        deadline = deadline if monkey.is_module_patched("time") else None
    elif not writers.acquire(timeout=timeout):
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
    """Give `app` (on SQLite) the lock its writers take in turn: made here, in the process that
    serves, so that under gevent's worker it is gevent's (the module is imported before gevent
    patches threading)."""
    app.extensions[WRITERS] = threading.RLock()


# How long a writer that found SQLite's write lock taken pauses before it asks again: doubling from
# the first figure up to the second, in seconds.
LOCK_PAUSES = (0.0002, 0.004)


def wait_for_the_write_lock(take, deadline):
    """`take()` (which takes SQLite's write lock without waiting, or raises OperationalError) again
    and again while another connection holds the lock, for up to `deadline` (time.monotonic(); the
    busy timeout: then the OperationalError "database is locked", a 503, as before). Returns what
    `take()` returns.

    SQLite's own wait (its busy handler) sleeps inside the C call, in steps of 1 to 100 ms: under
    gevent the whole worker stops meanwhile, every other request it holds included, and a lock
    freed after a millisecond is seen only when the sleep ends. Asked without a wait (NO_WAIT) and
    paused here with time.sleep, which gevent makes cooperative, the worker serves its other
    requests while this one waits, and the lock is taken within LOCK_PAUSES[1] of its release.
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


@contextmanager
def single_read():
    """A connection for a read that is one statement, outside any transaction; closed at the end.

    One statement sees one snapshot anyway, so it needs no BEGIN before it nor ROLLBACK after it,
    nor an ORM session around it: on SQLite the "begin" event (see tune_sqlite) emits no BEGIN;
    on a server database the connection runs in autocommit (SQLAlchemy's per-connection isolation
    level, reset when the connection goes back to the pool). The statement is the only round trip.
    """
    with db.engine.connect() as connection:
        if connection.dialect.name == "sqlite":
            yield connection.execution_options(**{SINGLE_READ: True})
        else:
            yield connection.execution_options(isolation_level="AUTOCOMMIT")
