"""Every error leaves as RFC 9457 problem details; this module is the only place that shapes them."""

import logging
import re

import flask_smorest
from flask import current_app, json, request
from sqlalchemy.exc import InterfaceError, InternalError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from werkzeug.http import HTTP_STATUS_CODES

from . import request_id
from .faults import cause
from .fields import IDENTITY_ID_PATTERN
from .schemas import ProblemSchema

PROBLEM_MIMETYPE = "application/problem+json"
WELL_FORMED_IDENTITY_ID = re.compile(IDENTITY_ID_PATTERN)

log = logging.getLogger(__name__)


class ServiceError(Exception):
    """A refusal of the service's own rules, independent of HTTP plumbing."""

    status = 400

    def __init__(self, detail, **extra):
        super().__init__(detail)
        self.detail = detail
        self.extra = extra


class Forbidden(ServiceError):
    status = 403


class ReadOnlyKey(Forbidden):
    """A key of scope `read` asked to change something."""

    DETAIL = (
        "This API key is read-only (scope read): it may read, and revoke itself with DELETE /me/key, "
        "but not change anything. Send a key of scope write; an Admin issues one with POST /keys."
    )

    def __init__(self):
        super().__init__(self.DETAIL)


class KeyNotFound(ServiceError):
    status = 404
    DETAIL = "No API key has this id; GET /keys lists them."

    def __init__(self):
        super().__init__(self.DETAIL)


class UserNotFound(ServiceError):
    status = 404
    DETAIL = "No user has this wallet: a wallet becomes a user when it is issued a key or creates an identity."

    def __init__(self):
        super().__init__(self.DETAIL)


class KeyNotLive(ServiceError):
    """Only a live key, not rotated out already, can be rotated."""

    status = 409


class IdentityExists(ServiceError):
    """The content exists already; `identity_id` names the identity that holds it."""

    status = 409
    DETAIL = "An identity with this content already exists."

    def __init__(self, identity_id):
        super().__init__(self.DETAIL, identity_id=identity_id)
        self.identity_id = identity_id


class IdentityNotFound(ServiceError):
    status = 404
    DETAIL = "No Identity exists for the provided id."

    def __init__(self):
        super().__init__(self.DETAIL)


def malformed_identity_id_detail(identity_id, namespace):
    """What a 404 says when the id could never name an identity on this service (None when it could):
    a UUID (the `id` field), a bare content_id or another namespace's DID is told what an identity_id is."""
    if WELL_FORMED_IDENTITY_ID.match(identity_id) and identity_id.startswith(f"did:{namespace}:ipfs:"):
        return None
    return (
        f"Not an identity_id of this service: an identity_id looks like did:{namespace}:ipfs:<content_id>, "
        "the content_id being a CIDv1 of 59 characters starting bafkrei (the identity_id field of an Identity, "
        "not its id)."
    )


class IdentityRemoved(ServiceError):
    """The identity is in status `removed`: its record stays, but it is not served."""

    status = 410
    DETAIL = "This identity was removed by an administrator."

    def __init__(self, identity_id):
        super().__init__(self.DETAIL, identity_id=identity_id)
        self.identity_id = identity_id


class WebhookNotFound(ServiceError):
    status = 404
    DETAIL = "No webhook exists with this id; GET /webhooks lists them."

    def __init__(self):
        super().__init__(self.DETAIL)


class PreconditionFailed(ServiceError):
    """If-Match named another representation than the current one: nothing was changed."""

    status = 412
    DETAIL = "If-Match does not name the identity's current ETag; nothing was changed. Fetch it again."

    def __init__(self):
        super().__init__(self.DETAIL)


class TooManyStreams(ServiceError):
    """The key holds as many streams and long polls of the change feed as IDENTITY_MAX_STREAMS_PER_KEY allows."""

    status = 429

    def __init__(self, cap):
        super().__init__(
            f"This API key holds {cap} open streams and long polls of the change feed already, the most "
            "IDENTITY_MAX_STREAMS_PER_KEY allows. Close one first, or follow the feed with another key."
        )


class InvalidFields(ServiceError):
    """Validation refused the body; `errors` maps each field to its messages, as a 422 body does."""

    status = 422

    def __init__(self, messages):
        errors = _flatten_messages(messages)
        named = sorted(field for field in errors if field != "_schema")
        detail = "The body must be a JSON object." if "_schema" in errors else ""
        if named:
            detail = (detail + " Invalid fields: " + ", ".join(named) + ".").strip()
        super().__init__(detail, errors=errors)
        self.errors = errors


class InvalidParameters(ServiceError):
    """Query parameters refused: unknown ones, or out-of-range values; `errors` maps each to its messages."""

    status = 400

    def __init__(self, messages):
        errors = _flatten_messages(messages)
        detail = "Invalid query parameters: " + ", ".join(sorted(errors)) + "."
        super().__init__(detail, errors=errors)
        self.errors = errors


def problem_body(status, detail=None, **extra):
    """The problem details of an error response."""
    title = HTTP_STATUS_CODES.get(status, "Error")
    return {"type": "about:blank", "title": title, "status": status, "detail": detail or title, **extra}


def problem(status, detail=None, headers=None, **extra):
    """Build a problem+json response."""
    response = current_app.response_class(
        json.dumps(problem_body(status, detail, **extra)), status=status, mimetype=PROBLEM_MIMETYPE
    )
    if headers:
        response.headers.extend(headers)
    return response


