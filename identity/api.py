"""The HTTP API: one blueprint, declarative views."""

from decimal import Decimal

from flask import json
from flask_smorest import Blueprint
from sqlalchemy import text
from webargs.flaskparser import FlaskParser, abort

from . import limits, metrics, service
from .auth import auth, current_caller
from .extensions import db
from .headers import conditional
from .schemas import IdentityCreateSchema, IdentitySchema, ProblemSchema, StatusSchema


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


class IdentityBlueprint(Blueprint):
    ARGUMENTS_PARSER = StrictJSONParser()


blp = IdentityBlueprint("identities", __name__, description="Fetch and create Identity records.")

API_KEY = [{"ApiKeyAuth": []}]
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


@blp.route("/identity/<identity_id>", endpoint="get_identity")
@blp.route("/identities/<identity_id>", endpoint="get_identity_plural")
@auth.login_required
@limits.reads
@conditional
@blp.doc(security=API_KEY)
@blp.response(200, IdentitySchema, headers=ETAG_HEADERS)
@blp.alt_response(304, description="If-None-Match named the current ETag; no body.", headers=ETAG_HEADERS)
@blp.alt_response(401, schema=ProblemSchema, description="Missing, unknown or revoked API key.")
@blp.alt_response(404, schema=ProblemSchema, description="No Identity exists for the provided id.")
@blp.alt_response(429, schema=ProblemSchema, description=TOO_MANY, headers=RATELIMIT_HEADERS)
def get_identity(identity_id):
    """Fetch an Identity by its identity_id."""
    identity = service.get_identity(identity_id)
    if identity is None:
        abort(404, message="No Identity exists for the provided id.")
    return identity


@blp.route("/identity", methods=["POST"], endpoint="create_identity")
@blp.route("/identities", methods=["POST"], endpoint="create_identity_plural")
@auth.login_required
@limits.creates
@blp.doc(security=API_KEY)
@blp.arguments(IdentityCreateSchema)
@blp.response(201, IdentitySchema, headers={"Location": {"description": "/identity/<identity_id>", "schema": {"type": "string"}}})
@blp.alt_response(400, schema=ProblemSchema, description="The body is not valid JSON or not UTF-8.")
@blp.alt_response(401, schema=ProblemSchema, description="Missing, unknown or revoked API key.")
@blp.alt_response(403, schema=ProblemSchema, description="A User key named another creator.")
@blp.alt_response(409, schema=ProblemSchema, description="The same content exists; identity_id names it.")
@blp.alt_response(413, schema=ProblemSchema, description="The body is larger than the limit.")
@blp.alt_response(415, schema=ProblemSchema, description="The body is not sent as application/json.")
@blp.alt_response(422, schema=ProblemSchema, description="Invalid or unknown fields, named in errors.")
@blp.alt_response(429, schema=ProblemSchema, description=TOO_MANY, headers=RATELIMIT_HEADERS)
def create_identity(fields):
    """Create an off-chain Identity."""
    identity = service.create_identity(fields, current_caller())
    metrics.count_identity_created()
    return identity, 201, {"Location": f"/identity/{identity.identity_id}"}


@blp.route("/healthz")
@blp.response(200, StatusSchema)
def healthz():
    """The process is alive."""
    return {"status": "ok"}


@blp.route("/readyz")
@blp.response(200, StatusSchema)
@blp.alt_response(503, schema=ProblemSchema, description="The database does not answer.")
def readyz():
    """The database answers."""
    # A database that does not answer raises an OperationalError, which the error module makes a 503.
    db.session.execute(text("SELECT 1"))
    db.session.commit()
    return {"status": "ok"}
