"""Background work on its own: `flask --app app webhooks deliver`."""

import signal

import click
from flask.cli import pass_script_info

from ..feed import delivery


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
