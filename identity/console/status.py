"""The status page: readiness (as /readyz decides it), the migration, the database's kind, the counts,
and how far behind the feed each webhook (and, once mirroring exists, each mirror) is."""

from ..core import overview
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
    """The mirrors' lag, for the page's Mirrors section: [(name, lag_entries, lag_seconds)].

    The place the mirroring feature fills (GET /mirrors/<id> gives lag_entries and lag_seconds); until
    the service mirrors, None, and the section says so.
    """
    return None
