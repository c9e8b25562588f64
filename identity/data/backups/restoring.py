"""`flask restore NAME`: a backup from the target (or an s3:// URL), checked as it downloads (opening.py), then
restored as `restore PATH` restores a file: on SQLite through identity.data.restore, the download decompressed
straight into the file it puts in place; on PostgreSQL with pg_restore reading the download from a pipe, in
one transaction, the feed's sequence raised after it so that no number is used twice.
"""

import subprocess
import tempfile

from sqlalchemy import text

from . import archive, opening
from .streams import Tolerant


def source(reference):
    """(the URL of its store, or None for the target's; its name) for a name in the target's list, or an s3://
    URL (or a folder path) of one backup."""
    if reference.startswith("s3://") or "/" in reference:
        where, _, name = reference.rstrip("/").rpartition("/")
        return where, name
    return None, reference


def write_sqlite(store, name, manifest, key, path):
    """Write the SQLite database of the backup `name` into the file at `path` (beside the database it replaces),
    decompressed as it downloads, once the folder has room for it. Raises BackupFailed, StoreError or OSError."""
    archive.check_space(path.parent, opening.needed_space(manifest), doing="the restored database",
                        place="The database's folder", remedy="Free space there; the database is replaced only once "
                        "its restored copy is whole. Nothing was changed.")
    with open(path, "wb") as out:
        opening.receive(store, name, manifest, key, out)


def issued(connection):
    """The highest seq the PostgreSQL database ever issued, or None when it has no change log (a new database)."""
    if connection.execute(text("SELECT to_regclass(:name)"), {"name": archive.SEQUENCE}).scalar() is None:
        return None
    last, called = connection.execute(archive.SEQUENCE_STATE).one()
    return last if called else 0


def restore_postgresql(engine, feed, issued_up_to=0):
    """Restore the pg_dump archive that feed(sink) writes (opening.receive) into the database behind `engine`, every
    other connection closed: pg_restore reads it from a pipe, in one transaction, so that a failure on either
    side (the download not matching its manifest, a wrong key, pg_restore's own) changes nothing. The feed's
    sequence ends at least at what the replaced database issued and `issued_up_to`. Returns (the replaced
    database's highest seq or None, the next seq)."""
    archive.check_client("pg_restore", engine)
    with engine.connect() as connection:
        before = issued(connection)
    engine.dispose()
    url, env = archive.libpq(engine.url)
    with tempfile.TemporaryFile() as messages:
        with subprocess.Popen(["pg_restore", "--clean", "--if-exists", "--no-owner", "--single-transaction",
                               f"--dbname={url}"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                              stderr=messages, env=env) as restoring:
            try:
                # Read to the end even when pg_restore stops early: a backup that does not match its manifest is
                # named as such, rather than by pg_restore's complaint about it.
                feed(Tolerant(restoring.stdin))
            except BaseException:
                # It has not had the download's last block, so it has committed nothing: stopped, its
                # transaction is rolled back.
                restoring.kill()
                raise
            finally:
                try:
                    restoring.stdin.close()
                except BrokenPipeError:
                    pass
            code = restoring.wait()
        if code:
            messages.seek(0)
            raise archive.BackupFailed(f"pg_restore failed: {archive.last_line(messages.read().decode(errors='replace'))}"
                                       ". It ran in one transaction, rolled back: nothing was changed.")
    floor = max(before or 0, issued_up_to)
    with engine.begin() as connection:
        last, called = connection.execute(archive.SEQUENCE_STATE).one()
        end = max(floor, last if called else 0)
        if end:
            connection.execute(text("SELECT setval(:sequence, :end)"), {"sequence": archive.SEQUENCE, "end": end})
    return before, end + 1
