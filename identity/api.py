"""The HTTP API: one blueprint, declarative views."""

import json
from decimal import Decimal

import flask_smorest
from flask import current_app, request
from marshmallow import RAISE
from webargs.flaskparser import FlaskParser, abort
from werkzeug.routing import BaseConverter

from . import browse, curation, history, limits, metrics, readiness, service
from .auth import ADMIN_ONLY_DETAIL, CHALLENGE, UNAUTHORIZED_DETAIL, auth, current_caller
from .docs import CHANGE_EXAMPLE, CONTENT_EXAMPLE, CREATE_EXAMPLE, ETAG_EXAMPLE, IDENTITY_EXAMPLE, PATCH_EXAMPLE
from .errors import (
    PROBLEM_MIMETYPE,
    IdentityExists,
    IdentityNotFound,
    IdentityRemoved,
    PreconditionFailed,
    problem_body,
)
from .errors import problem as problem_response
from .fields import CONTENT_ID_PATTERN, IDENTITY_ID_PATTERN
from .headers import conditional
from .schemas import (
    IMMUTABLE,
    ChangeFeedArgsSchema,
    ChangeFeedSchema,
    ChangeListSchema,
    IdentityContentSchema,
    ProblemSchema,
    StatusSchema,
    identity_create_schema,
    identity_list_args_schema,
    identity_page_schema,
    identity_patch_schema,
    identity_schema,
)

JSON_MIMETYPES = frozenset({"application/json"})
# RFC 7396: a PATCH may say its body is a JSON merge patch, which for these flat objects is the same.
MERGE_PATCH = "application/merge-patch+json"
PATCH_MIMETYPES = JSON_MIMETYPES | {MERGE_PATCH}


def _refuse_constant(name):
    raise ValueError(f"{name} is not JSON")


def _parse_int(digits):
    # Python refuses to make an int of more than 4300 digits; such a number is still valid JSON
    # (of the wrong type for every field), so it must reach validation rather than fail parsing.
    return int(digits) if len(digits) <= 4000 else Decimal(digits)


class BodyParser(FlaskParser):
    """Bodies are JSON in UTF-8 under a JSON Content-Type, and nothing else.

    webargs' own JSON loading reads a body without a JSON type as absent, and an empty body too;
    here the first is a 415 and the second invalid JSON (400). NaN and Infinity are not JSON.
    """

    def load_json(self, req, schema):
        allowed = PATCH_MIMETYPES if req.method == "PATCH" else JSON_MIMETYPES
        if req.mimetype not in allowed:
            abort(415, message=f"The body must be sent as Content-Type: {' or '.join(sorted(allowed))}.")
        data = read_body(req)
        if not data and req.method == "PATCH":
            return {}  # a patch of nothing: refused as {} is, naming the body (422)
        try:
            return json.loads(data.decode("utf-8"), parse_constant=_refuse_constant, parse_int=_parse_int)
        except UnicodeDecodeError:
            abort(400, message="The body is not valid UTF-8.")
        except (ValueError, RecursionError):
            abort(400, message="The body is not valid JSON.")


def read_body(req):
    """The request's body, at most MAX_CONTENT_LENGTH bytes (413 past that), however it is framed.

    With a Content-Length, Werkzeug refuses a larger one before reading (413). A chunked body has
    none; Werkzeug would cut it at the limit, silently, so it is read here from the server's stream
    to one byte past the limit.
    """
    if req.content_length is not None or req.environ.get("HTTP_TRANSFER_ENCODING") is None:
        return req.get_data(cache=True)
    limit = req.max_content_length
    try:
        data = req.input_stream.read() if limit is None else req.input_stream.read(limit + 1)
    except Exception:  # noqa: BLE001 - whatever the server's chunk decoder raises: the framing is broken
        abort(400, message="The body's chunked transfer coding is malformed.")
    if limit is not None and len(data) > limit:
        abort(413, message=f"The body is larger than {limit} bytes.")
    return data


class Blueprint(flask_smorest.Blueprint):
    """flask-smorest's Blueprint with the body parser above, through its ARGUMENTS_PARSER attribute."""

    ARGUMENTS_PARSER = BodyParser()


