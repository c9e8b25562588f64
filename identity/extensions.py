"""The Flask extensions, created unbound so the factory can bind them to any app, and the ways the
service reaches the database through them: session transactions, and for the hot paths, statements
run straight on pooled DBAPI connections."""

import os
import threading
import weakref
from contextlib import contextmanager

from flask_migrate import Migrate
from flask_sqlalchemy import SQLAlchemy
from sqlalchemy import Boolean, event
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import DeclarativeBase


class Base(DeclarativeBase):
    pass


# Objects stay readable after commit: a view serializes what it just wrote without a reload.
db = SQLAlchemy(model_class=Base, session_options={"expire_on_commit": False})
migrate = Migrate()

_WRITE = "identity_write"


def tune_sqlite(engine, busy_timeout_ms):
    """WAL, a busy timeout, foreign keys, and BEGIN IMMEDIATE for write transactions."""

    @event.listens_for(engine, "connect")
    def on_connect(dbapi_connection, _record):
        # Take transaction control from pysqlite so the "begin" hook below decides how to begin.
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
        # A deferred transaction that later writes can fail at once with SQLITE_BUSY;
        # taking the write lock up front makes writers queue on the busy timeout instead.
        # Straight to the driver: SQLAlchemy's statement machinery would cost more than the statement.
        driver = connection.connection.driver_connection
        driver.execute("BEGIN IMMEDIATE" if connection.get_execution_options().get(_WRITE) else "BEGIN")


def remove_open_session(_exception=None):
    """Flask-SQLAlchemy's teardown, for a request or app context that opened a session.

    Its own removes the session whether or not there is one, and SQLAlchemy finds out that there
    is none by raising and catching a KeyError: a cost on every read, none of which opens one.
    """
    if db.session.registry.has():
        db.session.remove()


def _commit_open_session():
    # What the request's session has open is committed first, so that the write lock taken next
    # is not waited for by a transaction of this same request. (A request without one, such as a
    # create, does not make one to ask.)
    if db.session.registry.has():
        session = db.session()
        if session.in_transaction():
            session.commit()


@contextmanager
def write_transaction():
    """A session transaction that holds the database's write lock from its first statement."""
    _commit_open_session()
    session = db.session()
    session.connection(execution_options={_WRITE: True})
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise


class CoreTransaction:
    """A write transaction's statements, on a SQLAlchemy Connection: what the cold paths use.

    It has RawTransaction's interface, so that the code shared by the hot and the cold paths (a user
    found or created for a wallet) is written once.
    """

    def __init__(self, connection):
        self.connection = connection

    def first(self, statement, params):
        row = self.connection.execute(statement, params).first()
        return None if row is None else tuple(row)

    def execute(self, statement, params):
        self.connection.execute(statement, params)

    def savepoint(self):
        return self.connection.begin_nested()


class RawTransaction:
    """A write transaction's statements, run straight on the pooled DBAPI connection (see `raw_write`)."""

    def __init__(self, engine, connection):
        self.engine = engine
        self.connection = connection

    def first(self, statement, params):
        """The first row of a SELECT, as a tuple of converted values in the order of its columns, or None."""
        return _first_row(self.engine, self.connection, _prepared(statement, self.engine.dialect, None), params)

    def execute(self, statement, params):
        """An INSERT or UPDATE. The INSERT must name every column: no Python-side default runs here."""
        prepared = _prepared(statement, self.engine.dialect, tuple(sorted(params)))
        _run(self.engine, self.connection, prepared.sql, prepared.arguments(params), _execute)

    @contextmanager
    def savepoint(self):
        self.execute_sql("SAVEPOINT identity_savepoint")
        try:
            yield
        except BaseException:
            self.execute_sql("ROLLBACK TO SAVEPOINT identity_savepoint")
            raise
        self.execute_sql("RELEASE SAVEPOINT identity_savepoint")

    def execute_sql(self, sql):
        _run(self.engine, self.connection, sql, (), _execute)


@contextmanager
def raw_write():
    """A RawTransaction that holds the database's write lock from its first statement, committed at the end.

    For the create path, whose few statements need none of SQLAlchemy's per-execution machinery
    (which costs more than the statements themselves): SQLAlchemy still compiles them, once per
    dialect, converts values with the columns' own types, lends the connection from its pool, and
    shapes the driver's errors as its own (an IntegrityError is an IntegrityError; an
    OperationalError is a 503, see errors.py). On SQLite it runs on the thread's own connection,
    the one its reads use (see _ThreadConnections).
    """
    _commit_open_session()
    engine = db.engine
    connection = _hot_connection(engine)
    transaction = RawTransaction(engine, connection)
    try:
        if engine.dialect.name == "sqlite":
            # As the "begin" hook of tune_sqlite does for write transactions of the session.
            transaction.execute_sql("BEGIN IMMEDIATE")
        yield transaction
        _run(engine, connection, "COMMIT", (), lambda dbapi_connection, *_: dbapi_connection.commit())
    except BaseException:
        if connection.is_valid:
            try:
                connection.rollback()
            except engine.dialect.loaded_dbapi.Error:
                connection.invalidate()  # and so not kept as the thread's connection
        raise
    finally:
        _release(engine, connection)


