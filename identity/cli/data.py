"""The data commands: `flask --app app backup PATH`, `restore PATH`, `identities ...` (curate, export, import,
snapshot) and `db copy --to URL`."""

import os
import sqlite3
import sys
import tempfile
from pathlib import Path

import click
from alembic.script import ScriptDirectory
from flask import current_app
from flask.cli import with_appcontext
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from ..core import audit, contract_wallets, curation
from ..core.errors import IdentityNotFound
from ..core.wallets import checksum_wallet
from ..data import copy as dbcopy
from ..data import exports, imports
from ..data import restore as restoring
from ..data import snapshot as car
from ..schemas import MAX_SEQ, STATUSES
from ..storage.database import db, migrate, missing_sqlite_file
from ..storage.readiness import upgrade_command
from . import (
    CLI_WALLET,
    faults,
    interrupted,
    needs_database,
    overwrite_option,
    progress,
    refuse_existing,
    refuse_missing_database,
    wallet_option,
    writing,
)


@click.command("backup")
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
@overwrite_option
@with_appcontext
@needs_database
def backup(path, overwrite):
    """Write a consistent copy of the SQLite database to PATH, while the service runs.

    SQLite's online backup copies one snapshot of the database: every create acknowledged before
    the backup began is in it, and writes go on meanwhile. The copy is checked (PRAGMA
    integrity_check) and is one self-contained file; docs/backup.md says how to restore it. An existing
    PATH is refused unless --overwrite.
    """
    url = db.engine.url
    if url.get_backend_name() != "sqlite":
        raise click.ClickException(
            f"backup copies SQLite databases; this one is {url.get_backend_name()}. Use its own tool, pg_dump, given "
            "the URL as libpq reads it (postgresql://..., without +psycopg), e.g. in bash: "
            "`pg_dump --format=custom --file=identity.dump \"${DATABASE_URL/+psycopg/}\"` (see docs/backup.md)."
        )
    source_path = url.database
    if not source_path or source_path == ":memory:" or not Path(source_path).is_file():
        raise click.ClickException(f"No SQLite database file at {source_path!r}: nothing to back up.")
    path = path.resolve()
    if path == Path(source_path).resolve():
        raise click.ClickException("PATH is the database itself; give another file name.")
    if path.is_dir():
        raise click.ClickException(f"{path} is a folder; give a file name.")
    refuse_existing(path, overwrite)
    if not path.parent.is_dir():
        raise click.ClickException(f"No folder {path.parent} to write the backup in.")
    # Written under a temporary name beside PATH and renamed when complete and checked: PATH is
    # either absent or a whole, sound copy.
    handle, partial = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
    os.close(handle)
    try:
        source = sqlite3.connect(source_path, timeout=30)
        target = sqlite3.connect(partial)
        try:
            # All pages in one step: one read transaction, so one snapshot. In WAL mode it holds no
            # lock that writers wait for.
            source.backup(target)
            # The copy carries the source's WAL mode; a rollback journal makes it one file at rest.
            # The service turns WAL back on when it opens it.
            target.execute("PRAGMA journal_mode = DELETE")
            problems = [row[0] for row in target.execute("PRAGMA integrity_check")]
            identities = target.execute("SELECT count(*) FROM identities").fetchone()[0]
        finally:
            target.close()
            source.close()
        if problems != ["ok"]:
            raise click.ClickException("The copy failed its integrity check: " + "; ".join(problems[:5]))
        exports.put_in_place(partial, path, overwrite)
    except sqlite3.Error as error:
        raise click.ClickException(f"The backup failed: {error}") from None
    except FileExistsError:  # another process wrote PATH meanwhile: its file stays
        refuse_existing(path, overwrite)
        raise
    finally:
        Path(partial).unlink(missing_ok=True)
    audit.record_now("database.backup", "database", path.name, after={"path": str(path), "identities": identities})
    click.echo(f"Backed up {source_path} ({identities} identities) to {path}; integrity check ok.", err=True)
    click.echo(str(path))


