"""Identities: create, read, change (an Admin's curation), browse and search."""

import orjson
from marshmallow import RAISE, Schema, ValidationError, fields, pre_load, validate, validates_schema
from werkzeug.http import generate_etag

from ..core import content
from .common import RecordSchema, UserSchema
from .fields import (
    CANONICAL_SIGNATURE_PATTERN,
    CREATOR_PATTERN,
    IDENTITY_HASH_PATTERN,
    IDENTITY_ID_PATTERN,
    MAX_SAFE_INTEGER,
    MAX_URL_LENGTH,
    SIGNATURE_MAX_LENGTH,
    SIGNATURE_PATTERN,
    BigInt,
    CurationText,
    SearchText,
    Text,
    Timestamp,
    TrimmedText,
    UInt256String,
    Url,
    Wallet,
    WholeNumber,
    wallet_filter,
)
from .paging import MAX_PAGE_ITEMS, cursor_field, limit_field, next_field

STATUSES = ("pending", "complete", "removed", "error")

IMMUTABLE = "content is immutable: its id is its address; create a new identity"


class IdentityCreateSchema(Schema):
    class Meta:
        unknown = RAISE

    display_name = Text(
        raw_max_length=4 * 256,
        required=True,
        validate=TrimmedText(1, 256),
        metadata={
            "description": "Name of the Identity: 1 to 256 characters after NFC normalization and trimming, "
            "no control characters.",
            "example": "Vitalik Buterin",
        },
    )
    description = Text(
        raw_max_length=4 * 4096,
        allow_none=True,
        validate=TrimmedText(0, 4096, allowed_controls="\n\r\t"),
        metadata={
            "description": "At most 4096 characters after NFC normalization and trimming; no control characters "
            "but newline, carriage return and tab.",
            "example": "Co-founder of Ethereum.",
        },
    )
    image = Text(
        raw_max_length=4 * MAX_URL_LENGTH,
        allow_none=True,
        validate=Url({"https", "http", "ipfs"}),
        metadata={
            "description": "URL of an image: https, http or ipfs, at most 2048 characters, no white space.",
            "maxLength": MAX_URL_LENGTH,
            "example": "https://example.com/avatar.png",
        },
    )
    external_reference = Text(
        raw_max_length=4 * MAX_URL_LENGTH,
        allow_none=True,
        validate=Url({"https", "http"}),
        metadata={
            "description": "URL of a link: https or http, at most 2048 characters, no white space.",
            "maxLength": MAX_URL_LENGTH,
            "example": "https://vitalik.eth.limo",
        },
    )
    creator = Wallet(
        allow_none=True,
        metadata={
            "description": "Ethereum address of the creator; defaults to the wallet of the calling key. "
            "One-case hex, or mixed case passing its EIP-55 checksum (a failing checksum is 422). Only an Admin key may name another wallet.",
            "pattern": CREATOR_PATTERN,
            # What no pattern says: a mixed-case address passes its EIP-55 checksum (an annotation for
            # tools that know it; tests/common/schemathesis_hooks.py teaches it to Schemathesis).
            "format": "eip55-address",
            "example": "0xd8da6bf26964af9d7eed9e03e53415d37aa96045",
        },
    )
    signature = fields.String(
        allow_none=True,
        metadata={
            "description": "The creator's EIP-712 signature (eth_signTypedData_v4) of the typed data that POST "
            "/identity/preview answers for this body: it must recover to the creator, or, for a contract wallet "
            "(EIP-1271, EIP-6492), be accepted by it on signature_chain_id (else 422). With it, an Admin key "
            "creates for the wallet that signed. Stored and served as creator_signature.",
            "pattern": SIGNATURE_PATTERN, "maxLength": SIGNATURE_MAX_LENGTH,
        },
    )
    signature_chain_id = WholeNumber(
        allow_none=True, validate=validate.Range(1, MAX_SAFE_INTEGER),
        metadata={
            "description": "The EIP-155 chain id on which a contract wallet's signature holds (its isValidSignature "
            "is asked there). Not needed for an ordinary wallet's signature, which holds on every chain. Served as "
            "creator_signature_chain_id.",
            "example": 8453,
        },
    )


