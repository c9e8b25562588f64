"""A backup's bytes, made from the database (opening.py reads them back).

On SQLite, a consistent copy (SQLite's online backup API, one snapshot) compressed with Zstandard; on
PostgreSQL, `pg_dump --format=custom` (compressed by pg_dump), run on a snapshot that the service exported
so that the manifest's figures are those of the dump. With an encryption key, the result is encrypted in
the age format (https://age-encryption.org/v1, X25519 recipient; pyrage) before it leaves the machine.
The bytes are made as they are sent (Made.pour), in blocks: the SQLite copy is the only file a backup writes
in the temporary folder (pg_dump's archive is read from its output), and memory stays flat.
"""

import os
import re
import shutil
import sqlite3
import subprocess
import tempfile
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import pyrage
import zstandard
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine, func, select, text
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import NullPool

from ...storage.faults import cause
from ...storage.models import Change, Identity
from .streams import BLOCK, Tally, Tolerant, off_the_loop

SEQUENCE = "identity_changes_seq_seq"  # PostgreSQL's sequence of identity_changes.seq
# Where that sequence stands: its last value, and whether it was ever issued.
SEQUENCE_STATE = text("SELECT last_value, is_called FROM identity_changes_seq_seq")


class BackupFailed(Exception):
    """A backup could not be made or opened; the message says why and what to do."""


@dataclass
class Made:
    """One backup, ready to be sent: its figures, and `pour(sink)` that writes its bytes into `sink` (then `size`
    and `sha256` are theirs), followed by `finish()` once they are all read."""

    format: str  # "sqlite+zstd" or "pg_dump-custom", with "+age" when encrypted
    extension: str
    database: str  # sqlite or postgresql
    migration: str
    issued_up_to: int
    identities: int
    plain: object = field(repr=False)  # the SQLite copy's path, or pg_dump's output (a readable file)
    key: str | None = field(default=None, repr=False)
    check: object = field(default=None, repr=False)  # raises BackupFailed when the source ended in a failure
    database_size: int | None = None  # the SQLite copy's bytes: what opening the backup writes (none for pg_dump)
    size: int = 0
    sha256: str = ""

    def __post_init__(self):
        if self.key is not None:
            self.format, self.extension = self.format + "+age", self.extension + ".age"

    def pour(self, sink):
        """Write the backup's bytes into `sink`: the plain database, compressed (SQLite) and encrypted (with a key),
        counted and hashed on the way. C code over files: call it off the loop."""
        tally = Tally(sink)
        with (open(self.plain, "rb") if isinstance(self.plain, Path) else nullcontext(self.plain)) as plain:
            source = plain
            if self.database == "sqlite":
                # With a checksum of the content: a frame altered anywhere fails to decompress.
                source = zstandard.ZstdCompressor(level=3, threads=-1, write_checksum=True).stream_reader(
                    plain, read_size=BLOCK, closefd=False)
            if self.key is not None:
                recipient = pyrage.x25519.Identity.from_str(self.key).to_public()
                pyrage.encrypt_io(source, tally, [recipient])
            else:
                while block := source.read(BLOCK):
                    tally.write(block)
        tally.flush()
        self.size, self.sha256 = tally.size, tally.sha.hexdigest()

    def finish(self):
        if self.check is not None:
            self.check()


def needed_space(engine):
    """The temporary space a backup of the database behind `engine` may take, in bytes: on SQLite its copy (the
    file and its WAL at most); on PostgreSQL none, pg_dump's archive being read from its output."""
    url = engine.url
    if url.get_backend_name() == "sqlite":
        database = Path(url.database)
        wal = Path(f"{database}-wal")
        return database.stat().st_size + (wal.stat().st_size if wal.exists() else 0)
    return 0


def check_space(folder, needed, doing="a backup of this database", place="The temporary folder",
                remedy="Free space, or point TMPDIR at a larger disk."):
    """Raise BackupFailed, naming the shortfall, when `folder` has less than `needed` bytes free."""
    free = shutil.disk_usage(folder).free
    if free < needed:
        raise BackupFailed(f"{place} {folder} has {free // BLOCK:,} MiB free; {doing} needs up to "
                           f"{-(-needed // BLOCK):,} MiB there. {remedy}")