@click.command("restore")
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--issued-up-to", "issued_up_to", type=click.IntRange(0, MAX_SEQ), default=0, metavar="SEQ",
    help="When the replaced database is lost: the highest seq that followers may hold (a receiver's last "
    "webhook-id, a follower's position); later entries are numbered above it.",
)
@with_appcontext
def restore(path, issued_up_to):
    """Put the backup at PATH (written by `flask backup`) in place of the SQLite database; stop the service first.

    The backup is checked (PRAGMA integrity_check, its schema's revision), the old database's write-ahead log
    is dropped so that it cannot be replayed over the restored file, and the feed's sequence is raised above
    every number the replaced database issued: no seq, and so no webhook-id, ever names two entries.
    """
    put_back(path, issued_up_to)


def put_back(backup, issued_up_to, write=None):
    """restore's work: the backup at `backup` (a Path) in place of the SQLite database, or with `write`, the backup
    named `backup` whose bytes write(path) puts in the file at path (restoring.restore_sqlite)."""
    url = db.engine.url
    if url.get_backend_name() != "sqlite":
        raise click.ClickException(
            f"restore puts back SQLite backups; this database is {url.get_backend_name()}. Restore a pg_dump with "
            "pg_restore, and raise the feed's sequence as docs/backup.md shows, so that no seq is used twice."
        )
    database = url.database
    if not database or database == ":memory:":
        raise click.ClickException("DATABASE_URL names no SQLite file to restore into.")
    db.engine.dispose()  # this process keeps nothing of the old file open
    try:
        restored = restoring.restore_sqlite(
            Path(database), backup, ScriptDirectory.from_config(migrate.get_config()), issued_up_to, write=write
        )
    except restoring.RestoreRefused as refused:
        raise click.ClickException(str(refused)) from None
    _record_restore(backup, restored)
    replaced = ("a database that had issued seq " + str(restored.replaced_end) if restored.replaced_end is not None
                else "no database (none was there)")
    click.echo(f"Restored {backup} ({restored.identities} identities, feed issued up to seq {restored.backup_end}) in "
               f"place of {replaced}; integrity check ok. The next entry of the feed is seq {restored.next_seq}.",
               err=True)
    if restored.replaced_end is None and not issued_up_to:
        click.echo(
            f"No database was there to say how far the feed had numbered. Pollers and streams beyond seq "
            f"{restored.backup_end} get a 409 that names the feed's end; webhook receivers cannot be told. If a "
            "receiver may hold later entries, restore again with --issued-up-to its last seq, or register its "
            "webhook again (new webhook-ids).", err=True,
        )
    if not restored.current:
        click.echo(f"Its schema is at revision {restored.revision}, older than this code's: run `{upgrade_command()}` "
                   "before starting the service.", err=True)
    click.echo(database)


def _record_restore(backup, restored):
    """The restore's entry, in the restored database's audit log (which the backup brought back); a backup of a
    schema without one gets none, and the command says so."""
    try:
        audit.record_now("database.restore", "database", Path(backup).name, after={
            "path": str(backup), "identities": restored.identities, "backup_end": restored.backup_end,
            "replaced_end": restored.replaced_end, "next_seq": restored.next_seq})
    except SQLAlchemyError:
        db.session.remove()
        click.echo("The restored database has no audit log yet (its schema is older): the restore is not in it.",
                   err=True)


@click.group()
@with_appcontext
@needs_database
def identities():
    """Curate identities, and move them as data: export, import, snapshot."""


@identities.command("set-status")
@click.argument("identity_id")
@click.argument("status", type=click.Choice(STATUSES))
@click.option("--by", "wallet", default=None, help='Wallet recorded in the history as the one who acted (default "cli").')
@with_appcontext
def set_status(identity_id, status, wallet):
    """Set an identity's STATUS (removed: it answers 410 Gone; another status brings it back)."""
    if wallet is not None:
        try:
            wallet = checksum_wallet(wallet)
        except ValueError as error:
            raise click.BadParameter(str(error), param_hint="--by") from None
    try:
        identity = curation.update_identity(identity_id, {"status": status}, wallet or CLI_WALLET)
    except IdentityNotFound:
        raise click.ClickException(f"No identity has the id {identity_id!r}.") from None
    click.echo(f"{identity['identity_id']} is {identity['status']}.")