def problem(status, description, example=None, **kwargs):
    """Document an error response of a view: problem details, as application/problem+json."""
    return blp.alt_response(
        status,
        schema=ProblemSchema,
        content_type=PROBLEM_MIMETYPE,
        description=description,
        example=example or problem_body(status, description),
        **kwargs,
    )


blp = Blueprint("identities", __name__, description="Fetch and create Identity records.")


class IdentityIdConverter(BaseConverter):
    """The identity id of /identities/<identity_id>: any segment but `search`, the listing's own path.

    Without it, PATCH /identities/search would reach the PATCH of an identity called "search" (and
    answer 415 or 404) where the contract wants 405 with Allow: GET, HEAD, OPTIONS.
    """

    regex = r"(?!search(?![^/]))[^/]+"


blp.record_once(lambda state: state.app.url_map.converters.setdefault("identity_id", IdentityIdConverter))

API_KEY = [{"ApiKeyAuth": []}]
IDENTITY_ID = {
    "in": "path",
    "name": "identity_id",
    "required": True,
    "description": "The identity_id: did:<namespace>:ipfs:<content_id>.",
    "schema": {"type": "string", "pattern": IDENTITY_ID_PATTERN},
    "example": IDENTITY_EXAMPLE["identity_id"],
}
UNAUTHORIZED = {
    "description": "Missing, unknown or revoked API key; the response does not say which.",
    "headers": {"WWW-Authenticate": {"schema": {"type": "string", "enum": [CHALLENGE]}}},
    "example": problem_body(401, UNAUTHORIZED_DETAIL),
}
NOT_FOUND = IdentityNotFound.DETAIL
GONE = {
    "description": "The identity is in status removed; identity_id names it.",
    "example": problem_body(410, IdentityRemoved.DETAIL, identity_id=IDENTITY_EXAMPLE["identity_id"]),
}
UNAVAILABLE = {
    "description": "The database does not answer; try again shortly.",
    "headers": {"Retry-After": {"schema": {"type": "string", "pattern": "^[0-9]+$"}}},
}
ETAG = {
    "description": "The content_id, quoted.",
    "schema": {"type": "string", "pattern": f'^"{CONTENT_ID_PATTERN}"$'},
    "example": ETAG_EXAMPLE,
}
LOCATION = {"schema": {"type": "string", "pattern": "^/identity/" + IDENTITY_ID_PATTERN[1:]}}
_STRING = {"schema": {"type": "string"}}
ETAG_HEADERS = {
    "ETag": {"description": "Strong tag of this exact body; send it back in If-None-Match.", **_STRING},
    "Cache-Control": {"description": "private", **_STRING},
}
TOO_MANY = "This key's budget for the route is spent; retry after Retry-After seconds."
RATELIMIT_HEADERS = {
    "Retry-After": {"description": "Seconds until the budget is renewed.", **_STRING},
    "X-RateLimit-Limit": {"description": "Requests allowed in the window.", **_STRING},
    "X-RateLimit-Remaining": {"description": "Requests left in the window.", **_STRING},
    "X-RateLimit-Reset": {"description": "When the window ends, in Unix seconds.", **_STRING},
}


@blp.route("/identity/<identity_id>", endpoint="get_identity", parameters=[IDENTITY_ID])
@blp.route("/identities/<identity_id:identity_id>", endpoint="get_identity_plural", parameters=[IDENTITY_ID])
@auth.login_required
@limits.reads
@conditional
@blp.doc(security=API_KEY)
@blp.response(200, identity_schema, example=IDENTITY_EXAMPLE, headers=ETAG_HEADERS)
@blp.alt_response(304, description="If-None-Match named the current ETag; no body.", headers=ETAG_HEADERS)
@problem(401, **UNAUTHORIZED)
@problem(404, NOT_FOUND)
@problem(410, **GONE)
@problem(429, TOO_MANY, headers=RATELIMIT_HEADERS)
@problem(503, **UNAVAILABLE)
def get_identity(identity_id):
    """Fetch an Identity by its identity_id."""
    return _identity_or_404(identity_id)


