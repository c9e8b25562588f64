"""`flask keys ...`: issue, list, rotate and revoke API keys. `flask identities ...`: curate identities.
`flask backup PATH`: copy the SQLite database. `flask identities export|import|snapshot` and `flask db copy`:
identities as data (identity.data.imports, identity.data.snapshot, identity.data.copy). `flask webhooks deliver`: a webhook
deliverer on its own."""

import functools
import os
import signal
import sqlite3
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

import click
from flask.cli import pass_script_info, with_appcontext
from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from tqdm import tqdm

from .core import curation
from .core import keys as service
from .core.errors import IdentityNotFound, ServiceError
from .core.wallets import checksum_wallet
from .data import copy as dbcopy
from .data import exports, imports
from .data import snapshot as car
from .feed import delivery
from .schemas import STATUSES
from .storage import readiness
from .storage.database import db
from .storage.faults import cause
from .storage.hints import flask_command

# Who the history names for a change made on the command line without --by.
CLI_WALLET = "cli"


def require_database(connection_only=False):
    """Stop the command with one line, and exit status 1, unless the database answers and (unless
    `connection_only`) is at the latest migration."""
    try:
        if connection_only:
            with db.engine.connect():
                pass
        else:
            readiness.schema_state()
    except DBAPIError as error:
        raise click.ClickException(
            f"The database does not answer: {cause(error)}. Check DATABASE_URL and that the database is up, "
            "then run the command again."
        ) from None
    except readiness.SchemaNotCurrent as not_current:
        raise click.ClickException(not_current.detail) from None


def needs_database(command):
    """The command runs only on a database that answers and is at the latest migration (else one line, exit 1)."""

    @functools.wraps(command)
    def checked(*args, **kwargs):
        require_database()
        return command(*args, **kwargs)

    return checked


@click.command("check-database")
@click.option("--connection-only", is_flag=True, help="Only whether the database answers (before `db upgrade`).")
@with_appcontext
def check_database(connection_only):
    """Say in one line whether the database answers and is at the latest migration; exit 1 if not."""
    require_database(connection_only)
    click.echo("The database answers." if connection_only else "The database answers and is at the latest migration.")


@click.group()
@with_appcontext
@needs_database
def keys():
    """Issue, list, rotate and revoke API keys."""


@keys.command("create")
@click.option("--wallet", required=True, help="Ethereum address of the key's user.")
@click.option("--role", type=click.Choice(service.ROLES), default=None, help="Role of a new user (default User), or the new role of a known one.")
@click.option("--scope", type=click.Choice(service.SCOPES), default="write", show_default=True, help="read: the key may only read.")
@click.option("--label", default=None, help="What the key is for (1 to 128 characters).")
@click.option(
    "--expires-in", type=click.IntRange(service.MIN_EXPIRES_IN, service.MAX_EXPIRES_IN), default=None, metavar="SECONDS",
    help="Seconds until the key expires (60 to 10 years); default: never.",
)
@with_appcontext
def create_key(wallet, role, scope, label, expires_in):
    """Issue a key; it is printed once, alone on the last line."""
    if label is not None and not 1 <= len(label) <= 128:
        raise click.BadParameter("must be 1 to 128 characters.", param_hint="--label")
    try:
        key, api_key = service.issue_key(wallet, role, scope=scope, label=label, expires_in=expires_in)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="--wallet") from None
    click.echo(
        f"Issued key {api_key.id} ({api_key.scope}) for {api_key.user.wallet} ({api_key.user.role}). "
        "It is shown once; store it now.",
        err=True,
    )
    click.echo(key)


@keys.command("list")
@with_appcontext
def list_keys():
    """List keys without their secrets: scope, label, expiry and last use too."""
    rows = service.all_keys()
    click.echo(
        f"{'id':36}  {'hint':9}  {'wallet':42}  {'role':5}  {'scope':5}  {'label':20}  {'created_at':20}  "
        f"{'expires_at':20}  {'last_used_at':20}  revoked_at"
    )
    for api_key in rows:
        label = (api_key.label or "-")[:20]
        click.echo(
            f"{api_key.id:36}  {api_key.hint:9}  {api_key.user.wallet:42}  {api_key.user.role:5}  {api_key.scope:5}  "
            f"{label:20}  {_moment(api_key.created_at):20}  {_moment(api_key.expires_at):20}  "
            f"{_moment(api_key.last_used_at):20}  {_moment(api_key.revoked_at)}"
        )


def _moment(value):
    return value.strftime("%Y-%m-%dT%H:%M:%SZ") if value else "-"


