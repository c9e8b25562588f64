"""The identities: fetch, create, curate, list and search; and an identity's content, byte for byte."""

from functools import lru_cache

from flask import Response, request
from marshmallow import RAISE
from werkzeug.routing import BaseConverter

from ..core import authorship, browse, content, curation, identities
from ..core.errors import IdentityNotFound, IdentityRemoved
from ..schemas import (
    IdentityContentSchema,
    IdentityPreviewSchema,
    identity_body,
    identity_create_schema,
    identity_list_args_schema,
    identity_page_schema,
    identity_patch_schema,
    identity_schema,
)
from . import blp, budgets
from .answers import BODY, answers
from .auth import access, current_caller
from .metrics import IDENTITIES_CREATED
from .openapi import (
    CONTENT_EXAMPLE,
    CREATE_EXAMPLE,
    ETAG,
    ETAG_HEADERS,
    IDENTITY_EXAMPLE,
    IDENTITY_ID,
    IF_MATCH,
    IF_NONE_MATCH,
    IF_NONE_MATCH_CONTENT,
    LOCATION,
    PATCH_EXAMPLE,
)


class IdentityIdConverter(BaseConverter):
    """The identity id of /identity/<identity_id> and /identities/<identity_id>: any segment but `search` and
    `preview`, paths of their own (GET /identities/search, POST /identity/preview).

    Without it, PATCH /identities/search or PATCH /identity/preview would reach the PATCH of an identity of
    that name (and answer 415, 422 or 404) where the contract wants 405 with Allow naming the path's methods.
    """

    regex = r"(?!(?:search|preview)(?![^/]))[^/]+"


blp.record_once(lambda state: state.app.url_map.converters.setdefault("identity_id", IdentityIdConverter))

NOT_MODIFIED = {"description": "If-None-Match named the current ETag; no body.", "headers": ETAG_HEADERS}
_PREVIEWED = content.address(CREATE_EXAMPLE)
PREVIEW_EXAMPLE = {
    "content": _PREVIEWED.content, "content_id": _PREVIEWED.content_id, "identity_id": _PREVIEWED.identity_id,
    "identity_hash": _PREVIEWED.identity_hash, "exists": False, "typed_data": authorship.typed_data(_PREVIEWED.content_id),
}


@blp.route("/identity/<identity_id:identity_id>", endpoint="get_identity", parameters=[IDENTITY_ID])
@access(budgets.reads)
@blp.doc(operationId="getIdentity", parameters=[IF_NONE_MATCH],
         responses=answers({304: NOT_MODIFIED}, "IdentityNotFound", "IdentityRemoved"))
@blp.response(200, identity_schema, example=IDENTITY_EXAMPLE, headers=ETAG_HEADERS)
def get_identity(identity_id):
    """Fetch an Identity by its identity_id.

    Also served at /identities/{identity_id}.
    """
    row = identities.get_identity_row(identity_id)
    if row is None:
        raise IdentityNotFound()
    return conditional(_identity_response(tuple(row)))


# Bodies kept per process, by the identity's row (about 2 KiB each with its key: some 8 MB at most).
CACHED_BODIES = 4096
_STATUS = identities.IDENTITIES.c.keys().index("status")


@lru_cache(maxsize=CACHED_BODIES)
def _identity_response(row):
    """The answer to a GET of the identity whose row (identities.IDENTITIES_WITH_CREATOR) is `row`: its
    body and ETag, made once for each state of the row and kept.

    The body is a function of the row alone (the identity's columns and its creator's; the same for every
    caller), and the key is what the request has just read: a write to the identity (updated_at moves)
    or to its creator (its role, its last_login at a sign-in) gives another key, and the old entry ages out, never served stale.
    Each request gets a Response of its own, made from the kept bytes.
    """
    if row[_STATUS] == "removed":
        return None
    return identity_body(identities.identity_record(row))


def conditional(kept):
    """A Response of `kept` (body, ETag) that answers a matching If-None-Match with 304: an identity's body and
    its ETag (schemas.identity_body), or its content and content_id. The body is the same for every caller,
    but it is served only behind a key: a shared cache must not hand it to a client without one (private)."""
    if kept is None:
        raise IdentityRemoved(request.view_args["identity_id"])
    response = tagged(*kept)
    # Werkzeug compares If-None-Match weakly, as RFC 9110 asks; a 304 keeps the ETag and loses the body.
    return response.make_conditional(request) if "HTTP_IF_NONE_MATCH" in request.environ else response


def tagged(body, etag):
    """The Response of `body` with its ETag (schemas.identity_body's, or a content_id), private to its caller."""
    response = Response(body, mimetype="application/json", headers={"Cache-Control": "private"})
    response.set_etag(etag)
    return response


