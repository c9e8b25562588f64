"""Backups on a schedule: IDENTITY_BACKUP_SCHEDULE, a cron expression in UTC (croniter).

One scheduler works at a time across every process and node: the holder of the lease "backups"
(identity.storage.lease). Serving processes each run one (identity.background; IDENTITY_BACKUPS_TAKE=0
keeps a node out), and `flask --app app backups schedule` runs one on its own. Each scheduled time is a
row of backup_runs, unique by its time: a time is taken once, whichever holder gets to it. A failed
attempt is tried again after a back-off that doubles (IDENTITY_BACKUP_RETRY_MIN_SECONDS up to _MAX), until
the next time comes. A time that passed while no scheduler ran (the service was down) is taken once when
one starts, unless a backup succeeded since that time. One backup runs at a time: when one outlasts a
period, the latest time that came meanwhile is taken after it. After a scheduled backup has uploaded and verified,
the scheduled backups beyond IDENTITY_BACKUP_KEEP are deleted; manual ones never are.
"""

import logging
from datetime import datetime

from croniter import croniter
from sqlalchemy import func, insert, or_, select, update
from sqlalchemy.exc import IntegrityError

from ...storage import lease
from ...storage.database import one_statement, write_transaction
from ...storage.models import BackupRun, utcnow
from . import archive, runs
from .store import StoreError

log = logging.getLogger(__name__)

LEASE = "backups"
EXTENSION = "identity_backup_scheduler"
RUNS = BackupRun.__table__

_LATEST = (
    select(RUNS.c.scheduled_for, RUNS.c.status, RUNS.c.holder, RUNS.c.next_attempt_at,
           select(func.max(RUNS.c.finished_at)).where(RUNS.c.status == "ok").scalar_subquery())
    .where(RUNS.c.kind == "scheduled").order_by(RUNS.c.scheduled_for.desc()).limit(1)
)
_LAST_GOOD = select(func.max(RUNS.c.finished_at)).where(RUNS.c.status == "ok")


def previous_time(schedule, now):
    """The latest scheduled time at or before `now`."""
    return croniter(schedule, now).get_prev(datetime)


class Scheduler(lease.LeaseHolder):
    """Holds the backups' lease; while it holds it, takes each scheduled time's backup once."""

    def __init__(self, app):
        config = app.config
        super().__init__(app, LEASE, "backup scheduler", config["IDENTITY_BACKUP_LEASE_SECONDS"],
                         config["IDENTITY_BACKUP_POLL_SECONDS"])
        self.schedule = config["IDENTITY_BACKUP_SCHEDULE"]
        self.started = utcnow()

    def wanted(self):
        return bool(self.schedule and self.app.config.get("IDENTITY_BACKUP_URL"))

    def due(self):
        if self.jobs:
            return []  # one backup at a time: a time that comes meanwhile is taken when this one ends
        now = utcnow()
        time = previous_time(self.schedule, now)
        with one_statement() as connection:
            latest = connection.execute(_LATEST).first()
            last_good = latest[4] if latest is not None else connection.execute(_LAST_GOOD).scalar()
        if latest is not None and latest.scheduled_for == time:
            if latest.status == "failed" and latest.next_attempt_at <= now:
                return [time.isoformat()]
            if latest.status == "running":
                return [time.isoformat()]  # its holder lost the lease or stopped: this one takes it over
            return []
        if time >= self.started or last_good is None or last_good <= time:
            return [time.isoformat()]
        return []

    def work(self, key):
        time = datetime.fromisoformat(key)
        run_id = self.claim(time)
        if run_id is None or not self.holding():
            return
        try:
            name, manifest = runs.take("scheduled", run_id, self.holder, time)
        except (archive.BackupFailed, StoreError, runs.NoTarget):
            return  # logged and recorded by runs.take, with the next attempt's time
        log.info("backups: %s taken for %s (%d bytes, verified)", name, key, manifest["size"])
        try:
            deleted = runs.keep_newest(self.app.config["IDENTITY_BACKUP_KEEP"])
        except StoreError as error:
            log.warning("backups: old scheduled backups not deleted: %s", error)
            return
        if deleted:
            log.info("backups: deleted %d scheduled backup(s) beyond IDENTITY_BACKUP_KEEP: %s", len(deleted),
                     ", ".join(deleted))

    def claim(self, time):
        """The row of the scheduled time `time`, taken by this holder; None when another has it or it is done."""
        now = utcnow()
        try:
            with write_transaction() as session:
                return session.execute(insert(RUNS).values(
                    kind="scheduled", scheduled_for=time, status="running", holder=self.holder, failures=0,
                    started_at=now,
                ).returning(RUNS.c.id)).scalar()
        except IntegrityError:
            pass
        with write_transaction() as session:
            claimed = session.execute(
                update(RUNS).where(
                    RUNS.c.scheduled_for == time,
                    or_((RUNS.c.status == "failed") & (RUNS.c.next_attempt_at <= now), RUNS.c.status == "running"),
                ).values(status="running", holder=self.holder, started_at=now).returning(RUNS.c.id)
            ).scalar()
        return claimed


def start(app):
    """Start the app's scheduler in this process when a schedule and a target are set, unless
    IDENTITY_BACKUPS_TAKE is off; idempotent."""
    config = app.config
    if not (config.get("IDENTITY_BACKUP_SCHEDULE") and config.get("IDENTITY_BACKUP_URL")):
        return None
    if not config.get("IDENTITY_BACKUPS_TAKE", True) or EXTENSION in app.extensions:
        return None
    app.extensions[EXTENSION] = scheduler = Scheduler(app).start()
    return scheduler


def stop(app, timeout=5.0):
    scheduler = app.extensions.pop(EXTENSION, None)
    if scheduler is not None:
        scheduler.stop(timeout)
