"""marshmallow schemas: the same classes parse bodies, shape responses and write the OpenAPI document."""

from marshmallow import RAISE, Schema, ValidationError, fields, pre_load, validate, validates_schema

from . import content
from .fields import (
    CREATOR_PATTERN,
    IDENTITY_HASH_PATTERN,
    IDENTITY_ID_PATTERN,
    MAX_SAFE_INTEGER,
    MAX_URL_LENGTH,
    WALLET_PATTERN,
    BigInt,
    CurationText,
    JsonBoolean,
    SearchText,
    Text,
    Timestamp,
    TrimmedText,
    UInt256String,
    Url,
    Wallet,
    WholeNumber,
)


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
            # tools that know it; tests/schemathesis_hooks.py teaches it to Schemathesis).
            "format": "eip55-address",
            "example": "0xd8da6bf26964af9d7eed9e03e53415d37aa96045",
        },
    )



class UserSchema(Schema):
    id = fields.String(required=True, metadata={"format": "uuid", "description": "Opaque internal identifier."})
    created_at = Timestamp(required=True)
    updated_at = Timestamp(required=True)
    last_login = Timestamp(
        required=True, allow_none=True, metadata={"description": "Last time the user's key authenticated."}
    )
    api_key = fields.Constant(
        "",
        required=True,
        metadata={"type": "string", "enum": [""], "description": "Always empty: keys are never returned."},
    )
    wallet = fields.String(
        required=True, metadata={"description": "EIP-55 checksum address.", "pattern": WALLET_PATTERN}
    )
    role = fields.String(required=True, metadata={"enum": ["User", "Admin"]})


STATUSES = ("pending", "complete", "removed", "error")


class IdentitySchema(Schema):
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


class StatusSchema(Schema):
    status = fields.String(required=True, metadata={"enum": ["ok"]})


class ProblemSchema(Schema):
    """RFC 9457 problem details."""

    type = fields.String(required=True, metadata={"example": "about:blank"})
    title = fields.String(required=True)
    status = fields.Integer(required=True, metadata={"minimum": 100, "maximum": 599})
    detail = fields.String(required=True)
    errors = fields.Dict(
        keys=fields.String(),
        values=fields.List(fields.String()),
        metadata={"description": "422 and a 400 for query parameters: the messages for each invalid field or parameter."},
    )
    identity_id = fields.String(
        metadata={
            "pattern": IDENTITY_ID_PATTERN,
            "description": "409: the identity that holds this content; 410: the removed identity.",
        }
    )
    request_id = fields.String(metadata={"description": "5xx only: the request id that the logs carry."})


FEEDS = ("normal", "longpoll", "eventsource")
IMMUTABLE = "content is immutable: its id is its address; create a new identity"


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


class ChangeSchema(Schema):
    """An entry of the change log. Entries of removed identities shown to a non-Admin key carry only
    seq, identity_id, at and kind."""

    seq = fields.Integer(required=True, metadata={"minimum": 1, "maximum": MAX_SAFE_INTEGER})
    identity_id = fields.String(required=True, metadata={"pattern": IDENTITY_ID_PATTERN})
    at = Timestamp(required=True)
    wallet = fields.String(
        metadata={"description": "Who acted: the calling key's wallet, or `cli` for the command line."}
    )
    kind = fields.String(required=True, metadata={"enum": ["created", "changed"]})
    fields_ = fields.Dict(
        data_key="fields",
        attribute="fields",
        allow_none=True,
        keys=fields.String(),
        values=fields.Dict(),
        metadata={
            "description": "For a change: each field changed, as {\"before\": value, \"after\": value}; "
            "null for a create.",
            "example": {"status": {"before": "complete", "after": "removed"}},
        },
    )


class ChangeListSchema(Schema):
    data = fields.List(fields.Nested(ChangeSchema), required=True, metadata={"description": "Oldest first."})


class ChangeFeedSchema(ChangeListSchema):
    next_after = fields.Integer(
        required=True,
        metadata={"minimum": 0, "maximum": MAX_SAFE_INTEGER, "description": "The `after` of the next poll."},
    )


class ChangeFeedArgsSchema(Schema):
    class Meta:
        unknown = RAISE

    after = fields.Integer(
        load_default=0,
        validate=validate.Range(0, MAX_SAFE_INTEGER),
        metadata={"description": "Entries with a sequence number above this one (default 0)."},
    )
    limit = fields.Integer(
        load_default=100, validate=validate.Range(1, 1000), metadata={"description": "At most this many."}
    )
    feed = fields.String(
        validate=validate.OneOf(FEEDS),
        metadata={
            "description": "`normal`: the page at once. `longpoll`: the page, waiting up to `timeout` for a first "
            "entry when there is none. `eventsource`: Server-Sent Events, one per entry, as they commit. "
            "Default: `eventsource` when Accept asks for text/event-stream, else `normal`."
        },
    )
    timeout = fields.Integer(
        validate=validate.Range(0, 60_000),
        metadata={
            "description": "Milliseconds. `longpoll`: the longest wait for a first entry (default 30,000), then an "
            "empty page. `eventsource`: the stream ends after this long (default: it stays open)."
        },
    )
    heartbeat = fields.Integer(
        load_default=15_000,
        validate=validate.Range(1_000, 60_000),
        metadata={"description": "`eventsource`: milliseconds between two comment lines that keep the stream alive."},
    )