@blp.route("/identity/<identity_id>/content", endpoint="get_identity_content", parameters=[IDENTITY_ID])
@blp.route("/identities/<identity_id>/content", endpoint="get_identity_content_plural", parameters=[IDENTITY_ID])
@auth.login_required
@limits.reads
@conditional
@blp.doc(security=API_KEY)
@blp.response(
    200,
    IdentityContentSchema,
    description="The canonical bytes (RFC 8785) that the content_id is the CID of: "
    "their CIDv1 (raw, sha2-256, base32) is the content_id, and `ipfs add --cid-version 1` gives the same.",
    example=CONTENT_EXAMPLE,
    headers={"ETag": ETAG, "Cache-Control": ETAG_HEADERS["Cache-Control"]},
)
@blp.alt_response(304, description="If-None-Match named the content_id; no body.", headers={"ETag": ETAG})
@problem(401, **UNAUTHORIZED)
@problem(404, NOT_FOUND)
@problem(410, **GONE)
@problem(429, TOO_MANY, headers=RATELIMIT_HEADERS)
@problem(503, **UNAVAILABLE)
def get_identity_content(identity_id):
    """Fetch an Identity's content, byte for byte as its content_id hashes it."""
    identity = _identity_or_404(identity_id)
    return current_app.response_class(
        service.canonical_content(identity), mimetype="application/json", headers={"ETag": f'"{identity["content_id"]}"'}
    )


def _identity_or_404(identity_id):
    identity = service.get_identity(identity_id)
    if identity is None:
        raise IdentityNotFound()
    if identity["status"] == "removed":
        raise IdentityRemoved(identity_id)
    return identity


@blp.route("/identity", methods=["POST"], endpoint="create_identity")
@blp.route("/identities", methods=["POST"], endpoint="create_identity_plural")
@auth.login_required
@limits.creates
@blp.doc(security=API_KEY)
@blp.arguments(identity_create_schema, example=CREATE_EXAMPLE)
@blp.response(201, identity_schema, example=IDENTITY_EXAMPLE, headers={"Location": LOCATION})
@problem(400, "The body is not valid JSON or not UTF-8.")
@problem(401, **UNAUTHORIZED)
@problem(403, "A User key named another creator.")
@problem(
    409,
    "The same content exists; identity_id names it and Location points at it.",
    example=problem_body(409, IdentityExists.DETAIL, identity_id=IDENTITY_EXAMPLE["identity_id"]),
    headers={"Location": LOCATION},
)
@problem(413, "The body is larger than the limit (64 KiB by default).")
@problem(415, "The body is not sent as application/json.")
@problem(
    422,
    "Invalid or unknown fields, or a body that is not an object; errors names each field.",
    example=problem_body(
        422, "Invalid fields: display_name, nickname.",
        errors={"display_name": ["Length must be between 1 and 256."], "nickname": ["Unknown field."]},
    ),
)
@problem(429, TOO_MANY, headers=RATELIMIT_HEADERS)
@problem(503, **UNAVAILABLE)
def create_identity(fields):
    """Create an off-chain Identity."""
    identity = service.create_identity(fields, current_caller())
    metrics.count_identity_created()
    return identity, 201, {"Location": f"/identity/{identity['identity_id']}"}


@blp.route("/identity/<identity_id>", methods=["PATCH"], endpoint="patch_identity", parameters=[IDENTITY_ID])
@blp.route(
    "/identities/<identity_id:identity_id>", methods=["PATCH"], endpoint="patch_identity_plural",
    parameters=[IDENTITY_ID],
)
@auth.login_required(role="Admin")
@limits.creates
@conditional
@blp.doc(security=API_KEY)
@blp.doc(requestBody={"content": {MERGE_PATCH: {"schema": identity_patch_schema, "example": PATCH_EXAMPLE}}})
@blp.arguments(identity_patch_schema, example=PATCH_EXAMPLE)
@blp.response(200, identity_schema, example=IDENTITY_EXAMPLE, headers=ETAG_HEADERS)
@problem(400, "The body is not valid JSON or not UTF-8.")
@problem(401, **UNAUTHORIZED)
@problem(403, ADMIN_ONLY_DETAIL)
@problem(404, NOT_FOUND)
@problem(412, PreconditionFailed.DETAIL)
@problem(413, "The body is larger than the limit (64 KiB by default).")
@problem(415, "The body is not sent as application/json or application/merge-patch+json.")
@problem(
    422,
    "A content field, an unknown field, an invalid value, or nothing to change; errors names each.",
    example=problem_body(422, "Invalid fields: display_name.", errors={"display_name": [IMMUTABLE]}),
)
@problem(429, TOO_MANY, headers=RATELIMIT_HEADERS)
@problem(503, **UNAVAILABLE)
def patch_identity(changes, identity_id):
    """Curate an Identity: its status and on-chain figures (Admin keys only; If-Match makes it conditional)."""
    caller = current_caller()
    return curation.update_identity(identity_id, changes, caller.wallet, if_match=request.if_match)


