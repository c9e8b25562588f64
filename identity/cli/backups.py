"""Backups kept elsewhere: `flask --app app backup [PATH]`, `restore PATH|NAME`, and `backups list`, `backups
verify NAME`, `backups schedule` (identity.data.backups). With a PATH, `backup` and `restore` are
cli.data's: one local file."""

from pathlib import Path

import click
from alembic.script import ScriptDirectory
from flask import current_app
from flask.cli import pass_script_info, with_appcontext

from ..core import audit
from ..data.backups import archive, opening, restoring, runs, schedule
from ..data.backups.store import StoreError
from ..schemas import MAX_SEQ
from ..storage.database import db, migrate
from . import data, needs_database, overwrite_option
from .background import run_alone

# The extensions a backup on the target has: a path that ends with one is read from its folder as a target's.
EXTENSIONS = (".sqlite.zst", ".sqlite.zst.age", ".pgdump", ".pgdump.age")
FAILURES = (archive.BackupFailed, StoreError, runs.NoTarget)


def _refused(error):
    return click.ClickException(str(error))


@click.command("backup")
@click.argument("path", required=False, type=click.Path(dir_okay=False, path_type=Path))
@overwrite_option
@click.pass_context
@with_appcontext
@needs_database
def backup(context, path, overwrite):
    """Take one backup now to IDENTITY_BACKUP_URL (kind manual), or with PATH write a local SQLite copy there.

    Without PATH: SQLite's online backup compressed, or pg_dump --format=custom on PostgreSQL; encrypted when
    IDENTITY_BACKUP_ENCRYPTION_KEY is set; uploaded in parts, checked after the upload (size and SHA-256),
    and listed by `backups list` once its manifest is written. The backup's name is the last line of output.
    """
    if path is not None:
        return context.invoke(data.backup, path=path, overwrite=overwrite)
    try:
        name, manifest = runs.take("manual")
    except FAILURES as error:
        raise _refused(error) from None
    click.echo(f"Backed up {manifest['identities']} identities ({manifest['database']}, migration "
               f"{manifest['migration']}, feed issued up to seq {manifest['issued_up_to']}) to "
               f"{runs.target().where}{name}: {manifest['size']} bytes, verified after the upload.", err=True)
    click.echo(name)
    return None


@click.command("restore")
@click.argument("source")
@click.option(
    "--issued-up-to", "issued_up_to", type=click.IntRange(0, MAX_SEQ), default=0, metavar="SEQ",
    help="When the replaced database is lost: the highest seq that followers may hold (a receiver's last "
    "webhook-id, a follower's position); later entries are numbered above it.",
)
@click.pass_context
@with_appcontext
def restore(context, source, issued_up_to):
    """Restore SOURCE in place of the database; stop the service first.

    SOURCE is a file that `flask backup PATH` wrote, or a backup on the target: a name from `backups list`,
    an s3://BUCKET/PREFIX/NAME URL, or the path of one in a folder target. A backup from the target is
    checked against its manifest (SHA-256), decrypted and decompressed as it downloads, straight into the
    restored file (SQLite, then restored as a file is) or into pg_restore (PostgreSQL, one transaction). Either
    way the feed never reuses a number, and a backup that does not check out changes nothing.
    """
    remote = source.startswith("s3://") or source.endswith(EXTENSIONS) or (
        not Path(source).exists() and source.startswith("identity-"))
    if not remote:
        return context.invoke(data.restore, path=Path(source), issued_up_to=issued_up_to)
    key = current_app.config.get("IDENTITY_BACKUP_ENCRYPTION_KEY")
    backend = db.engine.url.get_backend_name()
    try:
        where, name = restoring.source(source)
        store = runs.target(where)
        manifest = opening.manifest_of(store, name)
        kind = manifest.get("database")
        if kind != ("sqlite" if backend == "sqlite" else "postgresql"):
            raise click.ClickException(f"{name} is a backup of a {kind} database and this one is {backend}: "
                                       "restore it into a database of its kind, then `flask db copy` if needed.")
        opening.identity_for(manifest, key)  # a format this version reads, and the key it needs: before any download
        if backend == "sqlite":

            def download(path):
                restoring.write_sqlite(store, name, manifest, key, path)
                click.echo(f"Downloaded {name} from {store.where}: SHA-256 matches its manifest.", err=True)

            return data.put_back(name, issued_up_to, write=download)
        replaced, next_seq = restoring.restore_postgresql(
            db.engine, lambda sink: opening.receive(store, name, manifest, key, sink), issued_up_to)
        click.echo(f"Downloaded {name} from {store.where}: SHA-256 matches its manifest.", err=True)
        audit.record_now("database.restore", "backup", name, after={
            "identities": manifest.get("identities"), "issued_up_to": manifest.get("issued_up_to"),
            "next_seq": next_seq})
    except FAILURES as error:
        raise _refused(error) from None
    was = f"a database that had issued seq {replaced}" if replaced is not None else "no change log (a new database)"
    click.echo(f"Restored {name} ({manifest.get('identities')} identities, feed issued up to seq "
               f"{manifest.get('issued_up_to')}) in place of {was}. The next entry of the feed is seq {next_seq}.",
               err=True)
    click.echo(db.engine.url.render_as_string(hide_password=True))  # the database, as restore PATH ends
    return None


@click.group("backups")
def backups():
    """Backups on the target (IDENTITY_BACKUP_URL): list, verify, and the scheduler on its own."""


@backups.command("list")
@with_appcontext
def list_backups():
    """The target's backups, newest first: name, time, size, kind, database, migration, issued-up-to, count,
    and whether it verified."""
    try:
        found = runs.listing()
    except FAILURES as error:
        raise _refused(error) from None
    if not found:
        click.echo(f"No backups at {runs.target().where}.", err=True)
        return
    click.echo("\t".join(("name", "time", "size", "kind", "database", "migration", "issued_up_to", "identities",
                          "verified")))
    for backup in found:
        verified = {True: "yes", False: "NO"}.get(backup.get("verified"), "-")
        click.echo("\t".join(str(backup.get(field, "")) for field in (
            "name", "time", "size", "kind", "database", "migration", "issued_up_to", "identities")) + f"\t{verified}")


@backups.command("verify")
@click.argument("name")
@with_appcontext
def verify_backup(name):
    """Download the backup NAME and check it: its SHA-256 against its manifest, then open it (SQLite:
    integrity_check and a known migration; PostgreSQL: pg_restore --list). Exits 1 if it does not verify."""
    script = ScriptDirectory.from_config(migrate.get_config())
    try:
        found = runs.verify(name, script)
    except FAILURES as error:
        audit.record_now("backup.verify", "backup", name, outcome="failed", detail=str(error)[:500])
        raise click.ClickException(f"{name} does not verify: {error}") from None
    audit.record_now("backup.verify", "backup", name, after={"found": found})
    click.echo(f"{name} verified: SHA-256 matches its manifest; {found}.")


@backups.command("schedule")
@pass_script_info
def schedule_command(script_info):
    """Take the scheduled backups (IDENTITY_BACKUP_SCHEDULE) until stopped; one scheduler works at a time."""
    app = script_info.load_app()
    if not (app.config.get("IDENTITY_BACKUP_SCHEDULE") and app.config.get("IDENTITY_BACKUP_URL")):
        raise click.ClickException("Set IDENTITY_BACKUP_SCHEDULE (cron, UTC) and IDENTITY_BACKUP_URL first.")
    run_alone(schedule.Scheduler(app), "Taking scheduled backups")
