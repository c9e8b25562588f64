"""The webhook deliverer: every entry of the change log POSTed to every active webhook, in order,
signed by the Standard Webhooks scheme, retried until a 2xx, never lost.

One deliverer works at a time across every process and node: the holder of the lease "webhooks"
(identity.storage.lease). Serving processes each run one (gunicorn.conf.py starts it in every worker, `flask
run` in its process; IDENTITY_WEBHOOKS_DELIVER=0 keeps a node out), and `flask --app app webhooks
deliver` runs one on its own. Whichever holds the lease polls the log once per interval; each webhook
with entries to deliver gets a loop of its own (a thread, a greenlet under gevent), so a slow or dead
receiver holds back only its own webhook.

Why nothing is lost: a webhook's position (the seq of the last entry delivered) is in the database and
moves only after a 2xx. Positions and the deliveries log are written in batches, so after a crash the
entries since the last batch are sent again, with the same webhook-id: at least once.
"""

import logging
import time
from datetime import timedelta

from flask import current_app
from sqlalchemy import bindparam, delete, func, insert, select, update

from ..core import history
from ..schemas import ChangeSchema
from ..storage import lease
from ..storage.database import one_statement, write_transaction
from ..storage.lease import backoff
from ..storage.models import Change, Webhook, WebhookDelivery, utcnow
from .receiver import Receiver

log = logging.getLogger(__name__)

LEASE = "webhooks"
# Entries read from the log at once, per webhook.
PAGE = 100
# Positions and delivery rows are written after this many deliveries, or this many seconds.
BATCH_SIZE = 200
BATCH_SECONDS = 0.1
EXTENSION = "identity_webhook_deliverer"

_change_schema = ChangeSchema()
_WEBHOOKS = Webhook.__table__
_DELIVERIES = WebhookDelivery.__table__
# What a webhook's loop starts from, read as it starts.
_WEBHOOK_TO_RUN = select(
    Webhook.id, Webhook.url, Webhook.secret, Webhook.position, Webhook.attempts, Webhook.failing_since,
    Webhook.next_attempt_at,
).where(Webhook.id == bindparam("id"), Webhook.active)
# What a loop follows before each attempt (WebhookRun.wanted).
_WEBHOOK_STATE = select(_WEBHOOKS.c.url, _WEBHOOKS.c.active).where(_WEBHOOKS.c.id == bindparam("id"))