class LastEventIdSchema(Schema):
    """The header with which an SSE client resumes a stream where it stopped."""

    last_event_id = fields.Integer(
        data_key="Last-Event-ID",
        validate=validate.Range(0, MAX_SAFE_INTEGER),
        metadata={
            "description": "`eventsource`: the `id` of the last event received; the stream starts after it "
            "(and `after` is ignored). SSE clients send it when they reconnect."
        },
    )


# One instance of each, shared by the HTTP route and the Python API (identity.seed), so that both
# validate and serialize with the very same object; it also spares building a schema per request.
identity_create_schema = IdentityCreateSchema()
identity_schema = IdentitySchema()


# --- Browse and search (identity.browse) ---------------------------------------------------------

MAX_PAGE_ITEMS = 10_000  # page × limit; a cursor goes deeper
SORT_KEYS = ("created_at", "updated_at", "display_name", "num_positions")
MAX_CURSOR_LENGTH = 1400
CURSOR_PATTERN = r"^[A-Za-z0-9_.-]+$"


class IdentityListArgsSchema(Schema):
    """The query parameters of GET /identities (and /identities/search)."""

    class Meta:
        unknown = RAISE

    limit = fields.Integer(
        strict=False,
        validate=validate.Range(1, 100),
        metadata={"description": "Items per page, 1 to 100 (default 20; with a cursor, the cursor's).", "example": 20},
    )
    page = fields.Integer(
        validate=validate.Range(1, MAX_PAGE_ITEMS),
        metadata={
            "description": f"1-based page number (default 1); page × limit may not exceed {MAX_PAGE_ITEMS:,}. "
            "Not with cursor: use the cursor to go deeper.",
            "example": 1,
        },
    )
    cursor = fields.String(
        validate=[
            validate.Length(1, MAX_CURSOR_LENGTH),
            validate.Regexp(CURSOR_PATTERN, error="Not a cursor this service issued; use the next of a page."),
        ],
        metadata={
            "pattern": CURSOR_PATTERN,
            "description": "The `next` of a previous page: continues that listing (same filters and order) "
            "exactly, however deep. Filters sent with it must equal the cursor's.",
        },
    )
    sortBy = fields.String(
        validate=validate.OneOf(SORT_KEYS),
        metadata={"description": "Sort key (default created_at; with q, best match first)."},
    )
    direction = fields.String(
        validate=validate.OneOf(("desc", "asc")), metadata={"description": "desc (default) or asc."}
    )
    creator = fields.String(
        validate=validate.Regexp(WALLET_PATTERN, error="Not an Ethereum address: expected 0x and 40 hex digits."),
        metadata={
            "description": "A wallet address, in any case: only that creator's identities.",
            "pattern": WALLET_PATTERN,
            "example": "0xd8da6bf26964af9d7eed9e03e53415d37aa96045",
        },
    )
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
    next = fields.String(
        required=True, allow_none=True, metadata={"description": "Cursor of the next page; null on the last page."}
    )


identity_list_args_schema = IdentityListArgsSchema()
identity_page_schema = IdentityPageSchema()
identity_patch_schema = IdentityPatchSchema()


# --- Keys and users (identity.keyring, identity.api.keys) ----------------------------------------

SCOPES = ("write", "read")
KEY_PATTERN = r"^idsk_[A-Za-z0-9_-]{43}$"
MAX_EXPIRES_IN = 10 * 365 * 86_400  # 10 years
MAX_GRACE_SECONDS = 86_400
MAX_SAFE_INTEGER = 2**53 - 1


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
    identity_count = fields.Integer(
        required=True,
        metadata={"minimum": 0, "maximum": MAX_SAFE_INTEGER, "description": "Identities it created, but removed ones."},
    )

# Build check_normalizable's pattern now, with the app, rather than in the first request that needs it.
content.check_normalizable("\u0301")


# --- Webhooks (identity.webhooks, identity.delivery) ----------------------------------------------

MAX_SEQ = 2**53 - 1  # a sequence number is a JSON integer every client reads exactly
WEBHOOK_URL_DESCRIPTION = (
    "Where each entry is POSTed: https or http, at most 2048 characters. A host that is or resolves to a "
    "loopback, private, link-local, multicast or reserved address is refused (unless the service allows "
    "private addresses); redirects are not followed."
)


