"""A backup's bytes: made from the database, and opened again.

On SQLite, a consistent copy (SQLite's online backup API, one snapshot) compressed with Zstandard; on
PostgreSQL, `pg_dump --format=custom` (compressed by pg_dump), run on a snapshot that the service exported
so that the manifest's figures are those of the dump. With an encryption key, the result is encrypted in
the age format (https://age-encryption.org/v1, X25519 recipient; pyrage) before it leaves the machine.
Everything goes through files in the temporary folder, read and written in blocks: memory stays flat.
"""

import hashlib
import os
import re
import shutil
import sqlite3
import subprocess
from dataclasses import dataclass
from pathlib import Path

import gevent
import pyrage
import zstandard
from alembic.runtime.migration import MigrationContext
from gevent import monkey
from sqlalchemy import create_engine, func, select, text
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import NullPool

from ...storage.faults import cause
from ...storage.models import Change, Identity

BLOCK = 1024 * 1024
SEQUENCE = "identity_changes_seq_seq"  # PostgreSQL's sequence of identity_changes.seq
# Where that sequence stands: its last value, and whether it was ever issued.
SEQUENCE_STATE = text("SELECT last_value, is_called FROM identity_changes_seq_seq")


class BackupFailed(Exception):
    """A backup could not be made or opened; the message says why and what to do."""


@dataclass
class Made:
    path: Path  # the object's bytes, in the temporary folder
    size: int
    sha256: str
    format: str  # "sqlite+zstd" or "pg_dump-custom", with "+age" when encrypted
    extension: str
    database: str  # sqlite or postgresql
    migration: str
    issued_up_to: int
    identities: int


def digest(path):
    sha = hashlib.sha256()
    with open(path, "rb") as source:
        while block := source.read(BLOCK):
            sha.update(block)
    return sha.hexdigest()


def needed_space(engine):
    """The temporary space a backup of the database behind `engine` may take, in bytes."""
    url = engine.url
    if url.get_backend_name() == "sqlite":
        database = Path(url.database)
        wal = Path(f"{database}-wal")
        size = database.stat().st_size + (wal.stat().st_size if wal.exists() else 0)
        return 2 * size  # the copy, and its compressed form beside it until the copy is removed
    with engine.connect() as connection:
        return connection.execute(text("SELECT pg_database_size(current_database())")).scalar()


def check_space(folder, needed):
    free = shutil.disk_usage(folder).free
    if free < needed:
        raise BackupFailed(f"The temporary folder {folder} has {free // BLOCK:,} MiB free; a backup of this "
                           f"database needs up to {needed // BLOCK:,} MiB there. Free space, or point TMPDIR at a "
                           "larger disk.")


def make(engine, folder, key=None):
    """Make one backup of the database behind `engine` in `folder`, encrypted to the age identity `key` (its
    public half) when one is given; returns Made. Raises BackupFailed."""
    check_space(folder, needed_space(engine))
    try:
        if engine.url.get_backend_name() == "sqlite":
            made = off_the_loop(_sqlite, engine, folder)
        else:
            made = _postgresql(engine, folder)
        if key is not None:
            made = off_the_loop(_encrypted, made, folder, key)
        made.size = made.path.stat().st_size
        made.sha256 = off_the_loop(digest, made.path)
    except OSError as error:
        raise BackupFailed(f"The backup could not be written in {folder}: {error.strerror or error}. "
                           "Check its free space (TMPDIR names another folder).") from None
    return made


def off_the_loop(function, *args):
    """function(*args), where it cannot hold up the process's requests. In a gevent worker (the default server) it
    runs on a thread of gevent's threadpool: SQLite's backup, Zstandard, age and SHA-256 are C code that releases
    the GIL over a file, so the worker's greenlets go on answering meanwhile. Elsewhere it runs here."""
    if monkey.is_module_patched("threading"):
        return gevent.get_hub().threadpool.apply(function, args)
    return function(*args)