class WebhookRun:
    """Deliver one webhook's pending entries in order, until it is caught up, stopped or removed."""

    def __init__(self, deliverer, webhook):
        self.deliverer = deliverer
        self.id = webhook.id
        self.secret = webhook.secret
        self.position = webhook.position
        self.attempts = webhook.attempts
        self.failing_since = webhook.failing_since
        self.next_attempt_at = webhook.next_attempt_at
        self.receiver = Receiver(webhook.url, webhook.secret)
        self.pending = []
        self.flushed_at = time.monotonic()
        config = current_app.config
        self.give_up = timedelta(seconds=config["IDENTITY_WEBHOOK_GIVE_UP"])
        self.retry = (config["IDENTITY_WEBHOOK_RETRY_MIN_SECONDS"], config["IDENTITY_WEBHOOK_RETRY_MAX_SECONDS"])
        self.kept = config["IDENTITY_WEBHOOK_DELIVERIES_KEPT"]

    def run(self):
        try:
            if self.next_attempt_at and not self.wait((self.next_attempt_at - utcnow()).total_seconds()):
                return
            while self.deliverer.holding():
                entries = [entry for entry, _ in history.entries_after(self.position, PAGE)]  # whole, as Admins see them
                if not entries or not all(self.deliver(entry) for entry in entries):
                    break
            if self.pending:
                self.flush()
        finally:
            self.receiver.close()

    def deliver(self, entry):
        """Send `entry` until it is delivered; False when this run must stop instead."""
        body = current_app.json.dumps(_change_schema.dump(entry))
        message_id = f"{self.id}_{entry['seq']}"
        while self.deliverer.holding() and self.wanted():
            attempt = self.attempts + 1
            at, started = utcnow(), time.monotonic()
            status, error = self.receiver.post(message_id, body)
            self.pending.append({
                "webhook_id": self.id, "seq": entry["seq"], "attempt": attempt, "at": at,
                "duration_ms": round((time.monotonic() - started) * 1000), "status": status, "error": error,
            })
            if error is None:
                self.position, self.attempts, self.failing_since, self.next_attempt_at = entry["seq"], 0, None, None
                due = len(self.pending) >= BATCH_SIZE or time.monotonic() - self.flushed_at >= BATCH_SECONDS
                return self.flush() if due else True
            self.attempts = attempt
            self.failing_since = self.failing_since or at
            delay = backoff(attempt, *self.retry)
            self.next_attempt_at = utcnow() + timedelta(seconds=delay)
            extra = {"webhook_id": self.id, "seq": entry["seq"], "attempt": attempt, "status": status, "error": error}
            if at - self.failing_since >= self.give_up:
                log.warning("webhook failing too long: turned inactive; PATCH active true resumes it", extra=extra)
                self.flush(give_up=True)
                return False
            log.info("webhook delivery failed; retrying", extra={**extra, "retry_in_seconds": round(delay, 3)})
            if not self.flush() or not self.wait(delay):
                return False
        return False

    def flush(self, give_up=False):
        """Record the position, the retry state and the pending attempts; False when this run must
        stop: the webhook is gone or inactive, or another deliverer has moved it further."""
        rows, self.pending = self.pending, []
        values = {"position": self.position, "attempts": self.attempts, "failing_since": self.failing_since,
                  "next_attempt_at": self.next_attempt_at}
        if give_up:
            values["active"] = False
        with write_transaction() as session:
            found = session.execute(
                update(_WEBHOOKS)
                .where(_WEBHOOKS.c.id == self.id, _WEBHOOKS.c.position <= self.position)
                .values(**values)
                .returning(_WEBHOOKS.c.url, _WEBHOOKS.c.active)
            ).first()
            if found is not None and rows:
                session.execute(insert(_DELIVERIES), rows)
                oldest_kept = (
                    select(_DELIVERIES.c.id).where(_DELIVERIES.c.webhook_id == self.id)
                    .order_by(_DELIVERIES.c.id.desc()).offset(self.kept).limit(1).scalar_subquery()
                )
                session.execute(delete(_DELIVERIES).where(_DELIVERIES.c.webhook_id == self.id, _DELIVERIES.c.id <= oldest_kept))
        self.flushed_at = time.monotonic()
        return self.follow(found)

    def wanted(self):
        """Whether the webhook is still registered and active, read afresh before each attempt: after a
        DELETE or a PATCH "active": false is answered, no attempt starts; after a new URL, the next goes there."""
        with one_statement() as connection:
            found = connection.execute(_WEBHOOK_STATE, {"id": self.id}).first()
        return self.follow(found)

    def follow(self, found):
        """Follow the webhook's row as read (url, active; None when it is gone); False when this run must stop."""
        if found is None or not found.active:
            return False
        if found.url != self.receiver.url:  # changed by a PATCH: the next attempt goes to the new URL
            self.receiver.close()
            self.receiver = Receiver(found.url, self.secret)
        return True

    def wait(self, seconds):
        """Sleep `seconds`, waking for a stop or the loss of the lease; True if the run goes on."""
        deadline = time.monotonic() + max(0.0, seconds)
        while (left := deadline - time.monotonic()) > 0:
            if self.deliverer.stopping.wait(min(left, 1.0)) or not self.deliverer.holding():
                return False
        return self.deliverer.holding()


class Deliverer(lease.LeaseHolder):
    """Holds the webhooks' lease; while it holds it, polls the log and runs a loop per webhook with entries
    to deliver (storage.lease.LeaseHolder)."""

    def __init__(self, app):
        super().__init__(app, LEASE, "webhook deliverer", app.config["IDENTITY_WEBHOOK_LEASE_SECONDS"],
                         app.config["IDENTITY_WEBHOOK_POLL_SECONDS"])

    def due(self):
        head = select(func.coalesce(func.max(Change.seq), 0)).scalar_subquery()
        with one_statement() as connection:
            return connection.execute(select(Webhook.id).where(Webhook.active, Webhook.position < head)).scalars().all()

    def work(self, webhook_id):
        """Run the webhook from its row as it is when the run starts, not as the poll read it: a run of
        it that ended since the poll has recorded a later position, from which this one goes on."""
        with one_statement() as connection:
            webhook = connection.execute(_WEBHOOK_TO_RUN, {"id": webhook_id}).first()
        if webhook is not None:
            WebhookRun(self, webhook).run()


def start(app):
    """Start the app's deliverer in this process, unless IDENTITY_WEBHOOKS_DELIVER is off; idempotent."""
    if not app.config["IDENTITY_WEBHOOKS_DELIVER"] or EXTENSION in app.extensions:
        return None
    app.extensions[EXTENSION] = deliverer = Deliverer(app).start()
    return deliverer


def stop(app, timeout=5.0):
    """Stop the app's deliverer, if it runs, and give its lease up."""
    deliverer = app.extensions.pop(EXTENSION, None)
    if deliverer is not None:
        deliverer.stop(timeout)
