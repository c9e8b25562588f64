"""The audit log: who did what to the service, newest first, with the filters of GET /audit (actor, action,
target, since, until) and its cursor, through the same core function; each entry with its hash."""

from flask import request
from marshmallow import ValidationError

from ..core import audit_log
from ..core.errors import InvalidParameters
from ..schemas import AuditListArgsSchema
from . import bp
from .pages import field_messages, render

LISTING = ("actor", "action", "target", "since", "until", "cursor")
_list_args = AuditListArgsSchema()


@bp.route("/audit")
def audit_page():
    """The audit log's entries, newest first."""
    asked = {name: value for name in LISTING if (value := request.args.get(name, "").strip())}
    page, errors = None, {}
    try:
        page = audit_log.list_entries(_list_args.load(asked))
    except ValidationError as invalid:
        errors = field_messages(invalid.normalized_messages())
    except InvalidParameters as invalid:
        errors = field_messages(invalid.errors)
    filters = {name: value for name, value in asked.items() if name != "cursor"}
    return render("audit.html", 200 if page else 400, page=page, asked=asked, filters=filters, errors=errors)