class IdentitySchema(RecordSchema):
    """Every key is always present, null where a value is absent."""

    id = fields.String(required=True, metadata={"format": "uuid", "description": "Opaque internal identifier."})
    identity_id = fields.String(
        required=True,
        metadata={"pattern": IDENTITY_ID_PATTERN, "description": "did:<namespace>:ipfs:<content_id>."},
    )
    identity_hash = fields.String(
        required=True,
        metadata={"pattern": IDENTITY_HASH_PATTERN, "description": "0x + hex keccak-256 of ipfs://<content_id>."},
    )
    vault_id = BigInt(required=True)
    display_name = fields.String(required=True)
    description = fields.String(required=True, allow_none=True)
    image = fields.String(required=True, allow_none=True)
    corpora_id = fields.String(required=True, allow_none=True)
    semantic = fields.String(required=True, allow_none=True)
    external_reference = fields.String(required=True, allow_none=True)
    creator = fields.Nested(UserSchema, required=True)
    creator_signature = fields.String(
        required=True,
        allow_none=True,
        metadata={
            "pattern": CANONICAL_SIGNATURE_PATTERN,
            "description": "The creator's EIP-712 signature of typed data naming the content_id (domain "
            '{"name": "Identity", "version": "1"}, type Identity {contentId: string}): ethers\' verifyTypedData '
            "or eth-account recovers the creator's wallet from it; a contract wallet's is checked by viem's "
            "verifyTypedData on creator_signature_chain_id. null: the create was not signed.",
        },
    )
    creator_signature_chain_id = fields.Integer(
        required=True, allow_none=True,
        metadata={"minimum": 1, "maximum": MAX_SAFE_INTEGER,
                  "description": "The chain on which a contract wallet's creator_signature holds (EIP-1271, EIP-6492); "
                  "null for an ordinary wallet's signature, which holds on every chain, and when the create was not "
                  "signed."},
    )
    created_at = Timestamp(required=True)
    updated_at = Timestamp(required=True)
    num_positions = fields.Integer(required=True, metadata={"minimum": 0, "maximum": MAX_SAFE_INTEGER})
    assets_sum = BigInt(required=True)
    conviction_sum = BigInt(required=True)
    conviction_price = BigInt(required=True)
    status = fields.String(required=True, metadata={"enum": list(STATUSES), "example": "complete"})
    isUser = fields.Boolean(attribute="is_user", required=True)
    user_conviction = BigInt(required=True)
    user_conviction_value = BigInt(required=True)


class IdentityContentSchema(Schema):
    """An identity's content: the fields its content_id is computed from, as RFC 8785 canonical JSON."""

    display_name = fields.String(required=True)
    description = fields.String()
    image = fields.String()
    external_reference = fields.String()


class IdentityPatchSchema(Schema):
    """What an Admin may change on an identity; its content is its address and never changes."""

    class Meta:
        unknown = RAISE

    status = fields.String(
        validate=validate.OneOf(STATUSES),
        metadata={"description": "removed: the identity answers 410 Gone until another status is set."},
    )
    vault_id = UInt256String(metadata={"description": "The on-chain atom's vault id."})
    num_positions = WholeNumber(validate=validate.Range(0, MAX_SAFE_INTEGER))
    assets_sum = UInt256String()
    conviction_sum = UInt256String()
    conviction_price = UInt256String()
    corpora_id = fields.String(
        allow_none=True, validate=CurationText(), metadata={"maxLength": 256, "description": "null clears it."}
    )
    semantic = fields.String(
        allow_none=True, validate=CurationText(), metadata={"maxLength": 256, "description": "null clears it."}
    )

    @pre_load
    def refuse_content(self, data, **kwargs):
        if isinstance(data, dict):
            named = sorted(set(data) & set(content.CONTENT_FIELDS))
            if named:
                raise ValidationError({name: [IMMUTABLE] for name in named})
        return data

    @validates_schema
    def refuse_nothing(self, data, **kwargs):
        if not data:
            raise ValidationError(
                "Name at least one field to change: " + ", ".join(self.fields) + ".", field_name="body"
            )