@identities.command("export")
@click.argument("path", default="-", type=click.Path(dir_okay=False, allow_dash=True, path_type=Path))
@overwrite_option
@with_appcontext
def export_identities(path, overwrite):
    """Write every identity as JSON Lines to PATH (default -, standard output), oldest first.

    Each line is the Identity as an Admin reads it, with the creator reduced to its wallet; `identities
    import` reads it back. A file is written under a temporary name and put in place when complete; an
    existing PATH is refused unless --overwrite.
    """
    try:
        with faults("The export"), progress(exports.count_identities()) as bar:
            if str(path) == "-":
                with click.open_file("-", "wb") as stdout:
                    written = exports.export_identities(stdout, bar.update)
            else:
                with writing(path, overwrite) as stream:
                    written = exports.export_identities(stream, bar.update)
    except KeyboardInterrupt:
        interrupted("no file was written" if str(path) != "-" else "the output stops where it was")
    click.echo(f"exported {written} identities", err=True)


@identities.command("import")
@click.argument("source", type=click.File("rb"))
@click.option("--by", "wallet", default=None, help='Wallet the change log names for each import (default "cli").')
@with_appcontext
def import_identities(source, wallet):
    """Import identities from SOURCE (a file, or - for standard input) as `identities export` wrote them.

    Every line's identity_id is recomputed from its content: a line that does not match, or whose
    fields are invalid, is refused and reported with its line number. Identities already present are
    skipped. Prints `imported N, skipped M, refused K`; exits with 1 when K > 0. Lines are committed
    in batches: after Ctrl-C, what was committed stays and is reported.
    """
    wallet = wallet_option(wallet)
    counts = imports.ImportCounts()

    def refused(number, message):
        click.echo(f"line {number}: refused: {message}", err=True)

    try:
        with faults("The import", counts), progress() as bar:
            imports.import_identities(source, wallet or CLI_WALLET, counts, refused, bar.update)
    except KeyboardInterrupt:
        click.echo(f"Interrupted after line {counts.lines}: {counts.summary()} (committed; import the rest again, "
                   "present identities are skipped).", err=True)
        sys.exit(130)
    audit.record_now("identities.import", "database", getattr(source, "name", None), after={
        "imported": counts.imported, "skipped": counts.skipped, "refused": counts.refused})
    click.echo(counts.summary())
    if counts.refused:
        sys.exit(1)


@identities.command("snapshot")
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
@overwrite_option
@with_appcontext
def snapshot(path, overwrite):
    """Write every identity's content to PATH as a CARv1 file for IPFS, and print its root CID.

    Each content is a raw block whose CID is the identity's content_id; DAG-CBOR index blocks link
    them all under one root, which depends only on the set of identities. `ipfs dag import PATH`
    loads it. The file is written under a temporary name and put in place when complete; an existing PATH
    is refused unless --overwrite.
    """
    try:
        with faults("The snapshot"), progress(exports.count_identities()) as bar, writing(path, overwrite) as stream:
            root, written = car.write_snapshot(stream, bar.update)
    except car.SnapshotError as error:
        raise click.ClickException(str(error)) from None
    except KeyboardInterrupt:
        interrupted("no file was written")
    click.echo(f"wrote {written} identities to {path}", err=True)
    click.echo(str(root))


@click.command("copy")
@click.option("--to", "target_url", required=True, metavar="URL", help="The database to copy into: migrated and empty.")
@with_appcontext
def copy_database(target_url):
    """Copy everything from this database (DATABASE_URL) into the one at URL, e.g. SQLite to PostgreSQL.

    The target must be migrated to the same revision (`DATABASE_URL=URL flask --app app db upgrade`)
    and hold no data. Every table is copied in one transaction, then each table's row count and
    checksum are compared with the source's; on any failure or Ctrl-C the target is left as it was.
    """
    missing = missing_sqlite_file(db.engine.url)
    if missing is not None:
        refuse_missing_database(missing)
    try:
        with progress(unit="rows") as bar:
            report = dbcopy.copy_database(db.engine, target_url, bar.update,
                                          contract_wallets.Endpoints.of(current_app.config))
    except dbcopy.CopyRefused as refusal:
        raise click.ClickException(str(refusal)) from None
    except KeyboardInterrupt:
        interrupted("nothing was written to the target")
    # The target's URL without its password: never a credential in the log.
    target = make_url(target_url).render_as_string(hide_password=True)
    audit.record_now("database.copy", "database", target[:128], after={"rows": sum(report.values()), "tables": len(report)})
    for table, rows in report.items():
        click.echo(f"{table}: {rows} rows, checksum equal", err=True)
    click.echo(f"copied {sum(report.values())} rows in {len(report)} tables; counts and checksums verified")
