"""Statements whose SQL is made once, for the two hottest paths, on a pooled DBAPI connection: a
GET's one-row read, and a create's writes.

Each takes its SQL from SQLAlchemy's compiler and its conversions from the column types' own
processors (TypeEngine.result_processor and bind_processor), once for each statement and kind of
database, so that a request pays only for the driver's work and what it converts.
"""

import os
import threading
import weakref
from contextlib import closing, contextmanager
from operator import itemgetter

from flask import current_app
from sqlalchemy import Table, event, insert
from sqlalchemy.exc import DBAPIError

from .extensions import NO_WAIT, WRITERS, db, in_turn, send_to_driver, wait_for_the_write_lock


def read_one(statement, value):
    """The first row of `statement` (a select with one bound parameter, here `value`) as the driver
    gives it (a tuple, its values not converted to the models' types), and how to convert it
    (typed_row); or None.

    A read of one statement needs none of a Connection's work (a transaction, result processing): it
    goes on a DBAPI connection, Engine.raw_connection(), as SQLAlchemy offers for "special
    situations when the API provided by Connection is not needed". On SQLite it is the connection the
    process keeps for such reads (HeldReads); elsewhere a pooled one. A driver's error reaches the
    app's error handlers as SQLAlchemy's would (a 503 for a database that does not answer).
    """
    engine = db.engine
    dialect = engine.dialect
    sql, arguments = _raw_statement(statement, dialect, value)
    held = HeldReads.of(engine) if dialect.name == "sqlite" else None
    if held is not None and held.lock.acquire(blocking=False):
        try:
            if held.connection is None:
                held.connection = _checkout(engine, sql, arguments)
            return _read(held.connection, statement, dialect, sql, arguments)
        except DBAPIError:
            # _read invalidated it: it goes back to the pool, and the next read checks a fresh one out.
            broken, held.connection = held.connection, None
            if broken is not None:
                broken.close()
            raise
        finally:
            held.lock.release()
    connection = _checkout(engine, sql, arguments)
    try:
        # SQLite's connections are in autocommit already (tune_sqlite); a server's is put in it for the
        # statement, so that no transaction is begun, and none is rolled back when it goes back to the pool.
        return _read(connection, statement, dialect, sql, arguments, autocommit=dialect.name != "sqlite")
    finally:
        connection.close()  # back to the pool


class HeldReads:
    """The one pooled SQLite connection a process keeps checked out for read_one, with the lock that
    lets one thread at a time use it.

    A pool's checkout and return, with their locks, events and reset, cost a GET more than its
    statement: 17 µs in-process, about 5% of a gevent worker's time under load. SQLite's reads never
    yield to another greenlet, so under gevent the lock is never found taken; under threads, a read
    that finds it taken checks a pooled connection out, as before. The connection is closed when the
    engine is disposed, and a process made by fork opens its own.
    """

    def __init__(self, engine):
        self.pid = os.getpid()
        self.lock = threading.Lock()
        self.connection = None
        event.listen(engine, "engine_disposed", self.release)

    @classmethod
    def of(cls, engine):
        held = _HELD.get(engine)
        if held is None or held.pid != os.getpid():
            held = _HELD[engine] = cls(engine)
        return held

    def release(self, _engine=None):
        """Close the connection kept (the engine was disposed: its pool is gone)."""
        with self.lock:
            connection, self.connection = self.connection, None
        if connection is not None and self.pid == os.getpid():
            connection.detach()  # not back to a disposed pool: closed for good
            connection.close()


# {engine: its HeldReads in this process}: weakly, so that an engine that goes takes its entry along.
_HELD = weakref.WeakKeyDictionary()


def _checkout(engine, sql, arguments):
    dialect = engine.dialect
    try:
        return engine.raw_connection()
    except dialect.loaded_dbapi.Error as error:
        raise DBAPIError.instance(sql, arguments, error, dialect.loaded_dbapi.Error) from error


