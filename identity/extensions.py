"""The Flask extensions, created unbound so the factory can bind them to any app, and the ways the
service reaches the database through them: session transactions, Core connections, raw reads."""

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


def _commit_open_session():
    # What the request's session has open is committed first, so that the write lock taken next
    # is not waited for by a transaction of this same request.
    session = db.session()
    if session.in_transaction():
        session.commit()
    return session


@contextmanager
def write_transaction():
    """A session transaction that holds the database's write lock from its first statement."""
    session = _commit_open_session()
    session.connection(execution_options={_WRITE: True})
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise


@contextmanager
def write_connection():
    """A Core connection whose transaction holds the write lock from its first statement.

    For the create path: its statements need none of the session's unit of work.
    """
    _commit_open_session()
    with db.engine.connect() as connection:
        connection.execution_options(**{_WRITE: True})
        with connection.begin():
            yield connection


_COMPILED = {}


def fetch_one(statement, params):
    """The first row of a prebuilt SELECT as {column name: value}, or None, from a pooled DBAPI connection.

    SQLAlchemy compiles the statement, once per dialect, and lends the connection from its pool;
    what is skipped is its per-execution machinery, which on the hot reads costs more than the query
    itself. Values are converted as the selected columns' types would convert them.
    """
    engine = db.engine
    key = (id(statement), engine.dialect.name)
    compiled = _COMPILED.get(key)
    if compiled is None:
        sql = statement.compile(dialect=engine.dialect)
        columns = statement.selected_columns
        readers = [(name, _driver_reader(columns[name].type)) for name in columns.keys()]
        compiled = _COMPILED[key] = (sql.string, sql.positiontup, readers)
    sql, positions, readers = compiled
    arguments = params if positions is None else tuple(params[name] for name in positions)
    dbapi = engine.dialect.loaded_dbapi
    connection = None
    try:
        connection = engine.raw_connection()
        cursor = connection.cursor()
        try:
            cursor.execute(sql, arguments)
            row = cursor.fetchone()
        finally:
            cursor.close()
    except dbapi.Error as error:
        # As SQLAlchemy's own execution would: a connection the server dropped leaves the pool, and
        # the driver's error becomes SQLAlchemy's (an OperationalError is a 503, see errors.py).
        lost = connection is None or engine.dialect.is_disconnect(error, connection.dbapi_connection, None)
        if lost and connection is not None:
            connection.invalidate(error)
        raise DBAPIError.instance(
            sql, arguments, error, dbapi.Error, connection_invalidated=lost, dialect=engine.dialect
        ) from error
    finally:
        if connection is not None:
            connection.close()  # back to the pool, which rolls back whatever the driver began
    if row is None:
        return None
    return {
        name: value if read is None or value is None else read(value)
        for (name, read), value in zip(readers, row, strict=True)
    }


def _driver_reader(column_type):
    """How to turn a driver's value for `column_type` into what SQLAlchemy would give."""
    if isinstance(column_type, Boolean):
        return bool  # SQLite returns 0 and 1
    return getattr(column_type, "from_driver", None)
