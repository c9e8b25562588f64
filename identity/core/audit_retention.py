"""The audit log's retention: entries older than IDENTITY_AUDIT_RETENTION_DAYS (0 keeps all) are deleted, oldest
first, in batches, by one process at a time (the lease "audit-prune"), when a server starts and hourly after;
or at once by `flask --app app audit prune`.

The chain stays verifiable from the oldest entry kept: each batch moves the chain's start (identity.storage.audit)
to the last entry it deletes, whose hash the oldest kept entry holds as its prev_hash, in the batch's own
transaction and under the chain's lock, so appends wait for a batch and never see half of one.
"""

import logging
import time
from datetime import timedelta

from flask import current_app
from sqlalchemy import delete, select, update

from ..storage.database import write_transaction
from ..storage.lease import LeaseHolder
from ..storage.models import utcnow
from . import audit

ENTRIES, CHAIN = audit.ENTRIES, audit.CHAIN
BATCH = 1_000
LEASE = "audit-prune"
EVERY_SECONDS = 3600
log = logging.getLogger(__name__)


def prune(days=None, batch=BATCH, holding=lambda: True):
    """Delete the entries older than `days` (default IDENTITY_AUDIT_RETENTION_DAYS; 0 deletes none), oldest
    first, `batch` a transaction, while `holding()`; returns how many were deleted. A run that deleted some
    leaves an entry of its own (audit.prune), in its last batch's transaction."""
    days = current_app.config["IDENTITY_AUDIT_RETENTION_DAYS"] if days is None else days
    if days <= 0:
        return 0
    cutoff = utcnow() - timedelta(days=days)
    removed = 0
    while holding():
        with write_transaction() as session:
            chain = session.execute(select(CHAIN).where(CHAIN.c.id == audit.CHAIN_ID).with_for_update()).first()
            if chain is None:
                break
            rows = session.execute(
                select(ENTRIES.c.seq, ENTRIES.c.at, ENTRIES.c.hash)
                .where(ENTRIES.c.seq > chain.start_seq).order_by(ENTRIES.c.seq).limit(batch)
            ).all()
            old = []
            for row in rows:
                if row.at >= cutoff:
                    break
                old.append(row)
            if not old:
                break
            last = old[-1]
            session.execute(delete(ENTRIES).where(ENTRIES.c.seq <= last.seq))
            session.execute(update(CHAIN).where(CHAIN.c.id == audit.CHAIN_ID).values(
                start_seq=last.seq, start_hash=last.hash))
            removed += len(old)
            done = len(old) < batch
            if done:
                audit.record("audit.prune", "audit", None, session=session, after={
                    "removed": removed, "start_seq": last.seq, "retention_days": days})
        if done:
            break
    if removed:
        log.info("audit log: %d entries older than %d days pruned", removed, days, extra={"pruned": removed})
    return removed


class Pruner(LeaseHolder):
    """Prunes the audit log hourly, in one process at a time across processes and nodes (the lease)."""

    def __init__(self, app):
        super().__init__(app, LEASE, "audit pruner", ttl=60.0, interval=10.0)
        self.next_at = 0.0  # time.monotonic() of the next run: at once when this process takes the lease

    def wanted(self):
        return self.app.config["IDENTITY_AUDIT_RETENTION_DAYS"] > 0

    def due(self):
        return ["prune"] if time.monotonic() >= self.next_at else []

    def work(self, job_id):
        prune(holding=self.holding)
        self.next_at = time.monotonic() + EVERY_SECONDS


_PRUNER = "identity_audit_pruner"


def start(app):
    """Start the pruner of a serving process (identity.background)."""
    if app.config["IDENTITY_AUDIT_RETENTION_DAYS"] > 0 and _PRUNER not in app.extensions:
        app.extensions[_PRUNER] = Pruner(app).start()


def stop(app, timeout=2.0):
    pruner = app.extensions.pop(_PRUNER, None)
    if pruner is not None:
        pruner.stop(timeout)
