"""`/readyz`: the database answers, its schema is the one this code was written for, and it can take writes."""

import os
import shlex
import shutil
import sys
from pathlib import Path

from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from flask import current_app, request
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from .database import NO_WAIT, WRITE, db, migrate, sqlite_file
from .faults import cause

# Below this much free space beside an SQLite file, creates are about to fail: not ready.
MIN_FREE_BYTES = 1024 * 1024


class NotReady(Exception):
    """The service cannot serve now; `detail` says why and what to do."""

    def __init__(self, detail):
        super().__init__(detail)
        self.detail = detail


class SchemaNotCurrent(NotReady):
    """The database's schema is not the one this code needs: an operator must migrate it, so a client
    retrying gets nothing (no Retry-After)."""

    def __init__(self, current, head):
        state = f"it is at {', '.join(sorted(current))}" if current else "it was never migrated"
        super().__init__(
            f"The database is not at the latest migration ({', '.join(sorted(head))}): {state}. "
            f"Run `{upgrade_command()}`."
        )


def _head():
    """The latest migration's revision, read from the migration scripts once per process."""
    heads = current_app.extensions.get("identity_schema_heads")
    if heads is None:
        heads = current_app.extensions["identity_schema_heads"] = frozenset(
            ScriptDirectory.from_config(migrate.get_config()).get_heads()
        )
    return heads


def check():
    """Raise NotReady saying why the service cannot serve; return None when it can."""
    try:
        connection = db.session.connection()
        current = frozenset(MigrationContext.configure(connection).get_current_heads())
        read_only = connection.dialect.name == "postgresql" and (
            connection.execute(text("SHOW transaction_read_only")).scalar() == "on"
        )
        db.session.commit()
    except DBAPIError as error:
        db.session.rollback()
        raise NotReady(f"The database does not answer: {cause(error)}.") from None
    if current != _head():
        raise SchemaNotCurrent(current, _head())
    if read_only:
        raise NotReady("The database is read-only: creates would fail.")
    if db.engine.dialect.name == "sqlite":
        _check_sqlite_file(db.engine.url)
        _check_sqlite_writes()


def _check_sqlite_file(url):
    database = sqlite_file(url)
    if database is None:  # in memory
        return
    path = Path(database)
    # SQLite writes the file, and its -wal and -shm beside it: both must be writable.
    for place in (path, path.parent):
        if not os.access(place, os.W_OK):
            raise NotReady(f"The database is read-only: {place} cannot be written, so creates would fail.")
    free = shutil.disk_usage(path.parent).free
    if free < MIN_FREE_BYTES:
        raise NotReady(f"The disk is full: {free} bytes free beside {path.name}, so creates would fail.")


def _check_sqlite_writes():
    """Whether SQLite would take a write, without writing: a no-op update, rolled back.

    SQLite refuses it at once on a database it opened read-only. It does not wait for the write
    lock: a lock held by a create is a moment's wait for creates, not a reason to be unready.
    """
    session = db.session()
    if session.in_transaction():
        session.commit()
    try:
        session.connection(execution_options={WRITE: True, NO_WAIT: True}).execute(
            text("UPDATE alembic_version SET version_num = version_num")
        )
    except DBAPIError as error:
        reason = cause(error)
        if not reason.startswith("locked"):
            raise NotReady(f"The database cannot take writes: {reason}.") from None
    finally:
        session.rollback()


SCHEMA_CHECKED = "identity_schema_current"


def revisions():
    """(the database's migration revisions, the latest this code has): the same set when its schema is
    current (DBAPIError when it does not answer)."""
    with db.engine.connect() as connection:
        current = frozenset(MigrationContext.configure(connection).get_current_heads())
    return current, _head()


def schema_state():
    """Raise SchemaNotCurrent unless the database's schema is at the latest migration (DBAPIError when
    it does not answer)."""
    current, head = revisions()
    if current != head:
        raise SchemaNotCurrent(current, head)


def require_latest_schema(exempt=frozenset()):
    """Before a request: refuse it while the schema is not at the latest migration, unless its
    endpoint is one of `exempt`.

    Once a process has seen the latest schema it trusts it (a schema is not downgraded under a running
    service), so a request pays one dictionary look-up; until then each request checks, and the first
    after `db upgrade` goes through.
    """
    if current_app.extensions.get(SCHEMA_CHECKED) or request.endpoint in exempt:
        return
    schema_state()
    current_app.extensions[SCHEMA_CHECKED] = True


def flask_command(*args):
    """`<this environment's flask> --app app ARGS`, as one shell line."""
    flask = os.path.join(os.path.dirname(sys.executable), "flask")
    if not os.path.exists(flask):
        flask = "flask"
    else:
        relative = os.path.relpath(flask)
        if not relative.startswith(".."):
            flask = relative if os.sep in relative else os.path.join(".", relative)
    return " ".join([shlex.quote(flask), "--app", "app", *map(shlex.quote, args)])


def upgrade_command():
    """The command that brings the database's schema to the latest migration."""
    return flask_command("db", "upgrade")
