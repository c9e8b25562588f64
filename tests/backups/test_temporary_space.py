"""Temporary space during a backup, its verification and its restore: at most one copy of the database (the
contract: "temporary space is at most one backup"). The backup is streamed from SQLite's online-backup copy (or
from pg_dump) through Zstandard and age into the upload, so the copy is all that sits in the temporary folder;
`backups verify` and `restore NAME` stream the download through SHA-256, age and Zstandard into the one SQLite
file they open (or into pg_restore). A thread watches the folders' bytes while a backup of 24 MiB that do not
compress goes to the store and comes back, encrypted (the case that needs the most)."""

import tempfile
from pathlib import Path

import pyrage
import pytest
from sqlalchemy import text

from identity.storage.database import db
from tests.common.backups import cli, take
from tests.common.space import Watcher

KEY = str(pyrage.x25519.Identity.generate())


@pytest.fixture
def temporary(tmp_path, monkeypatch):
    """A temporary folder of this test's own, where tempfile puts everything (tempfile.tempdir)."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def database_bytes(app, database_url, backend):
    """The size of the database: SQLite's file and its WAL; PostgreSQL's pg_database_size."""
    if backend == "sqlite":
        with app.app_context():
            # Its pages all in the file (none left in the WAL): the file's size is the database's.
            db.session.execute(text("PRAGMA wal_checkpoint(TRUNCATE)"))
        return Path(database_url.removeprefix("sqlite:///")).stat().st_size
    with app.app_context():
        return db.session.execute(text("SELECT pg_database_size(current_database())")).scalar()


@pytest.fixture(params=["s3", "folder"])
def big(request, backup_apps, database_url, junk, tmp_path, backend):
    """The app, backing up with a key to the S3 store or to a folder, and the size of its database of 24 MiB and
    more (junk's)."""
    config = {"IDENTITY_BACKUP_ENCRYPTION_KEY": KEY, "IDENTITY_BACKUP_PART_MB": 5}
    if request.param == "folder":
        (tmp_path / "offsite").mkdir()
        config["IDENTITY_BACKUP_URL"] = str(tmp_path / "offsite")
    app = backup_apps(database_url, **config)
    size = database_bytes(app, database_url, backend)
    assert size > 24 * 1024 * 1024
    return app, size


def assert_one_copy_at_most(step, used, size, backend):
    """`used` bytes of temporary space for `step` on a database of `size`: on SQLite the one file written (the
    watcher sees it) and nothing beside it; on PostgreSQL the stream's messages alone."""
    if backend == "sqlite":
        assert used > size // 2, f"{step}: the watcher saw {used} bytes: not the right folder"
        assert used <= 1.1 * size, f"{step}: {used:,} bytes of temporary space for a database of {size:,} bytes"
    else:
        assert used < 1024 * 1024, f"{step}: {used:,} bytes of temporary space"


def test_a_backup_uses_at_most_one_copy_of_the_database_in_temporary_space(big, temporary, backend):
    app, size = big
    with Watcher(temporary) as watcher:
        name = take(app)
    assert cli(app, "backups", "verify", name).exit_code == 0
    stored = int(next(line for line in cli(app, "backups", "list").stdout.splitlines()
                      if line.startswith(name)).split("\t")[2])
    assert stored > 24 * 1024 * 1024  # the backup holds the 24 MiB, encrypted
    # SQLite: the online-backup copy. PostgreSQL: pg_dump's archive streams into the upload.
    assert_one_copy_at_most("backup", watcher.peak, size, backend)


def test_verify_and_restore_use_at_most_one_copy_of_the_database_in_temporary_space(big, temporary, tmp_path,
                                                                                    backend):
    app, size = big
    name = take(app)

    with Watcher(temporary) as verifying:
        verified = cli(app, "backups", "verify", name)
    assert verified.exit_code == 0, verified.output
    with app.app_context():
        db.engine.dispose()
    # A restore writes in the temporary folder and beside the database (tmp_path holds both): the peak beyond
    # what was there before counts both.
    with Watcher(tmp_path) as restoring:
        restored = cli(app, "restore", name)
    assert restored.exit_code == 0, restored.output
    print(f"database {size:,} bytes; temporary space: verify {verifying.extra:,}, restore {restoring.extra:,}")
    # SQLite: the decompressed database. PostgreSQL: the download streams into pg_restore.
    for step, watcher in (("backups verify", verifying), ("restore NAME", restoring)):
        assert_one_copy_at_most(step, watcher.extra, size, backend)
