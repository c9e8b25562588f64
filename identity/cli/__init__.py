"""The command line, `flask --app app ...`: `keys` (issue, list, rotate, revoke), `identities` (curate, export,
import, snapshot), `backup`, `restore`, `backups` (list, verify, schedule), `db copy`, `check-database`, `webhooks
deliver` (a deliverer on its own), `mirrors` (the upstreams this instance follows, and `mirrors run`, a follower on
its own), and `audit` (list, export, verify, prune the audit log).
One module per group; what they share is here."""

import functools
import os
import sys
from contextlib import contextmanager

import click
from flask.cli import with_appcontext
from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from tqdm import tqdm

from ..core.wallets import checksum_wallet
from ..data import exports
from ..storage import readiness
from ..storage.database import db, missing_sqlite_file
from ..storage.faults import cause

# Who the history names for a change made on the command line without --by.
CLI_WALLET = "cli"


def init_app(app):
    """Give `app` the service's commands (`flask db copy` goes beside Flask-Migrate's own `db` commands)."""
    from flask_migrate.cli import db as migrate_commands

    from . import audit, background, backups, data, keys, mirrors

    app.cli.add_command(check_database)
    app.cli.add_command(keys.keys)
    # backup and restore with a PATH are data's; without one (or with a NAME) backups' (the target's).
    app.cli.add_command(backups.backup)
    app.cli.add_command(backups.restore)
    app.cli.add_command(backups.backups)
    app.cli.add_command(data.identities)
    app.cli.add_command(background.webhooks)
    app.cli.add_command(mirrors.mirrors_group)
    app.cli.add_command(audit.audit_group)
    audit.init_app(app)
    migrate_commands.add_command(data.copy_database)


def require_database(connection_only=False):
    """Stop the command with one line, and exit status 1, unless the database answers and (unless
    `connection_only`) is at the latest migration.

    An SQLite file that does not exist is not opened (that would create it, empty): the command stops,
    saying so, and nothing is left behind. With `connection_only` (before `db upgrade`, which creates it)
    its folder is enough; returns the path then, else None."""
    missing = missing_sqlite_file(db.engine.url)
    if missing is not None:
        if not connection_only or not os.path.isdir(os.path.dirname(os.path.abspath(missing))):
            refuse_missing_database(missing)
        return missing
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


def refuse_missing_database(path):
    """Stop the command: DATABASE_URL names the SQLite file `path`, which does not exist (nor, maybe, its folder)."""
    folder = os.path.dirname(os.path.abspath(path))
    create = (f"create the database there with `{readiness.upgrade_command()}`" if os.path.isdir(folder)
              else f"create the folder {folder} and then the database with `{readiness.upgrade_command()}`")
    raise click.ClickException(
        f"The database does not answer: there is no SQLite database at {path} (nothing was created). "
        f"Check DATABASE_URL, or {create}."
    )


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
    missing = require_database(connection_only)
    if missing is not None:
        click.echo(f"No SQLite database at {missing} yet: `db upgrade` creates it there.")
    else:
        click.echo("The database answers." if connection_only else "The database answers and is at the latest migration.")


@contextmanager
def faults(action, counts=None):
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


def progress(total=None, unit="identities"):
    """A progress bar on stderr (rows done, rate) when it is a terminal; nothing in a pipe or a file."""
    return tqdm(total=total, unit=f" {unit}", unit_scale=False, disable=None, file=sys.stderr, dynamic_ncols=True)


def interrupted(outcome):
    click.echo(f"Interrupted: {outcome}.", err=True)
    sys.exit(130)


# The one rule of the commands that write a file (backup, identities export, identities snapshot): an
# existing file is kept unless --overwrite says to replace it.
overwrite_option = click.option(
    "--overwrite", is_flag=True, help="Replace PATH if it exists (without it, an existing file is refused and kept).",
)


def refuse_existing(path, overwrite):
    """Stop the command when `path` exists and `overwrite` was not given, saying what to do."""
    if path.exists() and not overwrite:
        raise click.ClickException(f"{path} exists already, and was left as it is: give a new file name, or add "
                                   "--overwrite to replace it.")


def writing(path, overwrite=False):
    if path.exists() and path.is_dir():
        raise click.BadParameter(f"{path} is a folder; give a file name.", param_hint="PATH")
    if not path.resolve().parent.is_dir():
        raise click.BadParameter(f"No folder {path.resolve().parent} to write in.", param_hint="PATH")
    refuse_existing(path, overwrite)
    return _written(path, overwrite)


@contextmanager
def _written(path, overwrite):
    try:
        with exports.replacing(path, overwrite) as stream:
            yield stream
    except FileExistsError:  # another process wrote PATH meanwhile: its file stays
        refuse_existing(path, overwrite)
        raise


def wallet_option(wallet):
    if wallet is None:
        return None
    try:
        return checksum_wallet(wallet)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="--by") from None
