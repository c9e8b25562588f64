"""Keys and users over HTTP: the caller's own key (/me), the Admin routes for keys (/keys), and users.

A key of scope `read` is refused (403) on every POST and PATCH by identity.web.auth, before any view
runs; it may still revoke itself (DELETE /me/key).
"""

from datetime import datetime
from types import SimpleNamespace

from marshmallow import RAISE

from ..core import keys, users
from ..core.errors import ReadOnlyKey
from ..schemas import (
    IssuedKeySchema,
    KeyCreateSchema,
    KeyListArgsSchema,
    KeyPageSchema,
    KeyRotateSchema,
    KeySchema,
    MeSchema,
    UserGrantSchema,
    UserWithCountSchema,
)
from . import blp, budgets
from .auth import ADMIN_ONLY_DETAIL, auth, current_caller
from .openapi import BODY, NOT_FOUND, QUERY, operation, problems
from .problems import problem_body

_AT = datetime.fromisoformat("2026-11-21T09:30:00.123456+00:00")
_WALLET = "0xd8dA6BF26964aF9D7eEd9e03E53415D37aA96045"
KEY_EXAMPLE = KeySchema().dump({
    "id": "6e0c7a52-3b1f-4d8e-9f20-7c4b1a2d5e93", "wallet": _WALLET, "role": "User", "scope": "read",
    "label": "status page", "created_at": _AT, "expires_at": None, "last_used_at": _AT, "revoked_at": None,
    "created_by": "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed",
})
ISSUED_EXAMPLE = {**KEY_EXAMPLE, "last_used_at": None, "key": "idsk_" + "Q2hhbmdlIG1lOiB0aGlzIGlzIGFuIGV4YW1wbGUga2V5"[:43]}
USER_EXAMPLE = UserWithCountSchema().dump(SimpleNamespace(
    id="9b2e4c1a-6f0d-4e8b-a5c3-2d7f1e9a0b64", created_at=_AT, updated_at=_AT, last_login=_AT, wallet=_WALLET,
    role="User", grant="write", identity_count=3,
))
ME_EXAMPLE = {"user": {k: v for k, v in USER_EXAMPLE.items() if k not in ("identity_count", "grant")}, "key": KEY_EXAMPLE}
PAGE_EXAMPLE = {"page": 1, "limit": 20, "total": 1, "data": [KEY_EXAMPLE], "next": None}
KEY_ID = {
    "in": "path", "name": "key_id", "required": True, "description": "The key's id (see GET /keys).",
    "schema": {"type": "string", "format": "uuid"}, "example": KEY_EXAMPLE["id"],
}
WALLET = {
    "in": "path", "name": "wallet", "required": True, "description": "A wallet address, in any case.",
    "schema": {"type": "string", "pattern": r"^0x[0-9a-fA-F]{40}$"}, "example": _WALLET,
}
# OpenAPI links: what a client does next with the key a 201 issued.
ISSUED_LINKS = {
    "links": {
        operation: {"operationId": operation, "parameters": {"key_id": "$response.body#/id"}}
        for operation in ("getKey", "rotateKey", "revokeKey")
    }
}
ADMIN_ONLY = {
    "description": "A User key (only Admin keys manage keys), or a read-only key asked to change something.",
    "example": problem_body(403, ADMIN_ONLY_DETAIL),
}
ROTATED = "The key is revoked, expired, or rotated already (it works until its grace ends): nothing was issued."


GRACE_REFUSED = {
    "description": "Invalid or unknown fields, or a body that is not an object; errors names each field.",
    "example": problem_body(422, "Invalid fields: grace_seconds.", errors={"grace_seconds": [
        "Must be greater than or equal to 0 and less than or equal to 86400."
    ]}),
}


READ_ONLY = problem_body(403, ReadOnlyKey.DETAIL)


@blp.route("/me", endpoint="get_me")
@auth.login_required
@budgets.reads
@operation("getMe")
@blp.response(200, MeSchema, example=ME_EXAMPLE)
def get_me():
    """The calling key and its user."""
    return keys.me(current_caller())


@blp.route("/me/key/rotate", methods=["POST"], endpoint="rotate_my_key")
@auth.login_required
@budgets.creates
@operation("rotateMyKey")
@blp.arguments(KeyRotateSchema(), example={"grace_seconds": 300})
@blp.response(201, IssuedKeySchema, example=ISSUED_EXAMPLE, description="The new key, shown this once.")
@problems(
    BODY, 403, 409, _403={"description": "The calling key is read-only.", "example": READ_ONLY}, _422=GRACE_REFUSED,
    _409={"description": ROTATED, "example": problem_body(409, "This key was rotated already and stops at "
          "2026-11-21T09:35:00.123456+00:00; rotate the key that replaced it instead.")},
)
def rotate_my_key(args):
    """Replace the calling key: a new key for the same user, scope, label and expiry; the calling key
    stops working after grace_seconds."""
    caller = current_caller()
    key, api_key = keys.rotate_key(caller.key_id, args["grace_seconds"], by=caller.wallet)
    return keys.issued_record(key, api_key), 201


@blp.route("/me/key", methods=["DELETE"], endpoint="revoke_my_key")
@auth.login_required
@budgets.creates
@operation("revokeMyKey")
@blp.response(204, description="The calling key is revoked: it is refused from now on.")
def revoke_my_key():
    """Revoke the calling key (a read-only key may too)."""
    caller = current_caller()
    keys.revoke_key(key_id=caller.key_id, by=caller.wallet)


