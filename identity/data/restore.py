"""`flask --app app restore PATH`: a backup of the SQLite database put in place of the database, with the
service stopped, so that the change feed never reuses a number.

The rule it keeps (the contract's "Command line"): no seq, and so no webhook-id, ever names two different
entries. A backup ends at some seq, say 3; the replaced database may have issued 4 to 6 since, which
followers and webhook receivers hold. So before the database is replaced, the highest number it ever
issued is read (SQLite's sqlite_sequence keeps it for identity_changes, an AUTOINCREMENT table), and the
restored copy's sequence is raised to it: the next entry is numbered 7, above every number issued
before. Across any number of restores the sequence only grows.

The steps, each of which leaves either the old database or the restored one in place:
1. the backup is copied beside the database under a temporary name, and the copy is checked: PRAGMA
   integrity_check, its schema's revision, every table and column that revision has (the migrations run
   to it in memory give them), and PRAGMA foreign_key_check;
2. the old database is opened alone (an exclusive lock: the restore refuses while another process has it
   open), its highest number read, and its write-ahead log checkpointed into it and dropped, so that no
   -wal or -shm of the old file can be replayed over the restored one;
3. the copy's sequence is raised to that number, it takes the old file's owner, group and mode, and it is
   renamed over the database.
"""

import os
import shutil
import stat
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from alembic.operations import Operations
from alembic.runtime.migration import MigrationContext
from alembic.util import CommandError
from sqlalchemy import create_engine, func, inspect, select, text
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import NullPool, StaticPool

from ..storage.faults import cause
from ..storage.models import Change, Identity

CHANGES = Change.__tablename__
# What SQLite keeps beside a database file: the write-ahead log, its index, a rollback journal.
COMPANIONS = ("-wal", "-shm", "-journal")
# The mode SQLite gives a database file it creates, before the umask.
SQLITE_FILE_MODE = 0o644


class RestoreRefused(Exception):
    """The restore cannot be done; the message says why and what to do. The database is left as it was."""


@dataclass
class Restored:
    identities: int  # in the restored database
    backup_end: int  # the highest seq the backup had issued
    replaced_end: int | None  # the highest seq the replaced database had issued; None when there was none
    issued_up_to: int  # a number the operator said was issued
    revision: str  # the restored schema's
    current: bool  # whether that is the code's latest

    @property
    def next_seq(self):
        return max(self.backup_end, self.replaced_end or 0, self.issued_up_to) + 1


def restore_sqlite(database, backup, script, issued_up_to=0, write=None):
    """Put the backup at `backup` (a Path) in place of the SQLite database at `database` (a Path), whose
    migrations are `script` (an Alembic ScriptDirectory); returns Restored. Raises RestoreRefused.

    `issued_up_to`: a number known to have been issued (when the replaced database is lost, what followers
    hold); the next entry is numbered above it too. With `write`, `backup` names a backup that write(path) puts
    in the file at path (a download, decompressed as it comes); its own failures pass through, the database
    left as it was."""
    if write is None:
        backup = _checked_backup(backup, database)
    if not database.parent.is_dir():
        raise RestoreRefused(f"No folder {database.parent} to restore the database in; create it, or check DATABASE_URL.")
    handle, partial = tempfile.mkstemp(prefix=f".{database.name}.", suffix=".restoring", dir=database.parent)
    os.close(handle)
    partial = Path(partial)
    try:
        try:
            if write is None:
                shutil.copyfile(backup, partial)
            else:
                write(partial)
        except OSError as error:
            raise RestoreRefused(f"The backup could not be copied beside the database: {error.strerror or error} "
                                 f"({error.filename}). Check the free space and permissions.") from None
        identities, backup_end, revision = _check_copy(partial, backup, script)
        with _alone(database) as replaced_end:
            _raise_sequence(partial, max(replaced_end or 0, issued_up_to))
            _keep_owner_and_mode(partial, database)
            for suffix in COMPANIONS:
                Path(f"{database}{suffix}").unlink(missing_ok=True)
            os.replace(partial, database)
            _sync_folder(database.parent)
    finally:
        partial.unlink(missing_ok=True)
    current = revision in script.get_heads()
    return Restored(identities, backup_end, replaced_end, issued_up_to, revision, current)