@contextmanager
def prepared(engine, folder, key=None):
    """One backup of the database behind `engine`, ready to pour: a Made, encrypted to the age identity `key` (its
    public half) when one is given. SQLite's copy is made in `folder`; PostgreSQL's pg_dump runs, on the exported
    snapshot, until the context ends. Raises BackupFailed."""
    check_space(folder, needed_space(engine))
    if engine.url.get_backend_name() != "sqlite":
        with _postgresql(engine, folder, key) as made:
            yield made
        return
    try:
        made = off_the_loop(_sqlite, engine, folder, key)
    except OSError as error:
        raise BackupFailed(f"The backup could not be written in {folder}: {error.strerror or error}. "
                           "Check its free space (TMPDIR names another folder).") from None
    yield made


def _sqlite(engine, folder, key):
    copy = folder / "identity.db"
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
    return Made("sqlite+zstd", ".sqlite.zst", "sqlite", migration, issued, identities, plain=copy, key=key,
                database_size=copy.stat().st_size)


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


@contextmanager
def _postgresql(engine, folder, key):
    check_client("pg_dump", engine)
    url, env = libpq(engine.url)
    with engine.connect().execution_options(isolation_level="REPEATABLE READ") as connection, connection.begin():
        snapshot = connection.execute(text("SELECT pg_export_snapshot()")).scalar()
        migration = MigrationContext.configure(connection).get_current_heads()
        identities = connection.execute(select(func.count()).select_from(Identity.__table__)).scalar()
        last, called = connection.execute(SEQUENCE_STATE).one()
        issued = max(last if called else 0, connection.execute(select(func.max(Change.seq))).scalar() or 0)
        # pg_dump reads the database as this transaction sees it, which stays open until the dump is read: the
        # figures above are the dump's. Its archive goes to a pipe (read as the backup is sent), its messages
        # to a file.
        read, write = os.pipe()
        with tempfile.TemporaryFile(dir=folder) as messages, os.fdopen(read, "rb", buffering=BLOCK) as output:
            try:
                dump = subprocess.Popen(["pg_dump", "--format=custom", f"--snapshot={snapshot}", url],
                                        stdout=write, stderr=messages, env=env)
            finally:
                os.close(write)

            def check():
                if dump.wait():
                    messages.seek(0)
                    raise BackupFailed(f"pg_dump failed: {last_line(messages.read().decode(errors='replace'))}")

            try:
                yield Made("pg_dump-custom", ".pgdump", "postgresql", migration[0], issued, identities, plain=output,
                           key=key, check=check)
            finally:
                output.close()  # a pg_dump still writing meets a closed pipe and stops
                if dump.poll() is None:
                    dump.kill()
                dump.wait()


def last_line(stderr):
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "no message"


def check_dump(feed, engine):
    """`pg_restore --list` reads the table of contents of the archive that feed(sink) writes into its standard
    input; returns the number of entries. The feed goes on to the end of its bytes (so that they are checked)
    after pg_restore has read what it needs."""
    check_client("pg_restore", engine)
    with tempfile.TemporaryFile() as listing, tempfile.TemporaryFile() as messages:
        with subprocess.Popen(["pg_restore", "--list"], stdin=subprocess.PIPE, stdout=listing,
                              stderr=messages) as listed:
            try:
                feed(Tolerant(listed.stdin))
            finally:
                _close_quietly(listed.stdin)
            code = listed.wait()
        if code:
            messages.seek(0)
            raise BackupFailed(f"pg_restore cannot read the dump: {last_line(messages.read().decode(errors='replace'))}")
        listing.seek(0)
        return listing.read().count(b"\n")


def _close_quietly(pipe):
    try:
        pipe.close()
    except BrokenPipeError:
        pass  # the reader had what it needed
