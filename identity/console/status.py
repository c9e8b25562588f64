"""The status page: readiness (as /readyz decides it), the migration, the database's kind, the counts,
how far behind the feed each webhook is, how far behind its upstream each mirror is, and the backups: the
last good one, its size and the last error."""

from flask import current_app

from ..core import overview
from ..data import mirrors
from ..data.backups import records
from ..feed import webhooks
from ..schemas import STATUSES
from ..storage import readiness
from . import bp
from .pages import render


@bp.route("/status")
def status_page():
    """What an operator checks first."""
    try:
        readiness.check()
        not_ready = None
    except readiness.NotReady as refusal:
        not_ready = refusal.detail
    current, latest = readiness.revisions()
    return render(
        "status.html",
        not_ready=not_ready,
        current=sorted(current),
        latest=sorted(latest),
        database=overview.database_kind(),
        figures=overview.figures(),
        statuses=STATUSES,
        webhooks=[(webhook, *webhooks.backlog(webhook)) for webhook in webhooks.all_webhooks()],
        mirrors=mirror_lag(),
        backups=backup_state(),
    )


def backup_state():
    """The target (no secret is in it), the schedule, the last good backup, the last failure and the count."""
    config = current_app.config
    good, failing, failures = records.last_state()
    return {"target": config.get("IDENTITY_BACKUP_URL"), "schedule": config.get("IDENTITY_BACKUP_SCHEDULE"),
            "good": good, "failing": failing, "failures": failures}


def mirror_lag():
    """Each mirror as GET /mirrors/<id> shows it (its position, the upstream's head, lag_entries, lag_seconds,
    rejected, last_error...), oldest first."""
    return [mirrors.state(mirror) for mirror in mirrors.all_mirrors()]
