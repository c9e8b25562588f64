"""The HTTP API: one blueprint, declarative views."""

from decimal import Decimal
from functools import wraps

from flask import current_app, json
from flask_smorest import Blueprint
from flask_smorest.utils import resolve_schema_instance, set_status_and_headers_in_response, unpack_tuple_response
from marshmallow import RAISE
from sqlalchemy import text
from webargs.flaskparser import FlaskParser, abort
from werkzeug import Response

from . import browse, limits, metrics, service
from .auth import CHALLENGE, UNAUTHORIZED_DETAIL, auth, current_caller
from .docs import CONTENT_EXAMPLE, CREATE_EXAMPLE, ETAG_EXAMPLE, IDENTITY_EXAMPLE
from .errors import PROBLEM_MIMETYPE, IdentityExists, problem_body
from .extensions import db
from .headers import conditional
from .schemas import (
    CONTENT_ID_PATTERN,
    IDENTITY_ID_PATTERN,
    IdentityContentSchema,
    ProblemSchema,
    StatusSchema,
    identity_create_schema,
    identity_list_args_schema,
    identity_page_schema,
    identity_schema,
)


def _refuse_constant(name):
    raise ValueError(f"{name} is not JSON")


def _parse_int(digits):
    # Python refuses to make an int of more than 4300 digits; such a number is still valid JSON
    # (of the wrong type for every field), so it must reach validation rather than fail parsing.
    return int(digits) if len(digits) <= 4000 else Decimal(digits)


class StrictJSONParser(FlaskParser):
    """Bodies are JSON objects in UTF-8 under Content-Type application/json, and nothing else."""

    def _raw_load_json(self, req):
        if req.mimetype != "application/json":
            abort(415, message="The body must be sent as Content-Type: application/json.")
        data = req.get_data(cache=True)  # Werkzeug enforces MAX_CONTENT_LENGTH here (413)
        try:
            return json.loads(data.decode("utf-8"), parse_constant=_refuse_constant, parse_int=_parse_int)
        except UnicodeDecodeError:
            abort(400, message="The body is not valid UTF-8.")
        except (ValueError, RecursionError):
            abort(400, message="The body is not valid JSON.")

    def load_json(self, req, schema):
        # The base class turns an empty body into "missing"; an empty body is invalid JSON here.
        return self._raw_load_json(req)


def _documentation_only(decorate):
    """flask-smorest's decorator `decorate`, keeping the documentation it records but not its wrapper.

    `doc` and `alt_response` wrap a view in a function that only calls it, to carry the `_apidoc`
    they record; a route with six of them paid six calls on every request for the OpenAPI document.
    The documentation moves onto the view itself, where flask-smorest reads it all the same.
    """

    def decorator(view):
        view._apidoc = decorate(view)._apidoc
        return view

    return decorator


class IdentityBlueprint(Blueprint):
    ARGUMENTS_PARSER = StrictJSONParser()

    def doc(self, **kwargs):
        return _documentation_only(super().doc(**kwargs))

    def alt_response(self, status_code, **kwargs):
        return _documentation_only(super().alt_response(status_code, **kwargs))

    def response(self, status_code, schema=None, **kwargs):
        """flask-smorest's `response`: its documentation, and at run time what its wrapper does here.

        That wrapper also asks ensure_sync about the view and keeps each dumped result in the app
        context for flask-smorest's ETag feature, on every request; the views here are plain
        functions, and ETags come from headers.conditional.
        """
        documented = super().response(status_code, schema, **kwargs)
        schema = resolve_schema_instance(schema)  # None stays None
        prepare = self._prepare_response_content

        def decorator(view):
            @wraps(view)
            def respond(*args, **kwargs):
                result, status, headers = unpack_tuple_response(view(*args, **kwargs))
                if isinstance(result, Response):
                    set_status_and_headers_in_response(result, status, headers)
                    return result
                body = prepare(result if schema is None else schema.dump(result))
                response = current_app._get_current_object().json.response(body)
                set_status_and_headers_in_response(response, status, headers)
                if status is None:
                    response.status_code = status_code
                return response

            respond._apidoc = documented(view)._apidoc
            return respond

        return decorator

    def problem(self, status, description, example=None, **kwargs):
        """Document an error response: problem details, as application/problem+json."""
        return self.alt_response(
            status,
            schema=ProblemSchema,
            content_type=PROBLEM_MIMETYPE,
            description=description,
            example=example or problem_body(status, description),
            **kwargs,
        )