def _flatten_messages(messages):
    """webargs nests messages under the location ({"json": {...}}); clients want field -> list."""
    if not isinstance(messages, dict):
        return {"_schema": [str(messages)]}
    if set(messages) <= {"json", "view_args", "query", "headers"}:
        merged = {}
        for value in messages.values():
            merged.update(_flatten_messages(value))
        return merged
    flat = {}
    for field, value in (messages or {}).items():
        if isinstance(value, dict):
            flat[field] = [m for msgs in _flatten_messages(value).values() for m in msgs]
        elif isinstance(value, list):
            flat[field] = [str(m) for m in value]
        else:
            flat[field] = [str(value)]
    return flat


# A method a newcomer tries on a path that has others: the 405 says where that method goes.
WRONG_METHOD_HINTS = {
    ("GET", "/identity"): "GET /identity lists nothing: list identities with GET /identities, fetch one with "
    "GET /identity/<identity_id>; POST /identity creates one.",
}


class ProblemApi(flask_smorest.Api):
    """flask-smorest's Api, answering every HTTP error as problem details, and documenting them so.

    Through its documented hooks: ERROR_SCHEMA documents the error body, DEFAULT_ERROR_RESPONSE_NAME
    names the response every operation gets as "default" (registered by register_default_problem),
    and handle_http_exception shapes the body.
    """

    ERROR_SCHEMA = ProblemSchema
    DEFAULT_ERROR_RESPONSE_NAME = "PROBLEM"

    def register_default_problem(self):
        """The "default" response of every operation: an unknown path (404), a wrong method (405), a failure (500)."""
        self.spec.components.response(
            self.DEFAULT_ERROR_RESPONSE_NAME,
            {
                "description": "Any other error: 404 unknown path, 405 wrong method (with Allow), 500.",
                "content": {PROBLEM_MIMETYPE: {"schema": ProblemSchema}},
            },
        )

    def handle_http_exception(self, error):
        status = error.code or 500
        headers = [(k, v) for k, v in error.get_headers() if k.lower() != "content-type"]
        data = getattr(error, "data", None) or {}
        headers.extend((data.get("headers") or {}).items())
        extra = {}
        detail = error.description
        if status >= 500:
            extra["request_id"] = request_id.current_request_id()
            detail = "The service failed to handle this request. Quote the request_id when reporting it."
        elif status == 422:
            # The exception the Python API (identity.seed) raises, so that both say the same.
            invalid = InvalidFields(data.get("messages"))
            detail = invalid.detail
            extra.update(invalid.extra)
        elif status == 400 and data.get("messages"):
            # Query parameters: 400, naming each one (the body's fields are 422, above).
            errors = _flatten_messages(data["messages"])
            detail = "Invalid query parameters: " + ", ".join(sorted(errors)) + "."
            extra["errors"] = errors
        elif data.get("message"):
            detail = data["message"]
        elif status == 413:
            detail = (
                f"The body is larger than this service's limit of {current_app.config['MAX_CONTENT_LENGTH']} bytes "
                "(IDENTITY_MAX_BODY_BYTES); send a smaller one."
            )
        elif status == 405 and (request.method, request.path.rstrip("/")) in WRONG_METHOD_HINTS:
            detail = WRONG_METHOD_HINTS[request.method, request.path.rstrip("/")]
        return problem(status, detail, headers, **extra)


def handle_service_error(error):
    return problem(error.status, error.detail, **error.extra)


def handle_identity_not_found(error):
    identity_id = (request.view_args or {}).get("identity_id")
    detail = None
    if identity_id is not None:
        detail = malformed_identity_id_detail(identity_id, current_app.config["IDENTITY_DID_NAMESPACE"])
    return problem(404, detail or error.detail, **error.extra)


def handle_identity_exists(error):
    return problem(
        409, error.detail, headers={"Location": f"/identity/{error.identity_id}"}, identity_id=error.identity_id
    )


def handle_database_unavailable(error):
    log.warning("database unavailable: %s (%s)", cause(error), type(error).__name__)
    return problem(503, "The database does not answer; try again shortly.", headers={"Retry-After": "1"})


def handle_database_internal_error(error):
    """A read-only PostgreSQL (a standby, default_transaction_read_only) refuses writes with SQLSTATE 25006,
    which SQLAlchemy files under InternalError: unavailable for writes, as a read-only SQLite is."""
    if getattr(error.orig, "sqlstate", None) == "25006":
        return handle_database_unavailable(error)
    raise error  # anything else is a failure of the service: Flask answers it as a 500


def register_error_handlers(app):
    app.register_error_handler(ServiceError, handle_service_error)
    app.register_error_handler(IdentityExists, handle_identity_exists)
    app.register_error_handler(IdentityNotFound, handle_identity_not_found)
    # A lost connection, a locked or unreachable database: the request may be retried as it is.
    app.register_error_handler(OperationalError, handle_database_unavailable)
    app.register_error_handler(InterfaceError, handle_database_unavailable)
    app.register_error_handler(InternalError, handle_database_internal_error)
    # Every pooled connection stayed busy for IDENTITY_DB_POOL_TIMEOUT seconds: overloaded, not broken.
    app.register_error_handler(PoolTimeout, handle_database_unavailable)