def _read(connection, statement, dialect, sql, arguments, autocommit=False):
    """The first row of `sql` on `connection` (a pool's DBAPI connection), with its converters."""
    try:
        if autocommit:
            dialect.set_isolation_level(connection.dbapi_connection, "AUTOCOMMIT")
        cursor = connection.cursor()
        try:
            cursor.execute(sql, arguments)
            row = cursor.fetchone()
            return None if row is None else (row, _converters(statement, dialect, cursor.description))
        finally:
            cursor.close()
            if autocommit:
                dialect.reset_isolation_level(connection.dbapi_connection)
    except dialect.loaded_dbapi.Error as error:
        connection.invalidate()  # whatever broke, the next request gets a fresh connection
        raise DBAPIError.instance(sql, arguments, error, dialect.loaded_dbapi.Error) from error


def typed_row(row, converters):
    """A row from read_one in the models' types, as a Connection would have given it."""
    return tuple(value if convert is None else convert(value) for value, convert in zip(row, converters, strict=True))


_TYPE_CODE = itemgetter(1)  # of a column in a DBAPI cursor's description
# {(statement, dialect, driver, the driver's type codes of its columns): each column's converter or None}
_CONVERTERS = {}


def _converters(statement, dialect, description):
    """What SQLAlchemy converts each column of `statement` with, for this driver's result: each
    column type's result_processor (None where the driver's value is the model's already)."""
    codes = tuple(map(_TYPE_CODE, description))
    kind = (statement, dialect.name, dialect.driver, codes)
    if kind not in _CONVERTERS:
        _CONVERTERS[kind] = tuple(
            column.type.dialect_impl(dialect).result_processor(dialect, code)
            for column, code in zip(statement.selected_columns, codes, strict=True)
        )
    return _CONVERTERS[kind]


def _raw_statement(statement, dialect, value):
    """The SQL of `statement` (see _compiled) for `dialect`, and `value` as its one parameter in the paramstyle."""
    sql, (name,), (process,) = _compiled(statement, dialect, None)
    value = value if process is None else process(value)
    return sql, ((value,) if dialect.positional else {name: value})


@contextmanager
def write_connection():
    """A pooled DBAPI connection in a transaction that holds the write lock from its start, as
    write_transaction's session does (SQLite's BEGIN IMMEDIATE; a server database locks rows as they
    are written), for a write of a few statements that needs nothing of the ORM nor of a Connection
    (a create); yields its Writes. Committed at the end, rolled back on an error.

    A Connection around a create's two inserts (its construction, transaction, execution contexts,
    results and commit, with the write lock held through them) was a ninth of the create's Python
    work. As for read_one, the connection is Engine.raw_connection(): the pool's events, its reset
    and its invalidation work as for any other; a driver's error reaches the caller as SQLAlchemy's
    (DBAPIError.instance: an IntegrityError for a duplicate key, an OperationalError for a locked or
    unreachable database), as a Connection raises it.
    """
    engine = db.engine
    writers = current_app.extensions.get(WRITERS)
    with in_turn(writers) as deadline, _opened(engine) as writes:
        if writers is not None:  # SQLite (see wait_for_writes_in_turn)
            if deadline is None:  # SQLite's busy handler waits (see in_turn)
                writes.begin(wait=True)
            else:
                wait_for_the_write_lock(lambda: writes.begin(wait=False), deadline)
        yield writes


@contextmanager
def _opened(engine):
    with closing(_checkout(engine, "BEGIN", None)) as connection:  # back to the pool at the end, which resets it
        writes = Writes(connection, engine.dialect)
        try:
            yield writes
            writes.commit()
        except BaseException as error:
            writes.rollback(error)
            raise
        finally:
            writes.close()


