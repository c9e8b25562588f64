"""Every error leaves as RFC 9457 problem details; this module is the only place that shapes them."""

import logging
import re

import flask_smorest
from flask import current_app, json, request
from sqlalchemy.exc import InterfaceError, InternalError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from werkzeug.http import HTTP_STATUS_CODES

from ..core import errors
from ..core.errors import IdentityExists, IdentityNotFound, InvalidFields, flatten_messages
from ..schemas import ProblemSchema
from ..schemas.fields import IDENTITY_ID_PATTERN
from ..storage.faults import cause
from ..storage.readiness import NotReady
from .hooks import current_request_id

PROBLEM_MIMETYPE = "application/problem+json"
WELL_FORMED_IDENTITY_ID = re.compile(IDENTITY_ID_PATTERN)

log = logging.getLogger(__name__)


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
            extra["request_id"] = current_request_id()
            detail = "The service failed to handle this request. Quote the request_id when reporting it."
        elif status == 422:
            # The exception the Python API (identity.seed) raises, so that both say the same.
            invalid = InvalidFields(data.get("messages"))
            detail = invalid.detail
            extra.update(invalid.extra)
        elif status == 400 and data.get("messages"):
            # Query parameters: 400, naming each one (the body's fields are 422, above).
            errors = flatten_messages(data["messages"])
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


# The HTTP status of each refusal of the core (the first of an error's classes found here).
STATUSES = {
    errors.ReadOnlyKey: 403,
    errors.Forbidden: 403,
    errors.KeyNotFound: 404,
    errors.UserNotFound: 404,
    errors.IdentityNotFound: 404,
    errors.WebhookNotFound: 404,
    errors.SigninOff: 404,
    errors.SigninRefused: 401,
    errors.MirrorNotFound: 404,
    errors.MirrorConflict: 409,
    errors.KeyNotLive: 409,
    errors.IdentityExists: 409,
    errors.BeyondFeedEnd: 409,
    errors.IdentityRemoved: 410,
    errors.PreconditionFailed: 412,
    errors.InvalidFields: 422,
    errors.TooManyStreams: 429,
    errors.BeyondGrant: 403,
    errors.WalletChainUnavailable: 503,
    errors.InvalidParameters: 400,
    errors.ServiceError: 400,
}


def status_of(error):
    """The HTTP status that answers `error`, a ServiceError."""
    return next(STATUSES[kind] for kind in type(error).__mro__ if kind in STATUSES)


def handle_service_error(error):
    return problem(status_of(error), error.detail, **error.extra)


def handle_identity_not_found(error):
    identity_id = (request.view_args or {}).get("identity_id")
    detail = None
    if identity_id is not None:
        detail = malformed_identity_id_detail(identity_id, current_app.config["IDENTITY_DID_NAMESPACE"])
    return problem(404, detail or error.detail, **error.extra)


def handle_signin_refused(error):
    """401 needs a challenge (RFC 9110): the scheme this route answers, for the domain a message must name."""
    realm = current_app.config.get("IDENTITY_SIWE_DOMAIN") or ""
    return problem(401, error.detail, headers={"WWW-Authenticate": f'SIWE realm="{realm}"'}, **error.extra)


def handle_chain_unavailable(error):
    """503 with Retry-After: a contract wallet's chain not answering (WalletChainUnavailable)."""
    return problem(503, error.detail, headers={"Retry-After": str(error.retry_after)}, **error.extra)


def handle_not_ready(error):
    return problem(503, error.detail)


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
    app.register_error_handler(errors.ServiceError, handle_service_error)
    app.register_error_handler(NotReady, handle_not_ready)
    app.register_error_handler(IdentityExists, handle_identity_exists)
    app.register_error_handler(IdentityNotFound, handle_identity_not_found)
    app.register_error_handler(errors.SigninRefused, handle_signin_refused)
    app.register_error_handler(errors.WalletChainUnavailable, handle_chain_unavailable)
    # A lost connection, a locked or unreachable database: the request may be retried as it is.
    app.register_error_handler(OperationalError, handle_database_unavailable)
    app.register_error_handler(InterfaceError, handle_database_unavailable)
    app.register_error_handler(InternalError, handle_database_internal_error)
    # Every pooled connection stayed busy for IDENTITY_DB_POOL_TIMEOUT seconds: overloaded, not broken.
    app.register_error_handler(PoolTimeout, handle_database_unavailable)