@keys.command("revoke")
@click.argument("key_id", required=False)
@click.option("--wallet", help="Revoke every live key of this wallet instead.")
@with_appcontext
def revoke_key(key_id, wallet):
    """Revoke a key by its id (see `keys list`), or all keys of --wallet."""
    if (key_id is None) == (wallet is None):
        raise click.UsageError("Give a KEY_ID or --wallet, not both and not neither.")
    try:
        count = service.revoke_key(key_id=key_id, wallet=wallet)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="--wallet") from None
    if count == 0:
        raise click.ClickException("No live key matched.")
    click.echo(f"Revoked {count} key{'s' if count != 1 else ''}.")


@keys.command("rotate")
@click.argument("key_id")
@click.option(
    "--grace", "grace_seconds", type=click.IntRange(0, service.MAX_GRACE_SECONDS), default=0, show_default=True,
    metavar="SECONDS", help="Seconds the old key keeps working.",
)
@with_appcontext
def rotate_key(key_id, grace_seconds):
    """Replace a key: issue a new one for the same user, scope, label and expiry, and revoke KEY_ID
    (see `keys list`), after --grace seconds.

    The new key is printed once, alone on the last line. Without a grace the old one is refused from
    the next request on: by this process at once, by every other worker within IDENTITY_KEY_CACHE_SECONDS.
    """
    try:
        key, api_key = service.rotate_key(key_id, grace_seconds)
    except (ValueError, ServiceError) as error:
        raise click.BadParameter(str(error), param_hint="KEY_ID") from None
    click.echo(
        f"Revoked key {key_id}{f' (in {grace_seconds} s)' if grace_seconds else ''} and issued key {api_key.id} "
        f"for {api_key.user.wallet} ({api_key.user.role}). It is shown once; store it now.",
        err=True,
    )
    click.echo(key)


DEVELOPMENT_WALLET = "0x1111111111111111111111111111111111111111"


@keys.command("bootstrap")
@click.option("--wallet", default=DEVELOPMENT_WALLET, show_default=True, help="Wallet of the first key.")
@click.option("--base-url", default="http://127.0.0.1:8000", show_default=True, help="Where the service answers.")
@with_appcontext
def bootstrap_key(wallet, base_url):
    """On a database with no keys, issue a first Admin key and show how to use it; else do nothing."""
    if service.all_keys():
        click.echo(f"Keys exist already: `{flask_command('keys', 'create', '--wallet', 'ADDRESS')}` issues another.", err=True)
        return
    key, _ = service.issue_key(wallet, "Admin")
    click.echo(
        "\nA development Admin key was issued. It is shown once; keep it.\n"
        "Try it:\n\n"
        f"  curl -s -X POST {base_url}/identity -H 'x-api-key: {key}' "
        "-H 'Content-Type: application/json' -d '{\"display_name\": \"Hello\"}'\n",
        err=True,
    )
    click.echo(key)


@click.command("backup")
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
@with_appcontext
@needs_database
def backup(path):
    """Write a consistent copy of the SQLite database to PATH, while the service runs.

    SQLite's online backup copies one snapshot of the database: every create acknowledged before
    the backup began is in it, and writes go on meanwhile. The copy is checked (PRAGMA
    integrity_check) and is one self-contained file; docs/backup.md says how to restore it.
    """
    url = db.engine.url
    if url.get_backend_name() != "sqlite":
        raise click.ClickException(
            f"backup copies SQLite databases; this one is {url.get_backend_name()}. Use its own tool: "
            "pg_dump, e.g. `pg_dump --format=custom --file=identity.dump \"$DATABASE_URL\"` (see docs/backup.md)."
        )
    source_path = url.database
    if not source_path or source_path == ":memory:" or not Path(source_path).is_file():
        raise click.ClickException(f"No SQLite database file at {source_path!r}: nothing to back up.")
    path = path.resolve()
    if path.exists():
        raise click.ClickException(f"{path} exists already; give a new file name.")
    if path == Path(source_path).resolve():
        raise click.ClickException("PATH is the database itself; give another file name.")
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
        os.replace(partial, path)
    except sqlite3.Error as error:
        raise click.ClickException(f"The backup failed: {error}") from None
    finally:
        Path(partial).unlink(missing_ok=True)
    click.echo(f"Backed up {source_path} ({identities} identities) to {path}; integrity check ok.", err=True)
    click.echo(str(path))


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


@click.group()
def webhooks():
    """Webhooks: run a deliverer on its own."""


