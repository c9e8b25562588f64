"""API keys and their users (identity.core.keys, identity.web.keys)."""

from marshmallow import RAISE, Schema, fields, validate, validates_schema

from .common import UserSchema
from .fields import CREATOR_PATTERN, MAX_SAFE_INTEGER, WALLET_PATTERN, CurationText, Timestamp, Wallet, WholeNumber
from .identities import CURSOR_PATTERN, MAX_CURSOR_LENGTH, MAX_PAGE_ITEMS, identity_list_args_schema

SCOPES = ("write", "read")
KEY_PATTERN = r"^idsk_[A-Za-z0-9_-]{43}$"
MAX_EXPIRES_IN = 10 * 365 * 86_400  # 10 years
MAX_GRACE_SECONDS = 86_400


class KeySchema(Schema):
    """An API key, without its secret."""

    id = fields.String(required=True, metadata={"format": "uuid", "description": "The key's id (not the key)."})
    wallet = fields.String(required=True, metadata={"pattern": WALLET_PATTERN, "description": "Its user's wallet."})
    role = fields.String(required=True, metadata={"enum": ["User", "Admin"], "description": "Its user's role."})
    scope = fields.String(
        required=True,
        metadata={"enum": list(SCOPES), "description": "write: what its user may do; read: GET only."},
    )
    label = fields.String(required=True, allow_none=True, metadata={"description": "What the key is for."})
    created_at = Timestamp(required=True)
    expires_at = Timestamp(required=True, allow_none=True, metadata={"description": "null: it does not expire."})
    last_used_at = Timestamp(
        required=True, allow_none=True, metadata={"description": "Last request it authenticated, to the minute."}
    )
    revoked_at = Timestamp(
        required=True,
        allow_none=True,
        metadata={"description": "When it stops or stopped working: in the future while a rotation's grace lasts."},
    )
    created_by = fields.String(
        required=True, metadata={"description": "The wallet of the key that issued it, or `cli`."}
    )


class IssuedKeySchema(KeySchema):
    key = fields.String(
        required=True,
        metadata={
            "pattern": KEY_PATTERN,
            "description": "The key itself, for the x-api-key header: in this answer only, never again. Store it now.",
        },
    )


class KeyCreateSchema(Schema):
    class Meta:
        unknown = RAISE

    wallet = Wallet(
        required=True,
        metadata={
            "pattern": CREATOR_PATTERN,
            "format": "eip55-address",  # as creator's: a mixed-case address must pass its checksum
            "description": "The key's user; a wallet never seen before becomes a user.",
            "example": "0xd8da6bf26964af9d7eed9e03e53415d37aa96045",
        },
    )
    role = fields.String(
        validate=validate.OneOf(("User", "Admin")),
        metadata={"description": "Role of a new user (default User), or the new role of a known one."},
    )
    scope = fields.String(
        load_default="write",
        validate=validate.OneOf(SCOPES),
        metadata={"description": "write (default) or read: a read key may only read."},
    )
    label = fields.String(
        allow_none=True,
        validate=[validate.Length(1, 128), CurationText(128)],
        metadata={"maxLength": 128, "description": "What the key is for: 1 to 128 characters.", "example": "CI"},
    )
    expires_in = WholeNumber(
        allow_none=True,
        validate=validate.Range(60, MAX_EXPIRES_IN),
        metadata={"description": "Seconds until it expires: 60 to 10 years; absent or null: never."},
    )


class UserGrantSchema(Schema):
    """The body of PATCH /users/<wallet>: what a sign-in with Ethereum may issue the wallet at most."""

    class Meta:
        unknown = RAISE

    grant = fields.String(
        required=True,
        validate=validate.OneOf(SCOPES),
        metadata={"description": "read: the wallet's sign-ins get read keys alone; write: what its role allows."},
    )


class KeyRotateSchema(Schema):
    class Meta:
        unknown = RAISE

    grace_seconds = WholeNumber(
        load_default=0,
        validate=validate.Range(0, MAX_GRACE_SECONDS),
        metadata={"description": "Seconds the old key keeps working (0 to 86,400; default 0: it stops now)."},
    )


class KeyListArgsSchema(Schema):
    """The query parameters of GET /keys."""

    class Meta:
        unknown = RAISE

    wallet = fields.String(
        validate=validate.Regexp(WALLET_PATTERN, error="Not an Ethereum address: expected 0x and 40 hex digits."),
        metadata={"pattern": WALLET_PATTERN, "description": "A wallet, in any case: only its keys."},
    )
    active = fields.Boolean(
        truthy={"true"},
        falsy={"false"},
        metadata={"description": "true: keys that work now (a rotated-out key until its grace ends); false: the others."},
    )
    # Paged as GET /identities is, with the same bounds and the same refusals.
    limit = fields.Integer(
        validate=validate.Range(1, 100),
        metadata={"description": "Items per page, 1 to 100 (default 20; with a cursor, the cursor's).", "example": 20},
    )
    page = fields.Integer(
        validate=validate.Range(1, MAX_PAGE_ITEMS),
        metadata={"description": f"1-based page number (default 1); page × limit may not exceed {MAX_PAGE_ITEMS:,}."},
    )
    cursor = fields.String(
        validate=[
            validate.Length(1, MAX_CURSOR_LENGTH),
            validate.Regexp(CURSOR_PATTERN, error="Not a cursor this service issued; use the next of a page."),
        ],
        metadata={"pattern": CURSOR_PATTERN, "description": "The `next` of a previous page: continues that listing."},
    )

    @validates_schema
    def check_page_bounds(self, data, **kwargs):
        identity_list_args_schema.check_page_bounds(data)


class KeyPageSchema(Schema):
    page = fields.Integer(required=True, metadata={"minimum": 1, "maximum": MAX_PAGE_ITEMS})
    limit = fields.Integer(required=True, metadata={"minimum": 1, "maximum": 100})
    total = fields.Integer(
        required=True, metadata={"minimum": 0, "maximum": MAX_SAFE_INTEGER, "description": "Keys matching the filters."}
    )
    data = fields.List(fields.Nested(KeySchema), required=True, metadata={"description": "Newest first."})
    next = fields.String(
        required=True, allow_none=True, metadata={"description": "Cursor of the next page; null on the last page."}
    )


class MeSchema(Schema):
    user = fields.Nested(UserSchema, required=True)
    key = fields.Nested(KeySchema, required=True, metadata={"description": "The key of this request."})


class UserWithCountSchema(UserSchema):
    grant = fields.String(
        required=True,
        metadata={"enum": list(SCOPES), "description": "The most a sign-in with Ethereum issues the wallet: write, or "
                  "read for a wallet that came into being with a read key or that an Admin narrowed (a write key "
                  "issued to it widens it). What its keys may do is each key's scope."},
    )
    identity_count = fields.Integer(
        required=True,
        metadata={"minimum": 0, "maximum": MAX_SAFE_INTEGER, "description": "Identities it created, but removed ones."},
    )