def _sqlite(engine, folder):
    copy, packed = folder / "identity.db", folder / "identity.db.zst"
    try:
        source = sqlite3.connect(engine.url.database, timeout=30)
        target = sqlite3.connect(copy)
        try:
            # All pages in one step: one read transaction, so one snapshot; in WAL mode writers go on.
            source.backup(target)
        finally:
            target.close()
            source.close()
    except sqlite3.Error as error:
        raise BackupFailed(f"SQLite's online backup failed ({error}); check the database and the free space.") from None
    migration, identities, issued = sqlite_facts(copy)
    with open(copy, "rb") as plain, open(packed, "wb") as out:
        zstandard.ZstdCompressor(level=3, threads=-1).copy_stream(plain, out, read_size=BLOCK, write_size=BLOCK)
    copy.unlink()
    return Made(packed, 0, "", "sqlite+zstd", ".sqlite.zst", "sqlite", migration, issued, identities)


def sqlite_facts(path):
    """(migration, identities, issued up to) of the SQLite file at `path`, once it passed integrity_check."""
    engine = create_engine(f"sqlite:///{path}", poolclass=NullPool)
    try:
        with engine.connect() as connection:
            problems = connection.execute(text("PRAGMA integrity_check")).scalars().all()
            if problems != ["ok"]:
                raise BackupFailed(f"The copy failed its integrity check ({'; '.join(problems[:3])}).")
            heads = MigrationContext.configure(connection).get_current_heads()
            identities = connection.execute(select(func.count()).select_from(Identity.__table__)).scalar()
            issued = connection.execute(
                text("SELECT seq FROM sqlite_sequence WHERE name = :table"), {"table": Change.__tablename__}
            ).scalar() or 0
            issued = max(issued, connection.execute(select(func.max(Change.seq))).scalar() or 0)
    except SQLAlchemyError as error:
        raise BackupFailed(f"The file cannot be read as a database of this service ({cause(error)}).") from None
    finally:
        engine.dispose()
    if len(heads) != 1:
        raise BackupFailed("The file is not a database of this service: it has no migration.")
    return heads[0], identities, issued


def libpq(url):
    """(URL as libpq reads it, without its password; the environment that gives pg_dump the password)."""
    env = {**os.environ}
    if url.password:
        env["PGPASSWORD"] = url.password
    plain = url.set(drivername="postgresql", password=None).render_as_string(hide_password=False)
    return plain, env


def check_client(tool, engine):
    """Stop with a clear message when `tool` (pg_dump, pg_restore) is missing or older than the server."""
    try:
        found = subprocess.run([tool, "--version"], capture_output=True, text=True, timeout=30, check=True).stdout
    except FileNotFoundError:
        raise BackupFailed(f"{tool} is not installed here: install PostgreSQL's client tools (Debian: apt-get install "
                           "postgresql-client) of the server's version or newer.") from None
    except (subprocess.SubprocessError, OSError) as error:
        raise BackupFailed(f"{tool} --version failed ({error}); check PostgreSQL's client tools.") from None
    version = re.search(r"\)\s*(\d+)", found) or re.search(r"(\d+)", found)
    if version is None:
        raise BackupFailed(f"{tool} --version says {found.strip()!r}, not a version; check PostgreSQL's client tools.")
    ours = int(version.group(1))
    with engine.connect() as connection:
        server = int(connection.execute(text("SHOW server_version_num")).scalar()) // 10000
    if ours < server:
        raise BackupFailed(f"{tool} here is version {ours}, older than the server's {server}: install PostgreSQL's "
                           f"client tools of version {server} or newer.")


