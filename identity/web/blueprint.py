"""What every view module of the API shares: the blueprint, its body parser, and the documentation of
responses that many routes give (401, 404, 429, 503 as problems)."""

import json
from decimal import Decimal

import flask_smorest
from webargs.flaskparser import FlaskParser, abort
from werkzeug.routing import BaseConverter

from ..core.errors import IdentityNotFound, IdentityRemoved
from ..schemas import ProblemSchema
from ..schemas.fields import CONTENT_ID_PATTERN, IDENTITY_ID_PATTERN
from ..storage import readiness
from .auth import CHALLENGE, UNAUTHORIZED_DETAIL
from .docs import ETAG_EXAMPLE, IDENTITY_EXAMPLE
from .problems import PROBLEM_MIMETYPE, problem_body

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


# Made once: json.loads makes a decoder for every call that passes it options.
_DECODER = json.JSONDecoder(parse_constant=_refuse_constant, parse_int=_parse_int)


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
            return _DECODER.decode(data.decode("utf-8"))
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
    return answer(
        status,
        description,
        content={PROBLEM_MIMETYPE: {"schema": ProblemSchema, "example": example or problem_body(status, description)}},
        **kwargs,
    )


# Where answer() keeps a view's documented responses until operation() hands them to flask-smorest.
RESPONSES = "identity_responses"


def answer(status, description, **response):
    """Document another response of a view (an OpenAPI Response Object: content, headers), for the
    operation() above it to put in the document.

    flask-smorest's alt_response would document it as well, but wraps the view in a function of its
    own for each one, which every request then calls through (current_app.ensure_sync and all): five
    or more per route, about a tenth of a GET's time. Here the documents ride on the view, as an
    attribute of ours (functools.wraps carries it up through flask-smorest's wrappers), and reach the
    document through blp.doc, flask-smorest's documented way to add to an operation's document.
    """

    def document(view):
        vars(view).setdefault(RESPONSES, {})[status] = {"description": description, **response}
        return view

    return document


blp = Blueprint("identities", __name__, description="Fetch and create Identity records.")

# Each alias rule the API serves, with the documented rule it serves the same as: {(rule, method): rule}.
ALIASES = {}


def alias(rule, *, endpoint, methods=("GET",), of):
    """Serve `rule` with the view below it, as it serves `of`, and leave it out of the OpenAPI document.

    The contract's plural paths and /identities/search behave exactly as the route they alias, so the
    document names each operation once and a generated client has one method per operation. The rule
    goes to Flask through Blueprint.record, the hook Flask's own add_url_rule uses; flask-smorest
    documents only the rules given to blp.route. Put it right below that blp.route.
    """

    def decorate(view):
        blp.record(lambda state: state.add_url_rule(rule, endpoint, view, methods=list(methods)))
        ALIASES.update({(rule, method): of for method in methods})
        return view

    return decorate


def operation(operation_id, *, security=None, parameters=None, **doc):
    """The OpenAPI facts of a view: its stable operationId (the method name in generated clients), the
    security it needs (an API key unless given), header parameters such as If-None-Match, and the
    responses documented by answer() and problem() below it. Put it above them all."""
    doc["operationId"] = operation_id
    doc["security"] = API_KEY if security is None else security
    if parameters:
        doc["parameters"] = parameters

    def document(view):
        responses = {**vars(view).get(RESPONSES, {}), **doc.get("responses", {})}
        return blp.doc(**{**doc, **({"responses": responses} if responses else {})})(view)

    return document


class IdentityIdConverter(BaseConverter):
    """The identity id of /identities/<identity_id>: any segment but `search`, the listing's own path.

    Without it, PATCH /identities/search would reach the PATCH of an identity called "search" (and
    answer 415 or 404) where the contract wants 405 with Allow: GET, HEAD, OPTIONS.
    """

    regex = r"(?!search(?![^/]))[^/]+"


blp.record_once(lambda state: state.app.url_map.converters.setdefault("identity_id", IdentityIdConverter))


# The routes that answer whatever the database's state: they report it.
SCHEMA_NOT_NEEDED = frozenset({"identities.healthz", "identities.readyz"})


@blp.before_request
def refuse_until_migrated():
    """A database not at the latest migration is a 503 naming the command that fixes it, on every route."""
    readiness.require_latest_schema(exempt=SCHEMA_NOT_NEEDED)


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
    "description": "The database does not answer (try again shortly), or its schema is not at the latest "
    "migration (the detail gives the command that fixes it).",
    "headers": {"Retry-After": {"schema": {"type": "string", "pattern": "^[0-9]+$"}}},
}
ETAG = {
    "description": "The content_id, quoted.",
    "schema": {"type": "string", "pattern": f'^"{CONTENT_ID_PATTERN}"$'},
    "example": ETAG_EXAMPLE,
}
IF_NONE_MATCH = {
    "in": "header",
    "name": "If-None-Match",
    "required": False,
    "description": "An ETag of an earlier answer: when it is still the current one, the answer is 304 with no body.",
    "schema": {"type": "string"},
    "example": ETAG_EXAMPLE,
}
IF_MATCH = {
    "in": "header",
    "name": "If-Match",
    "required": False,
    "description": "The ETag of the identity as last fetched: the change is made only if it is still current, "
    "else 412 and nothing changes.",
    "schema": {"type": "string"},
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


def shared_problems(view):
    """The answers every keyed route may give, declared once: 401, 429 and 503, as problems."""
    for document in (
        problem(401, **UNAUTHORIZED),
        problem(429, TOO_MANY, headers=RATELIMIT_HEADERS),
        problem(503, **UNAVAILABLE),
    ):
        view = document(view)
    return view