# --- Browse and search (identity.core.browse) ---------------------------------------------------------

SORT_KEYS = ("created_at", "updated_at", "display_name", "num_positions")


class IdentityListArgsSchema(Schema):
    """The query parameters of GET /identities (and /identities/search)."""

    class Meta:
        unknown = RAISE

    limit = limit_field()
    page = fields.Integer(
        validate=validate.Range(1, MAX_PAGE_ITEMS),
        metadata={
            "description": f"1-based page number (default 1); page × limit may not exceed {MAX_PAGE_ITEMS:,}. "
            "Not with cursor: use the cursor to go deeper.",
            "example": 1,
        },
    )
    cursor = cursor_field(
        "The `next` of a previous page: continues that listing (same filters and order) exactly, however deep. "
        "Filters sent with it must equal the cursor's."
    )
    sortBy = fields.String(
        validate=validate.OneOf(SORT_KEYS),
        metadata={"description": "Sort key (default created_at; with q, best match first)."},
    )
    direction = fields.String(
        validate=validate.OneOf(("desc", "asc")), metadata={"description": "desc (default) or asc."}
    )
    creator = wallet_filter("A wallet address, in any case: only that creator's identities.",
                            example="0xd8da6bf26964af9d7eed9e03e53415d37aa96045")
    status = fields.String(
        validate=validate.OneOf(STATUSES),
        metadata={"description": "Only identities in this status; `removed` needs an Admin key."},
    )
    displayName = fields.String(
        validate=SearchText(),
        metadata={"description": "Case-insensitive substring of display_name (compared after NFC)."},
    )
    q = fields.String(
        validate=SearchText(),
        metadata={
            "description": "Full-text search over display_name and description: every word must match the "
            "start of a word, case and accents ignored. Without sortBy, best match first (display_name "
            "matches before description matches, then newest first). A q without letters or digits filters nothing."
        },
    )

    @validates_schema
    def check_page_bounds(self, data, **kwargs):
        page = data.get("page")
        if page is None:
            return
        if "cursor" in data:
            raise ValidationError("Send either page or cursor, not both.", "page")
        limit = data.get("limit", 20)
        if page * limit > MAX_PAGE_ITEMS:
            raise ValidationError(
                f"page × limit may not exceed {MAX_PAGE_ITEMS:,} (here {page * limit:,}); use cursor to go deeper.",
                "page",
            )


class IdentityPageSchema(Schema):
    page = fields.Integer(required=True, metadata={"minimum": 1, "maximum": MAX_PAGE_ITEMS})
    limit = fields.Integer(required=True, metadata={"minimum": 1, "maximum": 100})
    total = fields.Integer(
        required=True, metadata={"minimum": 0, "maximum": MAX_SAFE_INTEGER, "description": "Identities matching the filters."}
    )
    data = fields.List(fields.Nested(IdentitySchema), required=True)
    next = next_field()


# One instance of each, shared by the HTTP routes and the Python API (identity.seed), so that both
# validate and serialize with the very same object; it also spares building a schema per request.
identity_create_schema = IdentityCreateSchema()
identity_schema = IdentitySchema()
identity_list_args_schema = IdentityListArgsSchema()
identity_page_schema = IdentityPageSchema()
identity_patch_schema = IdentityPatchSchema()



def identity_body(identity):
    """The JSON body of `identity` (a record as identities.identity_record makes it, or an object with its
    attributes) as GET and PATCH /identity/<id> serve it, and its ETag: (bytes, the unquoted tag).

    The one place an identity's ETag is made: a hash of the exact body (werkzeug's generate_etag), since
    the body embeds its creator, so a tag of the content alone would vouch for a body that is no longer
    the one served. GET's If-None-Match, PATCH's If-Match and the console's Take down and Restore
    compare it. The bytes are orjson's, as the app's JSON provider writes them.
    """
    body = orjson.dumps(identity_schema.dump(identity))
    return body, generate_etag(body)


# Build check_normalizable's pattern now, with the app, rather than in the first request that needs it.
content.check_normalizable("\u0301")
