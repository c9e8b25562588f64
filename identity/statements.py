"""Statements whose SQL is made once, for the two hottest paths: a GET's one-row read, on a pooled
DBAPI connection, and a create's inserts, through Connection.exec_driver_sql.

Each takes its SQL from SQLAlchemy's compiler and its conversions from the column types' own
processors (TypeEngine.result_processor and bind_processor), once for each statement and kind of
database, so that a request pays only for the driver's work and what it converts.
"""

import os
import threading
import weakref
from operator import itemgetter

from sqlalchemy import event, insert
from sqlalchemy.exc import DBAPIError

from .extensions import db


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


# {(statement, dialect, driver, paramstyle): (SQL, its parameter's name)}: an entry for each statement
# read_one runs (module constants) on each kind of database in use.
_RAW_STATEMENTS = {}


def _raw_statement(statement, dialect, value):
    """The SQL of `statement` for `dialect`, and `value` as its one parameter in the paramstyle."""
    kind = (statement, dialect.name, dialect.driver, dialect.paramstyle)
    if kind not in _RAW_STATEMENTS:
        compiled = statement.compile(dialect=dialect)
        (name,) = compiled.params
        _RAW_STATEMENTS[kind] = str(compiled), name
    sql, name = _RAW_STATEMENTS[kind]
    return sql, ((value,) if dialect.positional else {name: value})


# {(table, the keys of its values, dialect, driver, paramstyle): (SQL, the keys in the order of its
# parameters, each one's bind processor or None)}: an entry for each insert_row call site in use.
_INSERTS = {}


def insert_row(connection, table, values):
    """Insert one row, `values` (column keys to values in the models' types), into `table` on
    `connection` (a Core Connection, in its transaction): what connection.execute(insert(table),
    values) does, for values that name every column the insert needs (no defaults are computed).

    A Core insert finds its compiled form by a cache key made of the statement and the keys of its
    values, then processes each parameter: about 45 µs of CPU for an insert whose driver's work is
    5 µs. Here the SQL and each column's bind processor are made once per table, keys and kind of
    database; the insert goes through exec_driver_sql, with SQLAlchemy's events and error wrapping
    (an IntegrityError for a duplicate key, as before).
    """
    dialect = connection.dialect
    keys = tuple(values)
    kind = (table, keys, dialect.name, dialect.driver, dialect.paramstyle)
    if kind not in _INSERTS:
        compiled = insert(table).compile(dialect=dialect, column_keys=keys)
        order = tuple(compiled.positiontup) if dialect.positional else tuple(compiled.params)
        if missing := set(order) - set(keys):
            raise ValueError(f"insert_row needs a value for every column the insert has: {sorted(missing)}.")
        processors = tuple(compiled.binds[key].type.dialect_impl(dialect).bind_processor(dialect) for key in order)
        _INSERTS[kind] = str(compiled), order, processors
    sql, order, processors = _INSERTS[kind]
    converted = (
        values[key] if process is None else process(values[key]) for key, process in zip(order, processors, strict=True)
    )
    if dialect.positional:
        return connection.exec_driver_sql(sql, tuple(converted))
    return connection.exec_driver_sql(sql, dict(zip(order, converted, strict=True)))
