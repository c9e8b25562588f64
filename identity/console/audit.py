"""The audit log: who did what to the service, newest first, with the filters of GET /audit (actor, action,
target, since, until) and its cursor, through the same core function; each entry with its hash."""

from ..core import audit_log
from ..schemas import AuditListArgsSchema
from . import bp
from .pages import listing, render

LISTING = ("actor", "action", "target", "since", "until", "cursor")
_list_args = AuditListArgsSchema()


@bp.route("/audit")
def audit_page():
    """The audit log's entries, newest first."""
    shown = listing(LISTING, _list_args.load, audit_log.list_entries)
    return render("audit.html", 200 if shown["page"] else 400, **shown)
