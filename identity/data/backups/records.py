"""What the backups' runs recorded (backup_runs), read without the store's client: every serving process reads it
for the Status page and /metrics, and the S3 client (boto3, through identity.data.backups.store) is loaded only
where a backup is taken or read, after gevent has patched the worker."""

from sqlalchemy import func, select

from ...storage.database import db
from ...storage.models import BackupRun


def last_state():
    """For the Status page and /metrics: (the last good run or None, the last failed attempt's row or None, the
    failed attempts counted)."""
    good = db.session.execute(select(BackupRun).where(BackupRun.status == "ok")
                              .order_by(BackupRun.finished_at.desc()).limit(1)).scalar()
    failing = db.session.execute(select(BackupRun).where(BackupRun.last_error.is_not(None))
                                 .order_by(BackupRun.id.desc()).limit(1)).scalar()
    failures = db.session.execute(select(func.coalesce(func.sum(BackupRun.failures), 0))).scalar()
    return good, failing, int(failures)
