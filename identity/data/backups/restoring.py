"""`flask restore NAME`: a backup from the target (or an s3:// URL), downloaded and checked, then restored
as `restore PATH` restores a file: on SQLite through identity.data.restore; on PostgreSQL with pg_restore,
as docs/backup.md gives it, the feed's sequence raised after it so that no number is used twice.
"""

import subprocess
from pathlib import Path

from sqlalchemy import text

from . import archive, runs


def source(reference):
    """(the URL of its store, or None for the target's; its name) for a name in the target's list, or an s3://
    URL (or a folder path) of one backup."""
    if reference.startswith("s3://") or "/" in reference:
        where, _, name = reference.rstrip("/").rpartition("/")
        return where, name
    return None, reference


def unpacked(store, name, folder, key):
    """The plain database of the backup `name` in `folder`, and its manifest; raises BackupFailed or StoreError
    before anything is changed."""
    raw, manifest = runs.download(store, name, folder)
    archive.check_space(folder, 2 * raw.stat().st_size)
    return archive.unpack(raw, manifest, Path(folder), key), manifest


def issued(connection):
    """The highest seq the PostgreSQL database ever issued, or None when it has no change log (a new database)."""
    if connection.execute(text("SELECT to_regclass(:name)"), {"name": archive.SEQUENCE}).scalar() is None:
        return None
    last, called = connection.execute(archive.SEQUENCE_STATE).one()
    return last if called else 0


def restore_postgresql(engine, dump, issued_up_to=0):
    """Restore the pg_dump archive at `dump` into the database behind `engine`, every other connection closed;
    the feed's sequence ends at least at what the replaced database issued and `issued_up_to`. Returns
    (the replaced database's highest seq or None, the next seq)."""
    archive.check_client("pg_restore", engine)
    with engine.connect() as connection:
        before = issued(connection)
    engine.dispose()
    url, env = archive.libpq(engine.url)
    done = subprocess.run(["pg_restore", "--clean", "--if-exists", "--no-owner", f"--dbname={url}", str(dump)],
                          capture_output=True, text=True, env=env)
    if done.returncode:
        raise archive.BackupFailed(f"pg_restore failed: {archive.last_line(done.stderr)}. The database may be "
                                   "partly restored: run the restore again once the cause is fixed.")
    floor = max(before or 0, issued_up_to)
    with engine.begin() as connection:
        last, called = connection.execute(archive.SEQUENCE_STATE).one()
        end = max(floor, last if called else 0)
        if end:
            connection.execute(text("SELECT setval(:sequence, :end)"), {"sequence": archive.SEQUENCE, "end": end})
    return before, end + 1