class _Prepared:
    """A statement compiled for one dialect: its SQL, its parameters' order and conversions, its columns' readers."""

    __slots__ = ("sql", "positions", "converters", "readers")

    def __init__(self, statement, dialect, column_keys):
        compiled = statement.compile(dialect=dialect, column_keys=list(column_keys) if column_keys else None)
        if getattr(compiled, "insert_prefetch", None) or getattr(compiled, "update_prefetch", None):
            raise ValueError("a statement run on the DBAPI connection must be given every column's value")
        self.sql = compiled.string
        self.positions = compiled.positiontup
        self.converters = [
            (name, convert)
            for name, bind in compiled.binds.items()
            if (convert := bind.type.dialect_impl(dialect).bind_processor(dialect)) is not None
        ]
        self.readers = []
        if getattr(statement, "is_select", False):
            columns = statement.selected_columns
            self.readers = [
                (index, read)
                for index, column in enumerate(columns)
                if (read := _driver_reader(column.type)) is not None
            ]

    def arguments(self, params):
        if self.converters:
            params = dict(params)
            for name, convert in self.converters:
                if name in params:
                    params[name] = convert(params[name])
        return params if self.positions is None else tuple(params[name] for name in self.positions)

    def row(self, row):
        if not self.readers:
            return tuple(row)
        values = list(row)
        for index, read in self.readers:
            if values[index] is not None:
                values[index] = read(values[index])
        return tuple(values)


_PREPARED = {}


def _prepared(statement, dialect, column_keys):
    key = (id(statement), dialect.name, column_keys)
    prepared = _PREPARED.get(key)
    if prepared is None:
        prepared = _PREPARED[key] = _Prepared(statement, dialect, column_keys)
    return prepared


def _execute(dbapi_connection, sql, arguments):
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(sql, arguments)
    finally:
        cursor.close()


def _fetch_first(dbapi_connection, sql, arguments):
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(sql, arguments)
        return cursor.fetchone()
    finally:
        cursor.close()


def _checkout(engine):
    try:
        return engine.raw_connection()
    except engine.dialect.loaded_dbapi.Error as error:
        raise DBAPIError.instance(None, None, error, engine.dialect.loaded_dbapi.Error, dialect=engine.dialect) from error


def _run(engine, connection, sql, arguments, call):
    """call(DBAPI connection, sql, arguments), with driver errors shaped as SQLAlchemy's execution shapes them."""
    dbapi = engine.dialect.loaded_dbapi
    try:
        return call(connection.dbapi_connection, sql, arguments)
    except dbapi.Error as error:
        # As SQLAlchemy's own execution would: a connection the server dropped leaves the pool, and
        # the driver's error becomes SQLAlchemy's.
        lost = engine.dialect.is_disconnect(error, connection.dbapi_connection, None)
        if lost:
            connection.invalidate(error)
        raise DBAPIError.instance(
            sql, arguments, error, dbapi.Error, connection_invalidated=lost, dialect=engine.dialect
        ) from error


def _first_row(engine, connection, prepared, params):
    row = _run(engine, connection, prepared.sql, prepared.arguments(params), _fetch_first)
    return None if row is None else prepared.row(row)


def fetch_one(statement, params):
    """The first row of a prebuilt SELECT, as a tuple of converted values in the order of its columns, or None.

    Run on a pooled DBAPI connection: SQLAlchemy compiles the statement, once per dialect, and lends
    the connection from its pool; what is skipped is its per-execution machinery, which on the hot
    reads costs more than the query itself. Values are converted as the selected columns' types
    would convert them.
    """
    engine = db.engine
    prepared = _prepared(statement, engine.dialect, None)
    connection = _hot_connection(engine)
    try:
        return _first_row(engine, connection, prepared, params)
    finally:
        _release(engine, connection)


def _hot_connection(engine):
    """The connection the hot paths run on: on SQLite the thread's own, elsewhere one lent from the pool."""
    return _thread_connection(engine) if engine.dialect.name == "sqlite" else _checkout(engine)


def _release(engine, connection):
    """The end of a use of _hot_connection: a lent connection goes back to the pool (which rolls back
    whatever the driver began); the thread's own is kept, unless an error left it invalid."""
    if engine.dialect.name != "sqlite":
        connection.close()
    elif not connection.is_valid:
        _drop_thread_connection(engine)


class _ThreadConnections(threading.local):
    """Each thread's own pooled SQLite connection for reads, by engine, kept between requests.

    Lending a connection from the pool and taking it back cost more than the read itself. A SQLite
    connection is a file handle: one kept per thread (as a WSGI server's threads are few and
    long-lived) holds no lock and no snapshot between reads, since the driver runs each SELECT in
    autocommit mode and the cursor is closed after it. Server databases keep lending from the pool,
    whose size is theirs to configure and whose pings find a connection the server dropped.
    """

    def __init__(self):
        self.by_engine = weakref.WeakKeyDictionary()


_threads = _ThreadConnections()


def _forget_thread_connections():
    # A forked child must not share its parent's file handles; the thread that forked is the only
    # one the child has. (Asked at fork time, not with a getpid on every read.)
    _threads.by_engine = weakref.WeakKeyDictionary()


os.register_at_fork(after_in_child=_forget_thread_connections)


def _thread_connection(engine):
    connection = _threads.by_engine.get(engine)
    if connection is None:
        connection = _threads.by_engine[engine] = _checkout(engine)
    return connection


def _drop_thread_connection(engine):
    """The thread's connection, invalidated by an error, goes back to the pool (which discards it)."""
    connection = _threads.by_engine.pop(engine, None)
    if connection is not None:
        connection.close()


def _driver_reader(column_type):
    """How to turn a driver's value for `column_type` into what SQLAlchemy would give."""
    if isinstance(column_type, Boolean):
        return bool  # SQLite returns 0 and 1
    return getattr(column_type, "from_driver", None)
