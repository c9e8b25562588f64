"""The identities: fetch, create, curate, list and search."""

from flask import current_app, request
from marshmallow import RAISE

from ..core import browse, curation
from ..core import identities as service
from ..core.errors import IdentityExists, IdentityNotFound, IdentityRemoved, PreconditionFailed
from ..schemas import (
    IMMUTABLE,
    IdentityContentSchema,
    identity_create_schema,
    identity_list_args_schema,
    identity_page_schema,
    identity_patch_schema,
    identity_schema,
)
from . import limits, metrics
from .auth import ADMIN_ONLY_DETAIL, auth, current_caller
from .blueprint import (
    ETAG,
    ETAG_HEADERS,
    GONE,
    IDENTITY_ID,
    IF_MATCH,
    IF_NONE_MATCH,
    LOCATION,
    NOT_FOUND,
    alias,
    answer,
    blp,
    operation,
    problem,
    shared_problems,
)
from .docs import CONTENT_EXAMPLE, CREATE_EXAMPLE, IDENTITY_EXAMPLE, PATCH_EXAMPLE
from .headers import body_etag, conditional
from .problems import problem_body
from .representation import identity_response


@blp.route("/identity/<identity_id>", endpoint="get_identity", parameters=[IDENTITY_ID])
@alias("/identities/<identity_id:identity_id>", endpoint="get_identity_plural", of="/identity/<identity_id>")
@auth.login_required
@limits.reads
@conditional
@operation("getIdentity", parameters=[IF_NONE_MATCH])
@blp.response(200, identity_schema, example=IDENTITY_EXAMPLE, headers=ETAG_HEADERS)
@answer(304, "If-None-Match named the current ETag; no body.", headers=ETAG_HEADERS)
@shared_problems
@problem(404, NOT_FOUND)
@problem(410, **GONE)
def get_identity(identity_id):
    """Fetch an Identity by its identity_id.

    Also served at /identities/{identity_id}.
    """
    return identity_response(identity_id)


@blp.route("/identity/<identity_id>/content", endpoint="get_identity_content", parameters=[IDENTITY_ID])
@alias("/identities/<identity_id>/content", endpoint="get_identity_content_plural", of="/identity/<identity_id>/content")
@auth.login_required
@limits.reads
@conditional
@operation("getIdentityContent", parameters=[IF_NONE_MATCH])
@blp.response(
    200,
    IdentityContentSchema,
    description="The canonical bytes (RFC 8785) that the content_id is the CID of: "
    "their CIDv1 (raw, sha2-256, base32) is the content_id, and `ipfs add --cid-version 1` gives the same.",
    example=CONTENT_EXAMPLE,
    headers={"ETag": ETAG, "Cache-Control": ETAG_HEADERS["Cache-Control"]},
)
@answer(304, "If-None-Match named the content_id; no body.", headers={"ETag": ETAG})
@shared_problems
@problem(404, NOT_FOUND)
@problem(410, **GONE)
def get_identity_content(identity_id):
    """Fetch an Identity's content, byte for byte as its content_id hashes it.

    Also served at /identities/{identity_id}/content.
    """
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
@alias("/identities", methods=["POST"], endpoint="create_identity_plural", of="/identity")
@alias("/identity/", methods=["POST"], endpoint="create_identity_slash", of="/identity")
@alias("/identities/", methods=["POST"], endpoint="create_identity_plural_slash", of="/identity")
@auth.login_required
@limits.creates
@operation("createIdentity")
@blp.arguments(identity_create_schema, example=CREATE_EXAMPLE)
@blp.response(201, identity_schema, example=IDENTITY_EXAMPLE, headers={"Location": LOCATION})
@problem(400, "The body is not valid JSON or not UTF-8.")
@shared_problems
@problem(403, "A User key named another creator, or the key is read-only (scope read).")
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
def create_identity(fields):
    """Create an off-chain Identity.

    Also served at POST /identities, and at both paths with a trailing slash.
    """
    identity = service.create_identity(fields, current_caller())
    metrics.count_identity_created()
    return identity, 201, {"Location": f"/identity/{identity['identity_id']}"}


@blp.route("/identity/<identity_id>", methods=["PATCH"], endpoint="patch_identity", parameters=[IDENTITY_ID])
@alias(
    "/identities/<identity_id:identity_id>", methods=["PATCH"], endpoint="patch_identity_plural",
    of="/identity/<identity_id>",
)
@auth.login_required(role="Admin")
@limits.creates
@conditional
@operation("updateIdentity", parameters=[IF_MATCH])
@blp.arguments(identity_patch_schema, example=PATCH_EXAMPLE)
@blp.response(200, identity_schema, example=IDENTITY_EXAMPLE, headers=ETAG_HEADERS)
@problem(400, "The body is not valid JSON or not UTF-8.")
@shared_problems
@problem(403, "A User key (only Admin keys curate), or a read-only key (scope read).", example=problem_body(403, ADMIN_ONLY_DETAIL))
@problem(404, NOT_FOUND)
@problem(412, PreconditionFailed.DETAIL)
@problem(413, "The body is larger than the limit (64 KiB by default).")
@problem(415, "The body is not sent as application/json or application/merge-patch+json.")
@problem(
    422,
    "A content field, an unknown field, an invalid value, or nothing to change; errors names each.",
    example=problem_body(422, "Invalid fields: display_name.", errors={"display_name": [IMMUTABLE]}),
)
def patch_identity(changes, identity_id):
    """Curate an Identity: its status and on-chain figures (Admin keys only; If-Match makes it conditional).

    The body is application/json; the same object sent as application/merge-patch+json (RFC 7396) is
    accepted too. Also served at /identities/{identity_id}.
    """
    if_match = request.if_match
    precondition = (lambda identity: if_match.contains(representation_etag(identity))) if if_match else None
    return curation.update_identity(identity_id, changes, current_caller().wallet, precondition)


def representation_etag(identity):
    """The ETag GET sends for `identity`: the hash of the very body it serves."""
    return body_etag(current_app.json.response(identity_schema.dump(identity)).get_data())


LIST_EXAMPLE = {"page": 1, "limit": 20, "total": 1, "data": [IDENTITY_EXAMPLE], "next": None}


@blp.route("/identities", endpoint="list_identities")
@alias("/identities/search", endpoint="search_identities", of="/identities")
@alias("/identities/", endpoint="list_identities_slash", of="/identities")
@auth.login_required
@limits.reads
@operation("listIdentities")
@blp.arguments(identity_list_args_schema, location="query", error_status_code=400, unknown=RAISE)
@blp.response(200, identity_page_schema, example=LIST_EXAMPLE)
@problem(
    400,
    "An unknown parameter, an invalid value, or a cursor this service did not issue; errors names each parameter.",
    example=problem_body(400, "Invalid query parameters: limit.", errors={"limit": ["Must be between 1 and 100."]}),
)
@shared_problems
@problem(403, "Removed identities are listed only to an Admin key.")
def list_identities(args):
    """List and search Identities: filtered, sorted, paginated (see the parameters); newest first by default.

    Also served at /identities/search, the name the hosted service used for searching, and at /identities/.
    """
    return browse.list_identities(args, current_caller())
