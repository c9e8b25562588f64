"""The problem answers the API documents, in one table: each a component response of the OpenAPI document,
registered by name at init and named by the operations that give it (`blp.doc(responses=answers(...))`,
which apispec turns into a `$ref`), as flask-smorest names its own.

What every route with a key answers (401, 429, 503) is added to each of its operations by SharedProblems.
"""

from apispec import BasePlugin

from ..core import signin
from ..core.errors import (
    BeyondFeedEnd,
    IdentityExists,
    IdentityNotFound,
    IdentityRemoved,
    KeyNotFound,
    MirrorNotFound,
    ReadOnlyKey,
    SigninOff,
    UserNotFound,
    WebhookNotFound,
)
from ..schemas import IMMUTABLE
from .auth import ADMIN_ONLY_DETAIL, CHALLENGE, UNAUTHORIZED_DETAIL
from .openapi import IDENTITY_EXAMPLE, LOCATION, SIGNIN_WALLET
from .problems import PROBLEM_MIMETYPE, problem_body

_STRING = {"schema": {"type": "string"}}
RATELIMIT_HEADERS = {
    "Retry-After": {"description": "Seconds until the budget is renewed.", **_STRING},
    "X-RateLimit-Limit": {"description": "Requests allowed in the window.", **_STRING},
    "X-RateLimit-Remaining": {"description": "Requests left in the window.", **_STRING},
    "X-RateLimit-Reset": {"description": "When the window ends, in Unix seconds.", **_STRING},
}
UNAVAILABLE = (
    "The database does not answer (try again shortly), or its schema is not at the latest migration (the detail "
    "gives the command that fixes it)."
)
RATE_LIMITED = "This key's budget for the route is spent; retry after Retry-After seconds."
INVALID_FIELDS = "Invalid or unknown fields, or a body that is not an object; errors names each field."
QUERY = "An unknown parameter, an invalid value, or a cursor this service did not issue; errors names each parameter."
PATCH_TYPES = "The body is not sent as application/json or application/merge-patch+json."
ROTATED = "The key is revoked, expired, or rotated already (it works until its grace ends): nothing was issued."
BY_CREATOR = "A User key named another creator, or the key is read-only (scope read)."
_CREATE_REFUSED = (
    "Invalid or unknown fields, a body that is not an object, or a signature that is not the creator's, or that no "
    "wallet can have made though it fits the pattern (its r or s 0 or out of secp256k1's range, its v not 27 or 28), "
    "or for a contract wallet's, one its contract does not accept on signature_chain_id, or a chain without an "
    "endpoint here; errors names each field."
)


def _query(field, message):
    return problem_body(400, f"Invalid query parameters: {field}.", errors={field: [message]})


def _fields(field, message):
    return problem_body(422, f"Invalid fields: {field}.", errors={field: [message]})