@blp.route("/identity/<identity_id>/changes", endpoint="identity_changes", parameters=[IDENTITY_ID])
@blp.route("/identities/<identity_id>/changes", endpoint="identity_changes_plural", parameters=[IDENTITY_ID])
@auth.login_required
@limits.reads
@blp.doc(security=API_KEY)
@blp.response(200, ChangeListSchema, example={"data": [CHANGE_EXAMPLE]})
@problem(401, **UNAUTHORIZED)
@problem(404, NOT_FOUND)
@problem(429, TOO_MANY, headers=RATELIMIT_HEADERS)
@problem(503, **UNAVAILABLE)
def identity_changes(identity_id):
    """An Identity's change history, oldest first."""
    entries = history.changes_of(identity_id, full=current_caller().role == "Admin")
    if entries is None:
        raise IdentityNotFound()
    return {"data": entries}


@blp.route("/changes", endpoint="change_feed")
@auth.login_required
@limits.reads
@blp.doc(security=API_KEY)
@blp.arguments(ChangeFeedArgsSchema, location="query", unknown=RAISE, error_status_code=400)
@blp.response(200, ChangeFeedSchema, example={"data": [CHANGE_EXAMPLE], "next_after": CHANGE_EXAMPLE["seq"]})
@problem(
    400,
    "An unknown or invalid query parameter; errors names each.",
    example=problem_body(400, "Invalid query parameters: limit.", errors={"limit": ["Must be between 1 and 1000."]}),
)
@problem(401, **UNAUTHORIZED)
@problem(429, TOO_MANY, headers=RATELIMIT_HEADERS)
@problem(503, **UNAVAILABLE)
def change_feed(args):
    """Every Identity's changes after a sequence number, in order: poll with the last next_after."""
    return history.feed(args["after"], args["limit"], full=current_caller().role == "Admin")


@blp.route("/healthz")
@blp.response(200, StatusSchema, example={"status": "ok"})
def healthz():
    """The process is alive."""
    return {"status": "ok"}


@blp.route("/readyz")
@blp.response(200, StatusSchema, example={"status": "ok"})
@problem(503, **UNAVAILABLE)
def readyz():
    """The database answers, its schema is at the latest migration, and it can take writes; else 503 saying why."""
    try:
        readiness.check()
    except readiness.NotReady as not_ready:
        return problem_response(503, not_ready.detail, headers={"Retry-After": "5"})
    return {"status": "ok"}


LIST_EXAMPLE = {"page": 1, "limit": 20, "total": 1, "data": [IDENTITY_EXAMPLE], "next": None}


@blp.route("/identities", endpoint="list_identities")
@blp.route("/identities/search", endpoint="search_identities")
@auth.login_required
@limits.reads
@blp.doc(security=API_KEY)
@blp.arguments(identity_list_args_schema, location="query", error_status_code=400, unknown=RAISE)
@blp.response(200, identity_page_schema, example=LIST_EXAMPLE)
@problem(
    400,
    "An unknown parameter, an invalid value, or a cursor this service did not issue; errors names each parameter.",
    example=problem_body(400, "Invalid query parameters: limit.", errors={"limit": ["Must be between 1 and 100."]}),
)
@problem(401, **UNAUTHORIZED)
@problem(403, "Removed identities are listed only to an Admin key.")
@problem(429, TOO_MANY, headers=RATELIMIT_HEADERS)
@problem(503, **UNAVAILABLE)
def list_identities(args):
    """List and search Identities: filtered, sorted, paginated (see the parameters); newest first by default."""
    return browse.list_identities(args, current_caller())
