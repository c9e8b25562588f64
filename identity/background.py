"""Background work of a serving process, in one place: what runs beside the requests, and how it starts
and stops with the app.

- The webhook deliverer (identity.feed.delivery) runs in every serving process; a lease in the database lets
  one at a time deliver, across processes and nodes. `flask --app app webhooks deliver` runs one on its
  own, and IDENTITY_WEBHOOKS_DELIVER=0 keeps a node's serving processes out.
- The mirrors' follower (identity.data.follower) likewise: one at a time across processes and nodes follows
  every active mirror's upstream; `flask --app app mirrors run` runs one on its own, and
  IDENTITY_MIRRORS_FOLLOW=0 keeps a node's serving processes out.
- The writer of the keys' uses (identity.core.key_use) runs in every serving process: a request notes its
  key's use in memory, and the writer records it in the database every IDENTITY_KEY_USE_INTERVAL, and once
  more as the process stops.
- The audit log's pruner (identity.core.audit_retention): one at a time across processes and nodes, through
  a lease, when the server starts and hourly after; `flask --app app audit prune` prunes at once.
- The backup scheduler (identity.data.backups.schedule) likewise, when IDENTITY_BACKUP_SCHEDULE and
  IDENTITY_BACKUP_URL are set: one at a time takes each scheduled time's backup; `flask --app app backups
  schedule` runs one on its own, and IDENTITY_BACKUPS_TAKE=0 keeps a node's serving processes out.
- The live feed's hub (identity.feed.live) wakes the long polls and event streams of the process; the first
  of them starts it.

Under gunicorn's gevent worker they are greenlets, started and stopped by gunicorn.conf.py's worker
hooks; under `flask run`, threads, started here; the Flask test client starts only the hub, on demand (its
keys' uses are written by identity.core.key_use.write_noted).
"""

import click
from werkzeug.serving import is_running_from_reloader

from .core import audit_retention, key_use
from .data import follower
from .data.backups import schedule
from .feed import delivery, live


def init_app(app):
    """Give `app` its hub; under `flask run`, start the background work in the serving process."""
    live.init_app(app)
    context = click.get_current_context(silent=True)
    if context is not None and context.info_name == "run":
        reloads = context.params.get("reload")
        # With the reloader, the process that serves is its child; the watching parent does not deliver.
        if not (reloads if reloads is not None else app.debug) or is_running_from_reloader():
            start(app)


def _is_this_service(app):
    """Whether `app` came from this package's factory: gunicorn.conf.py also serves the benchmark's
    floors (a bare WSGI callable, a plain Flask app), which have no background work."""
    return live.EXTENSION in getattr(app, "extensions", {})


def start(app):
    """Start the background work of a serving process (gunicorn's post_worker_init, `flask run`)."""
    if _is_this_service(app):
        key_use.start(app)
        delivery.start(app)
        follower.start(app)
        schedule.start(app)
        audit_retention.start(app)


def end_streams():
    """End every open event stream and long poll of this process at once: on SIGTERM, so that the
    shutdown waits on none of them (their clients resume with Last-Event-ID)."""
    live.end_streams()


def stop(app, timeout=2.0):
    """Stop `app`'s background work in this process: the deliverer and the follower give their leases up,
    the hub ends, and the keys' uses noted since the last write are written."""
    if _is_this_service(app):
        delivery.stop(app, timeout)
        follower.stop(app, timeout)
        schedule.stop(app, timeout)
        audit_retention.stop(app, timeout)
        live.stop(app)
        key_use.stop(app, timeout)