class Writes:
    """The statements of one write transaction on a pooled DBAPI connection (see write_connection).

    Each statement is compiled by SQLAlchemy once per kind of database (and, for an insert, the keys
    of its values), and its parameters converted by the column types' own bind processors, as a
    Connection converts them. A Core execute finds its compiled form by a cache key made of the
    statement and its values' keys on every call: about 45 µs of CPU for an insert whose driver's
    work is 5 µs.
    """

    def __init__(self, connection, dialect):
        self.connection = connection
        self.dialect = dialect
        self.cursor = connection.cursor()

    def begin(self, wait):
        """SQLite's BEGIN IMMEDIATE. `wait=False`: with no busy timeout, so that a lock another
        connection holds fails at once (OperationalError); the pool's checkin event gives the
        connection its own timeout back (see extensions.tune_sqlite)."""
        statements = ["BEGIN IMMEDIATE"]
        if not wait and self.connection.info.get(NO_WAIT) != 0:
            # Noted first: whatever fails after, the checkin event puts the connection's own timeout back.
            self.connection.info[NO_WAIT] = 0
            statements.insert(0, "PRAGMA busy_timeout = 0")
        send_to_driver(self.connection.dbapi_connection, statements, self.dialect)

    def insert(self, statement, values):
        """Insert one row, `values` (column keys to values in the models' types), with `statement`
        (a table, or an insert of it: a module constant, as its SQL is kept); returns the rows it
        inserted, 0 or 1. The values must name every column the insert needs: no defaults are computed."""
        sql, order, processors = _compiled(statement, self.dialect, tuple(values))
        return self._run(sql, order, processors, values).rowcount

    def execute(self, statement, parameters=None):
        """Run `statement` (a module constant, as its SQL is kept) with `parameters`; returns the cursor."""
        sql, order, processors = _compiled(statement, self.dialect, None)
        return self._run(sql, order, processors, parameters or {})

    def read_one(self, statement, parameters):
        """The first row of the select `statement`, in the models' types, or None."""
        cursor = self.execute(statement, parameters)
        row = cursor.fetchone()
        return None if row is None else typed_row(row, _converters(statement, self.dialect, cursor.description))

    def commit(self):
        self._driver("COMMIT", None, self.connection.commit)

    def rollback(self, error):
        """Undo the transaction, after `error`; a connection that cannot roll back, or whose database
        went away, is invalidated: the pool opens a fresh one when next asked."""
        try:
            self.connection.rollback()
        except self.dialect.loaded_dbapi.Error:
            self.connection.invalidate()
            return
        original = getattr(error, "orig", None)
        if original is not None and self.dialect.is_disconnect(original, self.connection.dbapi_connection, self.cursor):
            self.connection.invalidate()

    def close(self):
        try:
            self.cursor.close()
        except self.dialect.loaded_dbapi.Error:
            pass  # a connection that broke: rollback invalidated it, and its cursors go with it

    def _run(self, sql, order, processors, parameters):
        converted = [
            parameters[key] if process is None else process(parameters[key])
            for key, process in zip(order, processors, strict=True)
        ]
        arguments = tuple(converted) if self.dialect.positional else dict(zip(order, converted, strict=True))
        self._driver(sql, arguments, self.cursor.execute, sql, arguments)
        return self.cursor

    def _driver(self, sql, parameters, call, *arguments):
        try:
            return call(*arguments)
        except self.dialect.loaded_dbapi.Error as error:
            raise DBAPIError.instance(sql, parameters, error, self.dialect.loaded_dbapi.Error) from error


# {(statement or table, the keys of an insert's values, dialect, driver, paramstyle): (SQL, the keys
# in the order of its parameters, each one's bind processor or None)}: an entry for each statement
# read_one or a create's Writes runs (module constants) on each kind of database in use.
_COMPILED = {}


def _compiled(statement, dialect, keys):
    kind = (statement, keys, dialect.name, dialect.driver, dialect.paramstyle)
    if kind not in _COMPILED:
        if isinstance(statement, Table):
            statement = insert(statement)
        compiled = statement.compile(dialect=dialect, column_keys=keys)
        order = tuple(compiled.positiontup) if dialect.positional else tuple(compiled.params)
        if keys is not None and (missing := set(order) - set(keys)):
            raise ValueError(f"An insert needs a value for every column it has: {sorted(missing)}.")
        processors = tuple(compiled.binds[key].type.dialect_impl(dialect).bind_processor(dialect) for key in order)
        _COMPILED[kind] = str(compiled), order, processors
    return _COMPILED[kind]
