"""A backup damaged on the store: altered, cut short, or corrupt inside with a manifest that matches it. `backups
verify` and `restore NAME` check it as it downloads (SHA-256, age, Zstandard's checksum, pg_restore), say what
is wrong, and change nothing: the database keeps what it had, including what was written after the backup, and
no partial file is left beside it. On PostgreSQL pg_restore reads the download in one transaction, which a
corrupt block late in the dump rolls back."""

import hashlib
import json
import os

import pytest

from identity.storage.database import db
from tests.common.backups import backed_up_then_written, cli, feed_end
from tests.common.seaweed import BUCKET


def damage(seaweed, prefix, name, how):
    """Rewrite the object `name` on the store: a byte flipped halfway, one bit flipped near the end, or cut to half
    its size; "corrupt, manifest matching": its manifest then gives the damaged bytes' size and SHA-256, as if it
    had been made so."""
    client = seaweed.client()
    data = bytearray(client.get_object(Bucket=BUCKET, Key=f"{prefix}{name}")["Body"].read())
    if how == "cut":
        data = data[:len(data) // 2]
    elif how == "end altered":
        # A pg_dump archive ends with its last block's terminator, the integer 0 (a sign byte, then 4 bytes):
        # as "-0" it reads the same, so only the SHA-256 tells. It is passed on to pg_restore, whose restore
        # then completes, only once the whole object matched its manifest.
        data[-5] ^= 0x01
    else:
        data[len(data) // 2] ^= 0xFF
    client.put_object(Bucket=BUCKET, Key=f"{prefix}{name}", Body=bytes(data))
    if how == "corrupt, manifest matching":
        key = f"{prefix}{name}.json"
        manifest = json.loads(client.get_object(Bucket=BUCKET, Key=key)["Body"].read())
        manifest.update(size=len(data), sha256=hashlib.sha256(data).hexdigest())
        client.put_object(Bucket=BUCKET, Key=key, Body=json.dumps(manifest).encode())


def left_beside(database_url, backend):
    if backend != "sqlite":
        return []
    from pathlib import Path

    folder = Path(database_url.removeprefix("sqlite:///")).parent
    return [path.name for path in folder.iterdir() if path.name.endswith(".restoring")]


@pytest.mark.parametrize("how", ["altered", "end altered", "cut"])
def test_a_backup_that_does_not_match_its_manifest_is_refused_and_changes_nothing(backup_apps, database_url, seaweed,
                                                                                  prefix, backend, how):
    app = backup_apps(database_url)
    name, key, end = backed_up_then_written(app)
    damage(seaweed, prefix, name, how)

    verified = cli(app, "backups", "verify", name)
    assert verified.exit_code == 1
    assert "does not match its manifest" in verified.output and "damaged or was altered" in verified.output
    listed = cli(app, "backups", "list").stdout
    assert next(line for line in listed.splitlines() if line.startswith(name)).endswith("\tNO")

    restored = cli(app, "restore", name)
    assert restored.exit_code == 1
    assert "does not match its manifest" in restored.output and "Nothing was changed" in restored.output
    with app.app_context():
        db.engine.dispose()
        assert feed_end(app, key) == end  # the identity written after the backup is still there
    assert left_beside(database_url, backend) == []


def test_a_corrupt_backup_whose_manifest_matches_is_refused_and_changes_nothing(backup_apps, database_url, junk,
                                                                               seaweed, prefix, backend):
    """The SHA-256 passes; what is inside does not: Zstandard's checksum (SQLite), or pg_restore's reading of a
    data block 12 MiB into the dump, after it has dropped and created the tables in its transaction."""
    app = backup_apps(database_url, IDENTITY_BACKUP_PART_MB=5)
    name, key, end = backed_up_then_written(app)
    damage(seaweed, prefix, name, "corrupt, manifest matching")

    restored = cli(app, "restore", name)
    assert restored.exit_code == 1
    if backend == "sqlite":
        assert "does not decompress" in restored.output and "Nothing was changed" in restored.output
        verified = cli(app, "backups", "verify", name)
        assert verified.exit_code == 1 and "does not decompress" in verified.output
    else:
        assert "pg_restore failed" in restored.output and "nothing was changed" in restored.output, restored.output
    with app.app_context():
        db.engine.dispose()
        assert feed_end(app, key) == end
    assert left_beside(database_url, backend) == []


@pytest.mark.sqlite_only
def test_a_disk_without_room_for_the_database_is_named_before_starting(backup_apps, database_url, seaweed, prefix):
    """The manifest gives the database's size: verify needs that much in the temporary folder, a restore beside the
    database. One that asks for more than any disk has is refused before a byte is downloaded."""
    app = backup_apps(database_url)
    name, key, end = backed_up_then_written(app)
    client = seaweed.client()
    manifest = json.loads(client.get_object(Bucket=BUCKET, Key=f"{prefix}{name}.json")["Body"].read())
    database = database_url.removeprefix("sqlite:///")
    assert 0 < manifest["database_size"] <= 2 * os.path.getsize(database)  # the copy's size, not the object's
    manifest["database_size"] = 10**18
    client.put_object(Bucket=BUCKET, Key=f"{prefix}{name}.json", Body=json.dumps(manifest).encode())

    verified = cli(app, "backups", "verify", name)
    assert verified.exit_code == 1
    assert "The temporary folder" in verified.output and "MiB free; opening this backup" in verified.output
    restored = cli(app, "restore", name)
    assert restored.exit_code == 1, restored.output
    assert f"The database's folder {os.path.dirname(database)} has" in restored.output
    assert f"needs up to {-(-10**18 // 2**20):,} MiB there" in restored.output and "Nothing was changed" in restored.output
    with app.app_context():
        db.engine.dispose()
        assert feed_end(app, key) == end
    assert left_beside(database_url, "sqlite") == []