def _webhook_url(**kwargs):
    return Text(
        raw_max_length=4 * MAX_URL_LENGTH,
        validate=Url({"https", "http"}),
        metadata={"description": WEBHOOK_URL_DESCRIPTION, "maxLength": MAX_URL_LENGTH,
                  "example": "https://hooks.example.com/identity"},
        **kwargs,
    )


def _webhook_description(**kwargs):
    return Text(
        raw_max_length=4 * 1024,
        allow_none=True,
        validate=TrimmedText(0, 1024),
        metadata={"description": "A note for people: at most 1024 characters.", "example": "Search index"},
        **kwargs,
    )


class WebhookCreateSchema(Schema):
    class Meta:
        unknown = RAISE

    url = _webhook_url(required=True)
    description = _webhook_description()
    after = WholeNumber(
        validate=validate.Range(0, MAX_SEQ),
        metadata={"description": "Deliver the entries with a seq above this one (default: the log's head, so "
                  "only entries to come). 0 delivers the whole log.", "example": 0},
    )


class WebhookPatchSchema(Schema):
    class Meta:
        unknown = RAISE

    url = _webhook_url()
    description = _webhook_description()
    active = JsonBoolean(
        metadata={"description": "false pauses deliveries; true resumes them where they stopped (after a "
                  "give-up too), retry state cleared."}
    )

    @validates_schema
    def refuse_nothing(self, data, **kwargs):
        if not data:
            raise ValidationError("Name at least one field to change: url, description, active.", field_name="body")


class WebhookSchema(Schema):
    """A webhook, without its secret."""

    id = fields.String(required=True, metadata={"format": "uuid"})
    url = fields.String(required=True)
    description = fields.String(required=True, allow_none=True)
    active = fields.Boolean(required=True, metadata={"description": "false: paused, or given up after failing."})
    position = fields.Integer(
        required=True,
        metadata={"minimum": 0, "maximum": MAX_SEQ, "description": "The seq of the last entry delivered."},
    )
    attempts = fields.Integer(
        required=True, metadata={"minimum": 0, "maximum": MAX_SEQ, "description": "Failed attempts at the next entry."}
    )
    failing_since = Timestamp(required=True, allow_none=True, metadata={"description": "First failure of the streak."})
    next_attempt_at = Timestamp(required=True, allow_none=True, metadata={"description": "When the next retry is due."})
    created_at = Timestamp(required=True)
    updated_at = Timestamp(required=True)


class WebhookCreatedSchema(WebhookSchema):
    secret = fields.String(
        required=True,
        metadata={"pattern": "^whsec_[A-Za-z0-9+/]{43}=$",
                  "description": "Signs every delivery (Standard Webhooks). Shown this once: store it now."},
    )


class WebhookListSchema(Schema):
    data = fields.List(fields.Nested(WebhookSchema), required=True, metadata={"description": "Oldest first."})


class DeliverySchema(Schema):
    seq = fields.Integer(required=True, metadata={"minimum": 1, "maximum": MAX_SEQ})
    attempt = fields.Integer(required=True, metadata={"minimum": 1, "maximum": MAX_SEQ})
    at = Timestamp(required=True)
    duration_ms = fields.Integer(required=True, metadata={"minimum": 0, "maximum": MAX_SEQ})
    status = fields.Integer(
        required=True, allow_none=True, metadata={"minimum": 100, "maximum": 999, "description": "null: no answer."}
    )
    error = fields.String(required=True, allow_none=True, metadata={"description": "null: delivered (a 2xx)."})


class DeliveryListSchema(Schema):
    data = fields.List(fields.Nested(DeliverySchema), required=True, metadata={"description": "Newest first."})


# --- Export and import (identity.portable) -------------------------------------------------------


class IdentityImportSchema(IdentityCreateSchema):
    """A line of `identities import`: an exported Identity. The content fields are validated and
    normalized as a create's are; the ids are checked against the content by identity.portable."""

    id = fields.UUID(required=True)
    identity_id = fields.String(required=True, validate=validate.Regexp(IDENTITY_ID_PATTERN))
    identity_hash = fields.String(required=True, validate=validate.Regexp(IDENTITY_HASH_PATTERN))
    creator = Wallet(required=True)
    vault_id = UInt256String(required=True)
    corpora_id = fields.String(required=True, allow_none=True, validate=CurationText())
    semantic = fields.String(required=True, allow_none=True, validate=CurationText())
    created_at = fields.AwareDateTime(required=True)
    updated_at = fields.AwareDateTime(required=True)
    num_positions = WholeNumber(required=True, validate=validate.Range(0, MAX_SAFE_INTEGER))
    assets_sum = UInt256String(required=True)
    conviction_sum = UInt256String(required=True)
    conviction_price = UInt256String(required=True)
    status = fields.String(required=True, validate=validate.OneOf(STATUSES))
    isUser = fields.Boolean(attribute="is_user", required=True, truthy={True}, falsy={False})
    user_conviction = UInt256String(required=True)
    user_conviction_value = UInt256String(required=True)


identity_import_schema = IdentityImportSchema()
