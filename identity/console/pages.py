"""How console pages are made: every template gets the session (who is signed in, whether they may
change anything, the form token), and every error is a page that says what happened and what to do,
never a traceback; to the page's own script, which asks for JSON, the same as problem details (RFC 9457).
Jinja escapes every value it writes (autoescape, on for .html templates)."""

import logging

from flask import g, jsonify, redirect, render_template, request, url_for
from sqlalchemy.exc import InterfaceError, InternalError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from werkzeug.exceptions import HTTPException

from ..core import errors
from ..storage.faults import cause
from ..storage.readiness import NotReady, SchemaNotCurrent
from . import bp

log = logging.getLogger(__name__)

# The core's refusals that mean "no such thing": answered 404, as the API answers them.
NOT_FOUND = (errors.IdentityNotFound, errors.KeyNotFound, errors.WebhookNotFound, errors.MirrorNotFound,
             errors.UserNotFound, errors.SigninOff)
PROBLEM_MIMETYPE = "application/problem+json"


@bp.app_template_filter("moment")
def moment(value):
    """A timestamp as people read it, in UTC to the second: 2026-11-21 09:30:00 UTC."""
    return "" if value is None else value.strftime("%Y-%m-%d %H:%M:%S UTC")


@bp.app_template_filter("null")
def null(value):
    """A value as JSON writes it where it is absent: null, not Python's None."""
    return "null" if value is None else value


@bp.context_processor
def session_context():
    session = g.get("session")
    return {
        "session": session,
        "who": session.caller if session else None,
        "can_write": session is not None and session.caller.scope == "write",
        "csrf_token": session.csrf_token if session else None,
    }


def field_messages(messages):
    """A form's messages by field ({field: [message, ...]}, marshmallow's or InvalidParameters'), each field's
    as one line of text for the page."""
    return {name: " ".join(map(str, texts)) for name, texts in messages.items()}


def render(template, status=200, **context):
    """A console page from templates/console/`template`."""
    return render_template(f"console/{template}", **context), status


@bp.route("/")
def home():
    """The console opens on its identities."""
    return redirect(url_for("console.identities_page"))


@bp.route("/<path:unknown>", methods=["GET", "POST"])
def unknown_page(unknown):
    """Any other path under /admin, or a form posted where none is taken: a page, not the API's problem."""
    return error_page(404, "Not found", "There is no such page in the console: use the menu above.")


def error_page(status, title, detail, headers=None, **extra):
    """The error as a page; as problem details, with `extra` members (e.g. errors), to a request that prefers
    JSON to HTML (static/wallet.js asks so)."""
    if request.accept_mimetypes.best_match(("text/html", "application/json")) == "application/json":
        response = jsonify(type="about:blank", title=title, status=status, detail=detail, **extra)
        response.mimetype = PROBLEM_MIMETYPE
        return response, status, headers or {}
    body, status = render("error.html", status, code=status, title=title, detail=detail,
                          request_id=getattr(request, "request_id", None))
    return body, status, headers or {}


@bp.errorhandler(HTTPException)
def http_error(error):
    status = error.code or 500
    if status >= 500:
        detail = "The console failed to show this page. Quote the request id below when you report it."
    else:
        detail = error.description
    return error_page(status, error.name, detail)


@bp.errorhandler(errors.ServiceError)
def refused(error):
    status = 404 if isinstance(error, NOT_FOUND) else 400
    return error_page(status, "Not found" if status == 404 else "Refused", error.detail, **error.extra)


@bp.errorhandler(NotReady)
def not_ready(error):
    title = "The database needs a migration" if isinstance(error, SchemaNotCurrent) else "Not ready"
    return error_page(503, title, error.detail)


@bp.errorhandler(OperationalError)
@bp.errorhandler(InterfaceError)
@bp.errorhandler(PoolTimeout)
def database_unavailable(error):
    """Locked, unreachable, read-only, full: the operator reading the page is the one who can act on it."""
    reason = cause(error)
    log.warning("database unavailable: %s (%s)", reason, type(error).__name__)
    return error_page(503, "The database cannot serve this now",
                      f"The database could not serve this page ({reason}). Nothing was changed; try again in a "
                      "moment, and see the Status page.")


@bp.errorhandler(InternalError)
def database_refused(error):
    """A read-only PostgreSQL refuses writes with an InternalError (SQLSTATE 25006): unavailable, as above."""
    if cause(error).startswith("read-only"):
        return database_unavailable(error)
    raise error  # anything else is a failure of the service: the 500 page