@blp.route("/identity/<identity_id>/content", endpoint="get_identity_content", parameters=[IDENTITY_ID])
@access(budgets.reads)
@blp.doc(operationId="getIdentityContent", parameters=[IF_NONE_MATCH_CONTENT], responses=answers(
    {304: {"description": "If-None-Match named the content_id; no body.", "headers": {"ETag": ETAG}}},
    "IdentityNotFound", "IdentityRemoved"))
@blp.response(
    200, IdentityContentSchema, example=CONTENT_EXAMPLE,
    description="The canonical bytes (RFC 8785) that the content_id is the CID of: their CIDv1 (raw, sha2-256, "
    "base32) is the content_id, and `ipfs add --cid-version 1` gives the same.",
    headers={"ETag": ETAG, "Cache-Control": ETAG_HEADERS["Cache-Control"]},
)
def get_identity_content(identity_id):
    """Fetch an Identity's content, byte for byte as its content_id hashes it.

    Also served at /identities/{identity_id}/content.
    """
    identity = identities.get_identity(identity_id)
    if identity is None:
        raise IdentityNotFound()
    if identity["status"] == "removed":
        raise IdentityRemoved(identity_id)
    return conditional((identities.canonical_content(identity), identity["content_id"]))


# OpenAPI links: what a client does next with the identity a 201 created.
CREATED_LINKS = {"links": {
    operation_id: {"operationId": operation_id, "parameters": {"identity_id": "$response.body#/identity_id"}}
    for operation_id in ("getIdentity", "getIdentityContent", "listIdentityChanges", "updateIdentity")
}}


@blp.route("/identity", methods=["POST"], endpoint="create_identity")
@access(budgets.creates)
@blp.doc(operationId="createIdentity", responses=answers(
    {201: CREATED_LINKS}, BODY, "NotTheCreator", "IdentityExists", "CreateRefused", "ChainUnavailable"))
@blp.arguments(identity_create_schema, example=CREATE_EXAMPLE)
@blp.response(201, identity_schema, example=IDENTITY_EXAMPLE, headers={"Location": LOCATION})
def create_identity(fields):
    """Create an off-chain Identity.

    Also served at POST /identities, and at both paths with a trailing slash.
    """
    identity = identities.create_identity(fields, current_caller())
    IDENTITIES_CREATED.inc()
    return identity, 201, {"Location": f"/identity/{identity['identity_id']}"}


@blp.route("/identity/preview", methods=["POST"], endpoint="preview_identity")
@access(budgets.creates)
@blp.doc(operationId="previewIdentity",
         responses=answers(BODY, "NotTheCreator", "CreateRefused", "ChainUnavailable"))
@blp.arguments(identity_create_schema, example=CREATE_EXAMPLE)
@blp.response(200, IdentityPreviewSchema, example=PREVIEW_EXAMPLE)
def preview_identity(fields):
    """Preview a create: the normalized content, its ids, whether it exists here, and the typed data that its
    creator signs (eth_signTypedData_v4) for a signed create; writes nothing.

    A create's body, checked as a create checks it (but content that exists: see exists).
    """
    return identities.preview_identity(fields, current_caller())


@blp.route("/identity/<identity_id:identity_id>", methods=["PATCH"], endpoint="patch_identity", parameters=[IDENTITY_ID])
@access(budgets.creates, role="Admin")
@blp.doc(operationId="updateIdentity", parameters=[IF_MATCH], responses=answers(
    BODY, "CurationAdminOnly", "IdentityNotFound", "PreconditionFailed", "NotJsonOrMergePatch", "CurationRefused"))
@blp.arguments(identity_patch_schema, example=PATCH_EXAMPLE)
@blp.response(200, identity_schema, example=IDENTITY_EXAMPLE, headers=ETAG_HEADERS)
def patch_identity(changes, identity_id):
    """Curate an Identity: its status and on-chain figures (Admin keys only; If-Match makes it conditional).

    The body is application/json; the same object sent as application/merge-patch+json (RFC 7396) is
    accepted too. Also served at /identities/{identity_id}.
    """
    if_match = request.if_match
    holds = (lambda identity: if_match.contains(identity_body(identity)[1])) if if_match else None
    identity = curation.update_identity(identity_id, changes, current_caller().wallet, precondition=holds)
    return tagged(*identity_body(identity))


LIST_EXAMPLE = {"page": 1, "limit": 20, "total": 1, "data": [IDENTITY_EXAMPLE], "next": None}


@blp.route("/identities", endpoint="list_identities")
@access(budgets.reads)
@blp.doc(operationId="listIdentities", responses=answers("InvalidQuery", "RemovedListedToAdmin"))
@blp.arguments(identity_list_args_schema, location="query", error_status_code=400, unknown=RAISE)
@blp.response(200, identity_page_schema, example=LIST_EXAMPLE)
def list_identities(args):
    """List and search Identities: filtered, sorted, paginated (see the parameters); newest first by default.

    Also served at /identities/search, the name the hosted service used for searching, and at /identities/.
    """
    return browse.list_identities(args, current_caller())