@webhooks.command("deliver")
@pass_script_info
def deliver_command(script_info):
    """Deliver webhooks until stopped (SIGINT or SIGTERM); one deliverer works at a time, through the lease."""
    app = script_info.load_app()
    deliverer = delivery.Deliverer(app)
    signal.signal(signal.SIGTERM, lambda signum, frame: deliverer.stopping.set())
    click.echo(f"Delivering webhooks as {deliverer.holder}; stop with Ctrl-C.", err=True)
    try:
        deliverer.run()
    except KeyboardInterrupt:
        pass
    finally:
        deliverer.stop()


@contextmanager
def _faults(action, counts=None):
    """A database or file fault during `action` as one line saying what to do, not a traceback."""
    done = f" Committed so far: {counts.summary()}." if counts is not None else ""
    try:
        yield
    except SQLAlchemyError as error:
        raise click.ClickException(
            f"{action} failed: the database refused or did not answer ({str(error).splitlines()[0]}).{done} "
            "Check DATABASE_URL and that the database is up and has free space, then run it again."
        ) from None
    except OSError as error:
        raise click.ClickException(
            f"{action} failed: {error.strerror or error} ({error.filename or 'output'}).{done} "
            "Check the path, its permissions and the free space, then run it again."
        ) from None


def _progress(total=None, unit="identities"):
    """A progress bar on stderr (rows done, rate) when it is a terminal; nothing in a pipe or a file."""
    return tqdm(total=total, unit=f" {unit}", unit_scale=False, disable=None, file=sys.stderr, dynamic_ncols=True)


@identities.command("export")
@click.argument("path", default="-", type=click.Path(dir_okay=False, allow_dash=True, path_type=Path))
@with_appcontext
def export_identities(path):
    """Write every identity as JSON Lines to PATH (default -, standard output), oldest first.

    Each line is the Identity as an Admin reads it, with the creator reduced to its wallet; `identities
    import` reads it back. A file is written under a temporary name and renamed when complete.
    """
    try:
        with _faults("The export"), _progress(exports.count_identities()) as bar:
            if str(path) == "-":
                with click.open_file("-", "wb") as stdout:
                    written = exports.export_identities(stdout, bar.update)
            else:
                with _writing(path) as stream:
                    written = exports.export_identities(stream, bar.update)
    except KeyboardInterrupt:
        _interrupted("no file was written" if str(path) != "-" else "the output stops where it was")
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
    wallet = _wallet_option(wallet)
    counts = imports.ImportCounts()

    def refused(number, message):
        click.echo(f"line {number}: refused: {message}", err=True)

    try:
        with _faults("The import", counts), _progress() as bar:
            imports.import_identities(source, wallet or CLI_WALLET, counts, refused, bar.update)
    except KeyboardInterrupt:
        click.echo(f"Interrupted after line {counts.lines}: {counts.summary()} (committed; import the rest again, "
                   "present identities are skipped).", err=True)
        sys.exit(130)
    click.echo(counts.summary())
    if counts.refused:
        sys.exit(1)


@identities.command("snapshot")
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
@with_appcontext
def snapshot(path):
    """Write every identity's content to PATH as a CARv1 file for IPFS, and print its root CID.

    Each content is a raw block whose CID is the identity's content_id; DAG-CBOR index blocks link
    them all under one root, which depends only on the set of identities. `ipfs dag import PATH`
    loads it. The file is written under a temporary name and renamed when complete.
    """
    try:
        with _faults("The snapshot"), _progress(exports.count_identities()) as bar, _writing(path) as stream:
            root, written = car.write_snapshot(stream, bar.update)
    except car.SnapshotError as error:
        raise click.ClickException(str(error)) from None
    except KeyboardInterrupt:
        _interrupted("no file was written")
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
    try:
        with _progress(unit="rows") as bar:
            report = dbcopy.copy_database(db.engine, target_url, bar.update)
    except dbcopy.CopyRefused as refusal:
        raise click.ClickException(str(refusal)) from None
    except KeyboardInterrupt:
        _interrupted("nothing was written to the target")
    for table, rows in report.items():
        click.echo(f"{table}: {rows} rows, checksum equal", err=True)
    click.echo(f"copied {sum(report.values())} rows in {len(report)} tables; counts and checksums verified")


def _interrupted(outcome):
    click.echo(f"Interrupted: {outcome}.", err=True)
    sys.exit(130)


def _writing(path):
    if path.exists() and path.is_dir():
        raise click.BadParameter(f"{path} is a folder; give a file name.", param_hint="PATH")
    if not path.resolve().parent.is_dir():
        raise click.BadParameter(f"No folder {path.resolve().parent} to write in.", param_hint="PATH")
    return exports.replacing(path)


def _wallet_option(wallet):
    if wallet is None:
        return None
    try:
        return checksum_wallet(wallet)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="--by") from None
