"""marshmallow schemas: the same classes parse bodies, shape responses and write the OpenAPI document."""

import unicodedata
from datetime import UTC
from urllib.parse import urlsplit

from marshmallow import RAISE, Schema, ValidationError, fields, validate

from .content import normalize_text
from .wallets import checksum_wallet

BIGINT_PATTERN = r"^(0|[1-9][0-9]{0,77})$"
MAX_URL_LENGTH = 2048
_ALLOWED_IN_DESCRIPTION = frozenset("\n\r\t")


def _bad_characters(value, allowed=frozenset()):
    """Control characters and lone surrogates (which cannot be encoded as UTF-8)."""
    return any(unicodedata.category(c) in ("Cc", "Cs") and c not in allowed for c in value)


class Text(fields.String):
    """A string, NFC-normalized and trimmed exactly as content addressing does it."""

    def _deserialize(self, value, attr, data, **kwargs):
        return normalize_text(super()._deserialize(value, attr, data, **kwargs))


def _no_control_characters(value):
    if _bad_characters(value):
        raise ValidationError("Must not contain control characters.")


def _description_characters(value):
    if _bad_characters(value, _ALLOWED_IN_DESCRIPTION):
        raise ValidationError("Must not contain control characters other than newline, carriage return and tab.")


def url_validator(schemes):
    """An absolute URL of one of `schemes`, with a host, no white space, at most 2048 characters."""
    schemes = frozenset(schemes)
    listed = ", ".join(sorted(schemes))

    def check(value):
        if len(value) > MAX_URL_LENGTH:
            raise ValidationError(f"Longer than {MAX_URL_LENGTH} characters.")
        if any(c.isspace() for c in value) or _bad_characters(value):
            raise ValidationError("Must not contain white space or control characters.")
        try:
            parts = urlsplit(value)
            parts.port  # noqa: B018 - raises ValueError for a malformed port
        except ValueError:
            raise ValidationError("Not a valid URL.") from None
        if parts.scheme.lower() not in schemes:
            raise ValidationError(f"Must be an absolute URL with scheme {listed}.")
        if not parts.netloc or (parts.scheme.lower() != "ipfs" and not parts.hostname):
            raise ValidationError("Must name a host.")

    return check


class Wallet(fields.String):
    """An Ethereum address, returned in its EIP-55 checksum form."""

    def _deserialize(self, value, attr, data, **kwargs):
        try:
            return checksum_wallet(super()._deserialize(value, attr, data, **kwargs))
        except ValueError as error:
            raise ValidationError(str(error)) from None


class BigInt(fields.Field):
    """A non-negative integer up to 2**256 - 1, carried as a decimal string."""

    def _serialize(self, value, attr, obj, **kwargs):
        return None if value is None else str(value)

    def _jsonschema_type_mapping(self):  # pragma: no cover - used by apispec
        return {"type": "string", "pattern": BIGINT_PATTERN}


class Timestamp(fields.DateTime):
    """RFC 3339 in UTC with microseconds and a Z: 2026-11-21T09:30:00.123456Z."""

    def _serialize(self, value, attr, obj, **kwargs):
        if value is None:
            return None
        if value.tzinfo is not None:
            value = value.astimezone(UTC)
        return value.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class IdentityCreateSchema(Schema):
    class Meta:
        unknown = RAISE

    display_name = Text(
        required=True,
        validate=[validate.Length(1, 256), _no_control_characters],
        metadata={"description": "Name of the Identity.", "example": "Vitalik Buterin"},
    )
    description = Text(
        allow_none=True,
        validate=[validate.Length(max=4096), _description_characters],
        metadata={"example": "Co-founder of Ethereum."},
    )
    image = Text(
        allow_none=True,
        validate=url_validator({"https", "http", "ipfs"}),
        metadata={"description": "URL of an image.", "example": "https://example.com/avatar.png"},
    )
    external_reference = Text(
        allow_none=True,
        validate=url_validator({"https", "http"}),
        metadata={"description": "URL of a link.", "example": "https://vitalik.eth.limo"},
    )
    creator = Wallet(
        allow_none=True,
        metadata={
            "description": "Ethereum address of the creator; defaults to the wallet of the calling key.",
            "example": "0xd8dA6BF26964aF9D7eEd9e03E53415D37aA96045",
        },
    )


class UserSchema(Schema):
    id = fields.String()
    created_at = Timestamp()
    updated_at = Timestamp()
    last_login = Timestamp(allow_none=True)
    api_key = fields.Constant("", metadata={"description": "Always empty: keys are never returned."})
    wallet = fields.String(metadata={"description": "EIP-55 checksum address."})
    role = fields.String(metadata={"enum": ["User", "Admin"]})


class IdentitySchema(Schema):
    id = fields.String()
    identity_id = fields.String()
    identity_hash = fields.String()
    vault_id = BigInt()
    display_name = fields.String()
    description = fields.String(allow_none=True)
    image = fields.String(allow_none=True)
    corpora_id = fields.String(allow_none=True)
    semantic = fields.String(allow_none=True)
    external_reference = fields.String(allow_none=True)
    creator = fields.Nested(UserSchema, allow_none=True)
    created_at = Timestamp()
    updated_at = Timestamp()
    num_positions = fields.Integer()
    assets_sum = BigInt()
    conviction_sum = BigInt()
    conviction_price = BigInt()
    status = fields.String(allow_none=True)
    isUser = fields.Boolean(attribute="is_user", allow_none=True)
    user_conviction = BigInt(allow_none=True)
    user_conviction_value = BigInt(allow_none=True)


class StatusSchema(Schema):
    status = fields.String(metadata={"example": "ok"})


class ProblemSchema(Schema):
    type = fields.String()
    title = fields.String()
    status = fields.Integer()
    detail = fields.String()
    errors = fields.Dict(keys=fields.String(), values=fields.List(fields.String()))
    identity_id = fields.String()
    request_id = fields.String()


# One instance of each, shared by the HTTP route and the Python API (identity.seed), so that both
# validate and serialize with the very same object; it also spares building a schema per request.
identity_create_schema = IdentityCreateSchema()
identity_schema = IdentitySchema()
