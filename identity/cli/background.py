"""Background work on its own: `flask --app app webhooks deliver` here, `mirrors run` (cli.mirrors) through
run_alone too."""

import signal

import click
from flask.cli import pass_script_info

from ..feed import delivery
from ..storage.database import db, missing_sqlite_file
from . import refuse_missing_database


@click.group()
def webhooks():
    """Webhooks: run a deliverer on its own."""


@webhooks.command("deliver")
@pass_script_info
def deliver_command(script_info):
    """Deliver webhooks until stopped (SIGINT or SIGTERM); one deliverer works at a time, through the lease."""
    app = script_info.load_app()
    with app.app_context():  # a database that is down is waited for; one that does not exist is not created
        missing = missing_sqlite_file(db.engine.url)
    if missing is not None:
        refuse_missing_database(missing)
    run_alone(delivery.Deliverer(app), "Delivering webhooks")


def run_alone(holder, doing):
    """Run `holder` (a storage.lease.LeaseHolder) in this process until SIGINT or SIGTERM, then give its lease up."""
    signal.signal(signal.SIGTERM, lambda signum, frame: holder.stopping.set())
    click.echo(f"{doing} as {holder.holder}; stop with Ctrl-C.", err=True)
    try:
        holder.run()
    except KeyboardInterrupt:
        pass
    finally:
        holder.stop()
