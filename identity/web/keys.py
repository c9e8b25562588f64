"""Keys and users over HTTP: the caller's own key (/me), the Admin routes for keys (/keys), and users.

A key of scope `read` is refused (403) on every POST and PATCH by identity.web.auth, before any view
runs; it may still revoke itself (DELETE /me/key).
"""

from datetime import datetime
from types import SimpleNamespace

from marshmallow import RAISE

from ..core import keys, users
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
from .answers import BODY, answers
from .auth import access, current_caller

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
@blp.route("/me", endpoint="get_me")
@access(budgets.reads)
@blp.doc(operationId="getMe")
@blp.response(200, MeSchema, example=ME_EXAMPLE)
def get_me():
    """The calling key and its user."""
    return keys.me(current_caller())


@blp.route("/me/key/rotate", methods=["POST"], endpoint="rotate_my_key")
@access(budgets.creates)
@blp.doc(operationId="rotateMyKey", responses=answers(BODY, "ReadOnlyKey", "MyKeyRotated", "GraceRefused"))
@blp.arguments(KeyRotateSchema(), example={"grace_seconds": 300})
@blp.response(201, IssuedKeySchema, example=ISSUED_EXAMPLE, description="The new key, shown this once.")
def rotate_my_key(args):
    """Replace the calling key: a new key for the same user, scope, label and expiry; the calling key
    stops working after grace_seconds."""
    caller = current_caller()
    key, api_key = keys.rotate_key(caller.key_id, args["grace_seconds"], by=caller.wallet)
    return keys.issued_record(key, api_key), 201


@blp.route("/me/key", methods=["DELETE"], endpoint="revoke_my_key")
@access(budgets.creates)
@blp.doc(operationId="revokeMyKey")
@blp.response(204, description="The calling key is revoked: it is refused from now on.")
def revoke_my_key():
    """Revoke the calling key (a read-only key may too)."""
    caller = current_caller()
    keys.revoke_key(key_id=caller.key_id, by=caller.wallet)


@blp.route("/keys", methods=["POST"], endpoint="create_key")
@access(budgets.creates, role="Admin")
@blp.doc(operationId="createKey", responses=answers({201: ISSUED_LINKS}, BODY, "KeysAdminOnly", "GraceRefused"))
@blp.arguments(KeyCreateSchema(), example={"wallet": _WALLET, "scope": "read", "label": "status page"})
@blp.response(
    201, IssuedKeySchema, example=ISSUED_EXAMPLE, description="The key, shown this once.",
    headers={"Location": {"schema": {"type": "string"}, "description": "/keys/<id>"}},
)
def create_key(fields):
    """Issue a key for a wallet (Admin keys only); a wallet never seen before becomes a user."""
    options = {name: fields.get(name) for name in ("scope", "label", "expires_in")}
    key, api_key = keys.issue_key(fields["wallet"], fields.get("role"), **options, created_by=current_caller().wallet)
    return keys.issued_record(key, api_key), 201, {"Location": f"/keys/{api_key.id}"}


@blp.route("/keys", endpoint="list_keys")
@access(budgets.reads, role="Admin")
@blp.doc(operationId="listKeys", responses=answers("InvalidKeyQuery", "AdminOnly"))
@blp.arguments(KeyListArgsSchema(), location="query", error_status_code=400, unknown=RAISE)
@blp.response(200, KeyPageSchema, example=PAGE_EXAMPLE)
def list_keys(args):
    """List keys without their secrets, newest first (Admin keys only): by wallet, live or not, paginated."""
    return keys.list_keys(args)


@blp.route("/keys/<key_id>", endpoint="get_key", parameters=[KEY_ID])
@access(budgets.reads, role="Admin")
@blp.doc(operationId="getKey", responses=answers("AdminOnly", "KeyNotFound"))
@blp.response(200, KeySchema, example=KEY_EXAMPLE)
def get_key(key_id):
    """A key, without its secret (Admin keys only)."""
    return keys.get_key(key_id)


@blp.route("/keys/<key_id>/rotate", methods=["POST"], endpoint="rotate_key", parameters=[KEY_ID])
@access(budgets.creates, role="Admin")
@blp.doc(operationId="rotateKey", responses=answers(
    {201: ISSUED_LINKS}, BODY, "KeysAdminOnly", "KeyNotFound", "KeyRotated", "GraceRefused"))
@blp.arguments(KeyRotateSchema(), example={"grace_seconds": 300})
@blp.response(
    201, IssuedKeySchema, example=ISSUED_EXAMPLE, description="The new key, shown this once.",
    headers={"Location": {"schema": {"type": "string"}, "description": "/keys/<id> of the new key"}},
)
def rotate_key(args, key_id):
    """Replace a key (Admin keys only): a new key for the same user, scope, label and expiry; the old
    one stops working after grace_seconds."""
    key, api_key = keys.rotate_key(key_id, args["grace_seconds"], by=current_caller().wallet)
    return keys.issued_record(key, api_key), 201, {"Location": f"/keys/{api_key.id}"}


@blp.route("/keys/<key_id>", methods=["DELETE"], endpoint="revoke_key", parameters=[KEY_ID])
@access(budgets.creates, role="Admin")
@blp.doc(operationId="revokeKey", responses=answers("KeysAdminOnly", "KeyNotFound"))
@blp.response(204, description="The key is revoked (or was already): it is refused from now on.")
def revoke_key(key_id):
    """Revoke a key now, even within a rotation's grace (Admin keys only)."""
    if not keys.revoke_key(key_id=key_id, by=current_caller().wallet):
        keys.get_key(key_id)  # 404 for an unknown key; one revoked already stays revoked


@blp.route("/users/<wallet>", endpoint="get_user", parameters=[WALLET])
@access(budgets.reads)
@blp.doc(operationId="getUser", responses=answers("UserNotFound"))
@blp.response(200, UserWithCountSchema, example=USER_EXAMPLE)
def get_user(wallet):
    """A user, by wallet, with the number of identities it created (but removed ones) and its grant: the most a
    sign-in with Ethereum issues it."""
    return users.user_with_count(wallet)


@blp.route("/users/<wallet>", methods=["PATCH"], endpoint="set_user_grant", parameters=[WALLET])
@access(budgets.creates, role="Admin")
@blp.doc(operationId="setUserGrant", responses=answers(BODY, "KeysAdminOnly", "UserNotFound", "GrantRefused"))
@blp.arguments(UserGrantSchema(), example={"grant": "read"})
@blp.response(200, UserWithCountSchema, example={**USER_EXAMPLE, "grant": "read"})
def set_user_grant(fields, wallet):
    """Narrow (read) or widen (write) what a sign-in with Ethereum may issue a wallet (Admin write keys only).

    The wallet's keys stay as they are: revoke its write keys too to take write access away now. Issuing the
    wallet a write key (POST /keys) widens its grant as well.
    """
    return users.set_grant(wallet, fields["grant"], by=current_caller().wallet)