@blp.route("/keys", methods=["POST"], endpoint="create_key")
@auth.login_required(role="Admin")
@budgets.creates
@operation("createKey", responses={201: ISSUED_LINKS})
@blp.arguments(KeyCreateSchema(), example={"wallet": _WALLET, "scope": "read", "label": "status page"})
@blp.response(
    201, IssuedKeySchema, example=ISSUED_EXAMPLE, description="The key, shown this once.",
    headers={"Location": {"schema": {"type": "string"}, "description": "/keys/<id>"}},
)
@problems(BODY, 403, _403=ADMIN_ONLY, _422=GRACE_REFUSED)
def create_key(fields):
    """Issue a key for a wallet (Admin keys only); a wallet never seen before becomes a user."""
    options = {name: fields.get(name) for name in ("scope", "label", "expires_in")}
    key, api_key = keys.issue_key(fields["wallet"], fields.get("role"), **options, created_by=current_caller().wallet)
    return keys.issued_record(key, api_key), 201, {"Location": f"/keys/{api_key.id}"}


@blp.route("/keys", endpoint="list_keys")
@auth.login_required(role="Admin")
@budgets.reads
@operation("listKeys")
@blp.arguments(KeyListArgsSchema(), location="query", error_status_code=400, unknown=RAISE)
@blp.response(200, KeyPageSchema, example=PAGE_EXAMPLE)
@problems(400, 403, _400={**QUERY, "example": problem_body(400, "Invalid query parameters: active.", errors={
    "active": ["Not a valid boolean."]})})
def list_keys(args):
    """List keys without their secrets, newest first (Admin keys only): by wallet, live or not, paginated."""
    return keys.list_keys(args)


@blp.route("/keys/<key_id>", endpoint="get_key", parameters=[KEY_ID])
@auth.login_required(role="Admin")
@budgets.reads
@operation("getKey")
@blp.response(200, KeySchema, example=KEY_EXAMPLE)
@problems(403, 404, _404=NOT_FOUND["key"])
def get_key(key_id):
    """A key, without its secret (Admin keys only)."""
    return keys.get_key(key_id)


@blp.route("/keys/<key_id>/rotate", methods=["POST"], endpoint="rotate_key", parameters=[KEY_ID])
@auth.login_required(role="Admin")
@budgets.creates
@operation("rotateKey", responses={201: ISSUED_LINKS})
@blp.arguments(KeyRotateSchema(), example={"grace_seconds": 300})
@blp.response(
    201, IssuedKeySchema, example=ISSUED_EXAMPLE, description="The new key, shown this once.",
    headers={"Location": {"schema": {"type": "string"}, "description": "/keys/<id> of the new key"}},
)
@problems(BODY, 403, 404, 409, _403=ADMIN_ONLY, _404=NOT_FOUND["key"], _422=GRACE_REFUSED, _409={
    "description": ROTATED,
    "example": problem_body(409, "This key is revoked; issue a new one (POST /keys, or `flask keys create`).")})
def rotate_key(args, key_id):
    """Replace a key (Admin keys only): a new key for the same user, scope, label and expiry; the old
    one stops working after grace_seconds."""
    key, api_key = keys.rotate_key(key_id, args["grace_seconds"], by=current_caller().wallet)
    return keys.issued_record(key, api_key), 201, {"Location": f"/keys/{api_key.id}"}


@blp.route("/keys/<key_id>", methods=["DELETE"], endpoint="revoke_key", parameters=[KEY_ID])
@auth.login_required(role="Admin")
@budgets.creates
@operation("revokeKey")
@blp.response(204, description="The key is revoked (or was already): it is refused from now on.")
@problems(403, 404, _403=ADMIN_ONLY, _404=NOT_FOUND["key"])
def revoke_key(key_id):
    """Revoke a key now, even within a rotation's grace (Admin keys only)."""
    if not keys.revoke_key(key_id=key_id, by=current_caller().wallet):
        keys.get_key(key_id)  # 404 for an unknown key; one revoked already stays revoked


@blp.route("/users/<wallet>", endpoint="get_user", parameters=[WALLET])
@auth.login_required
@budgets.reads
@operation("getUser")
@blp.response(200, UserWithCountSchema, example=USER_EXAMPLE)
@problems(404, _404=NOT_FOUND["user"])
def get_user(wallet):
    """A user, by wallet, with the number of identities it created (but removed ones) and its grant: the most a
    sign-in with Ethereum issues it."""
    return users.user_with_count(wallet)


@blp.route("/users/<wallet>", methods=["PATCH"], endpoint="set_user_grant", parameters=[WALLET])
@auth.login_required(role="Admin")
@budgets.creates
@operation("setUserGrant")
@blp.arguments(UserGrantSchema(), example={"grant": "read"})
@blp.response(200, UserWithCountSchema, example={**USER_EXAMPLE, "grant": "read"})
@problems(BODY, 403, 404, _403=ADMIN_ONLY, _404=NOT_FOUND["user"], _422={
    "description": "A grant that is not read or write, or another field; errors names it.",
    "example": problem_body(422, "Invalid fields: grant.", errors={"grant": ["Must be one of: write, read."]})})
def set_user_grant(fields, wallet):
    """Narrow (read) or widen (write) what a sign-in with Ethereum may issue a wallet (Admin write keys only).

    The wallet's keys stay as they are: revoke its write keys too to take write access away now. Issuing the
    wallet a write key (POST /keys) widens its grant as well.
    """
    return users.set_grant(wallet, fields["grant"], by=current_caller().wallet)