def _checked_backup(backup, database):
    backup = backup.resolve()
    if not backup.is_file():
        raise RestoreRefused(f"No file at {backup}: give the path of a backup that `flask backup` wrote.")
    if database.exists() and backup.samefile(database):
        raise RestoreRefused("PATH is the database itself; give the path of a backup.")
    if Path(f"{backup}-wal").exists():
        raise RestoreRefused(
            f"{backup} has a write-ahead log beside it ({backup.name}-wal): it is a database in use, or one whose "
            "last writes are in that log, not a backup. Make a backup of it with `DATABASE_URL=sqlite:///"
            f"{backup} .venv/bin/flask --app app backup NEW_PATH`, and restore NEW_PATH."
        )
    return backup


def _engine(path, **connect_args):
    # One connection, opened and closed here: nothing else of the service has this file open.
    return create_engine(f"sqlite:///{path}", poolclass=NullPool, connect_args=connect_args)


def _check_copy(path, backup, script):
    """The copy's identities, the highest seq it issued and its schema's revision, once it passed
    integrity_check and its revision is one this code knows."""
    engine = _engine(path)
    try:
        with engine.connect() as connection:
            problems = connection.execute(text("PRAGMA integrity_check")).scalars().all()
            if problems != ["ok"]:
                raise RestoreRefused(f"{backup} failed its integrity check ({'; '.join(problems[:3])}): it is damaged. "
                                     "Restore another backup.")
            revisions = MigrationContext.configure(connection).get_current_heads()
            if len(revisions) != 1 or CHANGES not in inspect(connection).get_table_names():
                raise RestoreRefused(f"{backup} is not a database of this service (no migration, or no change log); "
                                     "give a file that `flask backup` wrote.")
            revision = revisions[0]
            _known(revision, backup, script)
            _whole(connection, revision, backup, script)
            identities = connection.execute(select(func.count()).select_from(Identity.__table__)).scalar()
            backup_end = max(_issued(connection), connection.execute(select(func.max(Change.seq))).scalar() or 0)
    except SQLAlchemyError as error:
        raise RestoreRefused(f"{backup} cannot be read as an SQLite database ({cause(error)}); give a file that "
                             "`flask backup` wrote.") from None
    finally:
        engine.dispose()
    return identities, backup_end, revision


def _known(revision, backup, script):
    try:
        known = script.get_revision(revision) is not None
    except CommandError:
        known = False
    if not known:
        raise RestoreRefused(f"{backup} is at the schema revision {revision}, which this version of the service does "
                             "not know: it was made by a newer version. Restore it with that version.")


def _whole(connection, revision, backup, script):
    """Refuse a copy that lacks a table or column its revision has, or whose foreign keys point at no row: a
    migration label on a few tables is not a backup of this service."""
    expected = _schema_at(revision, script)
    found = _schema_of(connection)
    tables = sorted(set(expected) - set(found))
    columns = sorted(f"{table}.{column}" for table in set(expected) & set(found)
                     for column in expected[table] - found[table])
    if tables or columns:
        missing = "; ".join(part for part in (
            f"the tables {', '.join(tables)}" if tables else "",
            f"the columns {', '.join(columns)}" if columns else "",
        ) if part)
        raise RestoreRefused(f"{backup} is labelled with the schema revision {revision}, but lacks what that revision "
                             f"has: {missing}. It is not a whole backup of this service; restore a file that "
                             "`flask backup` wrote.")
    dangling = connection.execute(text("PRAGMA foreign_key_check")).all()
    if dangling:
        where = sorted({f"{row[0]} (row {row[1]}, pointing at {row[2]})" for row in dangling[:5]})
        raise RestoreRefused(f"{backup} failed its foreign key check: {len(dangling)} rows point at rows it does not "
                             f"hold, e.g. in {'; '.join(where)}. It is damaged or was edited; restore another backup.")


def _schema_at(revision, script):
    """{table: {column names}} of a database that the migrations bring to `revision`: built in memory by
    running them, so that it is that revision's schema, not the latest one's."""
    engine = create_engine("sqlite://", poolclass=StaticPool)
    try:
        with engine.begin() as connection:
            with Operations.context(MigrationContext.configure(connection)):
                for step in reversed(list(script.iterate_revisions(revision, "base"))):
                    step.module.upgrade()
            return _schema_of(connection)
    finally:
        engine.dispose()