blp = IdentityBlueprint("identities", __name__, description="Fetch and create Identity records.")

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
NOT_FOUND = "No Identity exists for the provided id."
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
@blp.route("/identities/<identity_id>", endpoint="get_identity_plural", parameters=[IDENTITY_ID])
@auth.login_required
@limits.reads
@conditional
@blp.doc(security=API_KEY)
@blp.response(200, identity_schema, example=IDENTITY_EXAMPLE, headers=ETAG_HEADERS)
@blp.alt_response(304, description="If-None-Match named the current ETag; no body.", headers=ETAG_HEADERS)
@blp.problem(401, **UNAUTHORIZED)
@blp.problem(404, NOT_FOUND)
@blp.problem(429, TOO_MANY, headers=RATELIMIT_HEADERS)
@blp.problem(503, **UNAVAILABLE)
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
@blp.problem(401, **UNAUTHORIZED)
@blp.problem(404, NOT_FOUND)
@blp.problem(429, TOO_MANY, headers=RATELIMIT_HEADERS)
@blp.problem(503, **UNAVAILABLE)
def get_identity_content(identity_id):
    """Fetch an Identity's content, byte for byte as its content_id hashes it."""
    identity = _identity_or_404(identity_id)
    return current_app.response_class(
        service.canonical_content(identity), mimetype="application/json", headers={"ETag": f'"{identity.content_id}"'}
    )


def _identity_or_404(identity_id):
    # Read as text: a response writes the timestamps and amounts as text, and needs no datetimes.
    identity = service.get_identity(identity_id, as_text=True)
    if identity is None:
        abort(404, message=NOT_FOUND)
    return identity


@blp.route("/identity", methods=["POST"], endpoint="create_identity")
@blp.route("/identities", methods=["POST"], endpoint="create_identity_plural")
@auth.login_required
@limits.creates
@blp.doc(security=API_KEY)
@blp.arguments(identity_create_schema, example=CREATE_EXAMPLE)
@blp.response(201, identity_schema, example=IDENTITY_EXAMPLE, headers={"Location": LOCATION})
@blp.problem(400, "The body is not valid JSON or not UTF-8.")
@blp.problem(401, **UNAUTHORIZED)
@blp.problem(403, "A User key named another creator.")
@blp.problem(
    409,
    "The same content exists; identity_id names it and Location points at it.",
    example=problem_body(409, IdentityExists.DETAIL, identity_id=IDENTITY_EXAMPLE["identity_id"]),
    headers={"Location": LOCATION},
)
@blp.problem(413, "The body is larger than the limit (64 KiB by default).")
@blp.problem(415, "The body is not sent as application/json.")
@blp.problem(
    422,
    "Invalid or unknown fields, or a body that is not an object; errors names each field.",
    example=problem_body(
        422, "Invalid fields: display_name, nickname.",
        errors={"display_name": ["Length must be between 1 and 256."], "nickname": ["Unknown field."]},
    ),
)
@blp.problem(429, TOO_MANY, headers=RATELIMIT_HEADERS)
@blp.problem(503, **UNAVAILABLE)
def create_identity(fields):
    """Create an off-chain Identity."""
    identity = service.create_identity(fields, current_caller())
    metrics.count_identity_created()
    return identity, 201, {"Location": f"/identity/{identity.identity_id}"}


@blp.route("/healthz")
@blp.response(200, StatusSchema, example={"status": "ok"})
def healthz():
    """The process is alive."""
    return {"status": "ok"}


@blp.route("/readyz")
@blp.response(200, StatusSchema, example={"status": "ok"})
@blp.problem(503, **UNAVAILABLE)
def readyz():
    """The database answers."""
    # A database that does not answer raises an OperationalError, which the error module makes a 503.
    db.session.execute(text("SELECT 1"))
    db.session.commit()
    return {"status": "ok"}


LIST_EXAMPLE = {"page": 1, "limit": 20, "total": 1, "data": [IDENTITY_EXAMPLE], "next": None}


@blp.route("/identities", endpoint="list_identities")
@blp.route("/identities/search", endpoint="search_identities")
@auth.login_required
@limits.reads
@blp.doc(security=API_KEY)
@blp.arguments(identity_list_args_schema, location="query", error_status_code=400, unknown=RAISE)
@blp.response(200, identity_page_schema, example=LIST_EXAMPLE)
@blp.problem(
    400,
    "An unknown parameter, an invalid value, or a cursor this service did not issue; errors names each parameter.",
    example=problem_body(400, "Invalid query parameters: limit.", errors={"limit": ["Must be between 1 and 100."]}),
)
@blp.problem(401, **UNAUTHORIZED)
@blp.problem(403, "Removed identities are listed only to an Admin key.")
@blp.problem(429, TOO_MANY, headers=RATELIMIT_HEADERS)
@blp.problem(503, **UNAVAILABLE)
def list_identities(args):
    """List and search Identities: filtered, sorted, paginated (see the parameters); newest first by default."""
    return browse.list_identities(args, current_caller())