def _postgresql(engine, folder):
    check_client("pg_dump", engine)
    dump = folder / "identity.pgdump"
    url, env = libpq(engine.url)
    with engine.connect().execution_options(isolation_level="REPEATABLE READ") as connection:
        with connection.begin():
            snapshot = connection.execute(text("SELECT pg_export_snapshot()")).scalar()
            migration = MigrationContext.configure(connection).get_current_heads()
            identities = connection.execute(select(func.count()).select_from(Identity.__table__)).scalar()
            last, called = connection.execute(SEQUENCE_STATE).one()
            issued = max(last if called else 0, connection.execute(select(func.max(Change.seq))).scalar() or 0)
            # pg_dump reads the database as this transaction sees it: the figures above are the dump's.
            done = subprocess.run(["pg_dump", "--format=custom", f"--snapshot={snapshot}", f"--file={dump}", url],
                                  capture_output=True, text=True, env=env)
    if done.returncode:
        raise BackupFailed(f"pg_dump failed: {last_line(done.stderr)}")
    return Made(dump, 0, "", "pg_dump-custom", ".pgdump", "postgresql", migration[0], issued, identities)


def last_line(stderr):
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "no message"


def _encrypted(made, folder, key):
    sealed = folder / (made.path.name + ".age")
    with open(made.path, "rb") as plain, open(sealed, "wb") as out:
        pyrage.encrypt_io(plain, out, [pyrage.x25519.Identity.from_str(key).to_public()])
    made.path.unlink()
    made.path, made.format, made.extension = sealed, made.format + "+age", made.extension + ".age"
    return made


def unpack(raw, manifest, folder, key=None):
    """The plain database (SQLite file or pg_dump archive) in `raw`, a downloaded backup whose manifest is
    `manifest`, written in `folder`; its bytes are checked against the manifest's size and SHA-256 first.
    Raises BackupFailed, saying whether a key is missing or wrong."""
    size, sha = raw.stat().st_size, digest(raw)
    if manifest.get("sha256") not in (None, sha) or manifest.get("size") not in (None, size):
        raise BackupFailed(f"The downloaded backup does not match its manifest ({size} bytes, SHA-256 {sha[:12]}..., "
                           f"where the manifest says {manifest.get('size')} bytes, {str(manifest.get('sha256'))[:12]}"
                           "...): it is damaged or was altered. Restore another backup.")
    fmt = manifest.get("format", "")
    source = raw
    if fmt.endswith("+age"):
        if not key:
            raise BackupFailed("This backup is encrypted (age): set IDENTITY_BACKUP_ENCRYPTION_KEY (or _FILE) to the "
                               "key it was made with, and run the command again. Nothing was changed.")
        opened = folder / "decrypted"
        try:
            with open(raw, "rb") as sealed, open(opened, "wb") as out:
                pyrage.decrypt_io(sealed, out, [pyrage.x25519.Identity.from_str(key)])
        except pyrage.DecryptError:
            raise BackupFailed("The encryption key does not open this backup: it was made with another key. Set "
                               "IDENTITY_BACKUP_ENCRYPTION_KEY to that one. Nothing was changed.") from None
        source, fmt = opened, fmt.removesuffix("+age")
    if fmt == "sqlite+zstd":
        plain = folder / "identity.db"
        try:
            with open(source, "rb") as packed, open(plain, "wb") as out:
                zstandard.ZstdDecompressor().copy_stream(packed, out, read_size=BLOCK, write_size=BLOCK)
        except zstandard.ZstdError as error:
            raise BackupFailed(f"The backup does not decompress ({error}): it is damaged.") from None
        return plain
    if fmt == "pg_dump-custom":
        return source
    raise BackupFailed(f"The backup's format {fmt or '(none)'} is not one this version of the service reads.")


def check_dump(path, engine):
    """`pg_restore --list` reads the archive at `path` through (its table of contents and its blocks' headers)."""
    check_client("pg_restore", engine)
    done = subprocess.run(["pg_restore", "--list", str(path)], capture_output=True, text=True)
    if done.returncode:
        raise BackupFailed(f"pg_restore cannot read the dump: {last_line(done.stderr)}")
    return done.stdout.count("\n")