def _schema_of(connection):
    inspector = inspect(connection)
    return {table: {column["name"] for column in inspector.get_columns(table)} for table in inspector.get_table_names()}


def _issued(connection):
    """The highest number identity_changes ever issued, as sqlite_sequence records it (0 when none)."""
    found = connection.execute(text("SELECT seq FROM sqlite_sequence WHERE name = :table"), {"table": CHANGES})
    return found.scalar() or 0


@contextmanager
def _alone(path):
    """The database at `path` opened by this process alone for the time of the swap; yields the highest seq it
    ever issued (None when there is no database there). Its write-ahead log is taken into the file and
    removed, so that no -wal is left to be replayed over the file that replaces it."""
    if not path.exists():
        yield None
        return
    # No wait for a lock: a lock held means another process has the database open.
    engine = _engine(path, timeout=0)
    try:
        with engine.connect() as connection:
            connection = connection.execution_options(isolation_level="AUTOCOMMIT")
            try:
                issued = _take_alone(connection)
            except SQLAlchemyError as error:
                raise _refusal(path, cause(error)) from None
            yield issued  # the lock is held until the connection closes, after the swap
    finally:
        engine.dispose()


def _take_alone(connection):
    # In exclusive locking mode the lock that BEGIN EXCLUSIVE takes is kept after its COMMIT, until the
    # connection closes: no other process opens the old file meanwhile.
    connection.execute(text("PRAGMA locking_mode = EXCLUSIVE"))
    connection.execute(text("BEGIN EXCLUSIVE"))
    issued = 0
    if CHANGES in inspect(connection).get_table_names():
        issued = max(_issued(connection), connection.execute(select(func.max(Change.seq))).scalar() or 0)
    connection.execute(text("COMMIT"))
    # Out of WAL mode: the log is checkpointed into the file and deleted.
    connection.execute(text("PRAGMA journal_mode = DELETE"))
    return issued


def _refusal(path, why):
    if why.startswith("locked"):
        return RestoreRefused(f"The database {path} is open in another process (the service, or a flask command): "
                              "stop every process that uses it, then restore again.")
    return RestoreRefused(
        f"The database {path} cannot be read ({why}), so the restore cannot number later entries above the ones "
        f"it issued. Move it away (mv {path} {path}.unreadable) and restore again: followers beyond the backup's "
        "end are then told where the feed ends."
    )


def _raise_sequence(path, replaced_end):
    """Raise the copy's sequence so that its next entry is numbered above `replaced_end` too."""
    engine = _engine(path)
    try:
        with engine.begin() as connection:
            if replaced_end > _issued(connection):
                connection.execute(text("DELETE FROM sqlite_sequence WHERE name = :table"), {"table": CHANGES})
                connection.execute(text("INSERT INTO sqlite_sequence (name, seq) VALUES (:table, :seq)"),
                                   {"table": CHANGES, "seq": replaced_end})
        with engine.connect() as connection:
            # One file at rest; the service turns WAL on again when it opens it.
            connection.execute(text("PRAGMA journal_mode = DELETE"))
    except SQLAlchemyError as error:
        raise RestoreRefused(f"The copy of the backup could not be written ({cause(error)}); check the free space "
                             "beside the database.") from None
    finally:
        engine.dispose()


def _keep_owner_and_mode(path, database):
    """Give the copy at `path` the owner, group and mode of the database it replaces, so that the service's
    user opens it as before and no one else may; with no database there, the mode SQLite gives a file it
    creates (0644 less the umask). Refused, before anything is replaced, when this user cannot."""
    try:
        replaced = database.stat()
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(path, SQLITE_FILE_MODE & ~umask)
        return
    ours = path.stat()
    if (ours.st_uid, ours.st_gid) != (replaced.st_uid, replaced.st_gid):
        try:
            os.chown(path, replaced.st_uid, replaced.st_gid)
        except PermissionError:
            raise RestoreRefused(
                f"The database {database} belongs to user {replaced.st_uid} and group {replaced.st_gid}, which this "
                "user cannot give the restored file: run the restore as that user (e.g. with sudo -u), or as root. "
                "Nothing was replaced."
            ) from None
    os.chmod(path, stat.S_IMODE(replaced.st_mode))


def _sync_folder(folder):
    """Make the rename durable: the folder's entry is written to disk, not only the file."""
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
