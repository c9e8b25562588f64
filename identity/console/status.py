"""The status page: readiness (as /readyz decides it), the migration, the database's kind, the counts,
how far behind the feed each webhook is, and how far behind its upstream each mirror is."""

from ..core import overview
from ..data import mirrors
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
    )


def mirror_lag():
    """Each mirror as GET /mirrors/<id> shows it (its position, the upstream's head, lag_entries, lag_seconds,
    rejected, last_error...), oldest first."""
    return [mirrors.state(mirror) for mirror in mirrors.all_mirrors()]
