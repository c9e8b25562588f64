"""The Flask extensions, created unbound so the factory can bind them to any app, and the one way the
service takes the database's write lock."""

from contextlib import contextmanager

from flask_migrate import Migrate
from flask_sqlalchemy import SQLAlchemy
from sqlalchemy import event
from sqlalchemy.orm import DeclarativeBase


class Base(DeclarativeBase):
    pass


# Objects stay readable after commit: a view serializes what it just wrote without a reload.
db = SQLAlchemy(model_class=Base, session_options={"expire_on_commit": False})
migrate = Migrate()

# The execution option that marks a session's transaction as a writer (see write_transaction).
WRITE = "identity_write"


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
        connection.exec_driver_sql("BEGIN IMMEDIATE" if connection.get_execution_options().get(WRITE) else "BEGIN")


@contextmanager
def write_transaction():
    """The request's session in a transaction that holds the database's write lock from its first
    statement (on SQLite; a server database locks rows as they are written). Commits at the end."""
    session = db.session()
    # Whatever the session has open (a read of this same request) ends first: the write lock must
    # not be waited for by a transaction of this very request, and a begun connection takes no options.
    if session.in_transaction():
        session.commit()
    session.connection(execution_options={WRITE: True})
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