# name: (status, description, and what else the answer shows: example (else the problem of that description),
# headers). Every status a route answers, but its successes and 304, is one of these.
ANSWERS = {
    # 400
    "InvalidBody": (400, "The body is not valid JSON or not UTF-8."),
    "InvalidQuery": (400, QUERY, {"example": _query("limit", "Must be between 1 and 100.")}),
    "InvalidKeyQuery": (400, QUERY, {"example": _query("active", "Not a valid boolean.")}),
    "InvalidAuditQuery": (400, QUERY, {"example": _query("actor", "Not an Ethereum address: expected 0x and 40 hex digits.")}),
    "InvalidFeedQuery": (400, "An unknown or invalid query parameter or Last-Event-ID; errors names each.",
                         {"example": _query("limit", "Must be between 1 and 1000.")}),
    # 401
    "Unauthorized": (401, "Missing, unknown or revoked API key; the response does not say which.", {
        "headers": {"WWW-Authenticate": {"schema": {"type": "string", "enum": [CHALLENGE]}}},
        "example": problem_body(401, UNAUTHORIZED_DETAIL)}),
    "SigninRefused": (401, "The message failed a check: its domain or URI (2), chain (3), nonce (4: not issued here, "
                      "used, or expired; a nonce is spent by the first sign-in that names it once the message parses, "
                      "whatever its outcome), times (5) or signature (6); the detail names it.", {
        "headers": {"WWW-Authenticate": {"schema": {"type": "string"}, "description": 'SIWE realm="<domain>"'}},
        "example": problem_body(401, "Sign-in refused at check 4 (nonce): The nonce is spent: a sign-in used it "
                                "already (the first sign-in that names a nonce spends it, whatever its outcome). Ask "
                                "GET /auth/nonce for a fresh one and sign a new message.")}),
    # 403
    "AdminOnly": (403, "A User key (only Admin keys may do this).", {"example": problem_body(403, ADMIN_ONLY_DETAIL)}),
    "KeysAdminOnly": (403, "A User key (only Admin keys manage keys), or a read-only key asked to change something.",
                      {"example": problem_body(403, ADMIN_ONLY_DETAIL)}),
    "CurationAdminOnly": (403, "A User key (only Admin keys curate), or a read-only key (scope read)."),
    "NotTheCreator": (403, BY_CREATOR),
    "RemovedListedToAdmin": (403, "Removed identities are listed only to an Admin key."),
    "ReadOnlyKey": (403, "The calling key is read-only.", {"example": problem_body(403, ReadOnlyKey.DETAIL)}),
    "BeyondGrant": (403, "Every check passed, but the body asks for a write key and the wallet is granted read access "
                    "only (its user's grant, GET /users/{wallet}): nothing is issued, the nonce is spent.",
                    {"example": problem_body(403, signin.beyond_grant_detail(SIGNIN_WALLET))}),
    # 404
    "IdentityNotFound": (404, IdentityNotFound.DETAIL),
    "KeyNotFound": (404, KeyNotFound.DETAIL),
    "UserNotFound": (404, UserNotFound.DETAIL),
    "WebhookNotFound": (404, WebhookNotFound.DETAIL),
    "MirrorNotFound": (404, MirrorNotFound.DETAIL),
    "SigninOff": (404, "Sign-in with Ethereum is off: IDENTITY_SIWE_DOMAIN is not set.",
                  {"example": problem_body(404, SigninOff.DETAIL)}),
    # 409
    "IdentityExists": (409, "The same content exists; identity_id names it and Location points at it.", {
        "example": problem_body(409, IdentityExists.DETAIL, identity_id=IDENTITY_EXAMPLE["identity_id"]),
        "headers": {"Location": LOCATION}}),
    "MirrorTaken": (409, "A mirror of that name, or of that upstream, is registered already; detail names which."),
    "MyKeyRotated": (409, ROTATED, {"example": problem_body(409, "This key was rotated already and stops at "
                     "2026-11-21T09:35:00.123456+00:00; rotate the key that replaced it instead.")}),
    "KeyRotated": (409, ROTATED, {"example": problem_body(
        409, "This key is revoked; issue a new one (POST /keys, or `flask keys create`).")}),
    "BeyondFeedEnd": (409, "`after` (or Last-Event-ID) is above every seq the feed ever issued, so no entry would ever "
                      "come after it: the position is from before a restore of an older backup, or from another "
                      "service. feed_end names the feed's end; read the feed again from after=0.",
                      {"example": problem_body(409, str(BeyondFeedEnd(42, 6)), feed_end=6)}),
    # 410, 412, 413, 415
    "IdentityRemoved": (410, "The identity is in status removed; identity_id names it.", {
        "example": problem_body(410, IdentityRemoved.DETAIL, identity_id=IDENTITY_EXAMPLE["identity_id"])}),
    "PreconditionFailed": (412, "If-Match does not name the current ETag; nothing was changed."),
    "BodyTooLarge": (413, "The body is larger than the limit (64 KiB by default)."),
    "NotJson": (415, "The body is not sent as application/json."),
    "NotJsonOrMergePatch": (415, PATCH_TYPES),
    # 422
    "InvalidFields": (422, INVALID_FIELDS),
    "CreateRefused": (422, _CREATE_REFUSED, {"example": problem_body(422, "Invalid fields: display_name, nickname.", errors={
        "display_name": ["Length must be between 1 and 256."], "nickname": ["Unknown field."]})}),
    "CurationRefused": (422, "A content field, an unknown field, an invalid value, or nothing to change; errors names "
                        "each.", {"example": _fields("display_name", IMMUTABLE)}),
    "GraceRefused": (422, INVALID_FIELDS, {"example": _fields(
        "grace_seconds", "Must be greater than or equal to 0 and less than or equal to 86400.")}),
    "GrantRefused": (422, "A grant that is not read or write, or another field; errors names it.",
                     {"example": _fields("grant", "Must be one of: write, read.")}),
    "UrlRefused": (422, "An invalid, unknown or refused field; errors names each.", {"example": _fields(
        "url", "The host 10.0.0.1 is or resolves to a private address (10.0.0.1); webhooks are delivered to public "
        "addresses only (IDENTITY_WEBHOOKS_ALLOW_PRIVATE=1 allows others).")}),
    "NotASigninMessage": (422, "A field is missing or invalid, or the message is not an EIP-4361 message (errors.message "
                          "names its first wrong line; an address not in its EIP-55 checksummed form is one).", {
        "example": problem_body(422, "The message is not an EIP-4361 (Sign-In with Ethereum) message: line 2: the "
                                "address is all lower case, which carries no EIP-55 checksum: expected its checksummed "
                                f"form, {SIGNIN_WALLET}.", errors={"message": ["line 2: ..."]})}),
    # 429
    "RateLimited": (429, RATE_LIMITED, {"headers": RATELIMIT_HEADERS}),
    "TooManyStreams": (429, RATE_LIMITED + " Or the key holds IDENTITY_MAX_STREAMS_PER_KEY streams and long polls "
                       "already.", {"headers": RATELIMIT_HEADERS}),
    "SigninRateLimited": (429, "This client address's budget for the route is spent (IDENTITY_RATELIMIT_SIGNIN); retry "
                          "after Retry-After seconds.", {"headers": {name: {"schema": {"type": "string"}} for name in (
                              "Retry-After", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset")}}),
    # 503
    "Unavailable": (503, UNAVAILABLE, {"headers": {"Retry-After": {"schema": {"type": "string", "pattern": "^[0-9]+$"}}}}),
    # A route that checks a contract wallet's signature on its chain (identity.core.contract_wallets) may also answer
    # 503 when that chain's endpoint (IDENTITY_ETH_RPC_URLS) gives no usable answer.
    "ChainUnavailable": (503, UNAVAILABLE + " Or a contract wallet's signature could not be checked: its chain's "
                         "JSON-RPC endpoint (IDENTITY_ETH_RPC_URLS) is down, slow, or answered an error; the detail "
                         "names the chain. Nothing was accepted; retry after Retry-After seconds.",
                         {"headers": {"Retry-After": {"schema": {"type": "string", "pattern": "^[0-9]+$"}}}}),
}
# What every route that reads a JSON body may answer; a view names its own 415 or 422 after these to replace them.
BODY = ("InvalidBody", "BodyTooLarge", "NotJson", "InvalidFields")
# What every route with a key answers: added to each of its operations by SharedProblems.
SHARED = ("Unauthorized", "RateLimited", "Unavailable")


def answers(*named):
    """An OpenAPI Responses Object for blp.doc: each answer of `named` (names of ANSWERS, or tuples of them such
    as BODY) by its status, the later of two for one status kept; a mapping among them is added as it is."""
    responses = {}
    for item in named:
        if isinstance(item, dict):
            responses.update(item)
        else:
            responses.update({ANSWERS[name][0]: name for name in ((item,) if isinstance(item, str) else item)})
    return responses


def response_object(name):
    """The Response Object of the answer `name`: its description, its problem+json example and its headers."""
    status, description, *more = ANSWERS[name]
    shown = more[0] if more else {}
    example = shown.get("example") or problem_body(status, description)
    response = {
        "description": description,
        "content": {PROBLEM_MIMETYPE: {"schema": {"$ref": "#/components/schemas/Problem"}, "example": example}},
    }
    if "headers" in shown:
        response["headers"] = shown["headers"]
    return response


class SharedProblems(BasePlugin):
    """Declares once, for every operation of the document, what every route with an API key answers: the
    key's security scheme, and SHARED (apispec's operation_helper, called for each path as flask-smorest adds
    it). An operation that says `security: []` needs no key and gets neither; a status an operation documents
    itself is left as it says."""

    def operation_helper(self, path=None, operations=None, **kwargs):
        for operation_doc in (operations or {}).values():
            security = operation_doc.setdefault("security", [{"ApiKeyAuth": []}])
            if security:
                responses = operation_doc.setdefault("responses", {})
                for status, name in answers(SHARED).items():
                    if status not in responses and str(status) not in responses:
                        responses[status] = name


def init_app(api):
    """Register every answer as a component response of `api`'s document, before its operations name them."""
    for name in ANSWERS:
        api.spec.components.response(name, response_object(name))
