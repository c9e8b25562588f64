"""marshmallow schemas: the same classes parse bodies, shape responses and write the OpenAPI document."""

import functools
import re
from datetime import UTC
from urllib.parse import urlsplit

from marshmallow import RAISE, Schema, ValidationError, fields, pre_load, validate, validates_schema

from . import content
from .models import MAX_UINT256
from .wallets import checksum_wallet

BIGINT_PATTERN = r"^(0|[1-9][0-9]{0,77})$"
CONTENT_ID_PATTERN = r"bafkrei[a-z2-7]{52}"  # unanchored: it appears inside identity ids and ETags
IDENTITY_ID_PATTERN = rf"^did:[a-z0-9]+:ipfs:{CONTENT_ID_PATTERN}$"
IDENTITY_HASH_PATTERN = r"^0x[0-9a-f]{64}$"
WALLET_PATTERN = r"^0x[0-9a-fA-F]{40}$"
# A one-case address needs no checksum; a mixed-case one must pass EIP-55, which no pattern can say.
CREATOR_PATTERN = r"^0x([0-9a-f]{40}|[0-9A-F]{40})$"
MAX_URL_LENGTH = 2048

# The characters Python's str.strip() removes (str.isspace()) and Unicode's control characters (Cc),
# as regular-expression classes that read the same in Python, ECMA-262 and Rust (\uXXXX escapes only).
_SPACE_NOT_CONTROL = r" \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
WHITE_SPACE_CLASS = r"\t\n\u000b\u000c\r\u001c-\u001f\u0085" + _SPACE_NOT_CONTROL
_CONTROL_RANGES = ((0x00, 0x1F), (0x7F, 0x9F))
_CONTROL_NAMES = {"\n": "newline", "\r": "carriage return", "\t": "tab"}
_WHITE_SPACE = re.compile(r"\s")


@functools.cache
def _bad_character_search(allowed):
    """A search for control characters (Unicode category Cc) but `allowed`, and lone surrogates (Cs)."""
    return re.compile(f"[{_control_class(allowed)}\ud800-\udfff]").search


def _bad_characters(value, allowed=""):
    """Control characters and lone surrogates (which cannot be encoded as UTF-8).

    A regular expression rather than a look at each character's category: this runs on every field
    of every create. tests/test_validation.py checks it against unicodedata for every code point.
    """
    return _bad_character_search(allowed)(value) is not None


def _control_class(allowed=""):
    """The control characters but `allowed`, as ranges for a regular-expression class."""
    codes = [c for low, high in _CONTROL_RANGES for c in range(low, high + 1) if chr(c) not in allowed]
    ranges, start = [], codes[0]
    for previous, code in zip(codes, codes[1:] + [None], strict=True):
        if code != previous + 1:
            ranges.append(f"\\u{start:04x}" if start == previous else f"\\u{start:04x}-\\u{previous:04x}")
            start = code
    return "".join(ranges)


class TrimmedText(validate.Validator):
    """Length limits and control characters of a value already trimmed by its Text field.

    `openapi_pattern` says the same of the value as sent, before trimming.
    """

    def __init__(self, min_length, max_length, allowed_controls=""):
        if min_length not in (0, 1) or max_length < 2:
            raise ValueError("TrimmedText documents min_length 0 or 1 and max_length 2 or more")
        self.length = validate.Length(min_length or None, max_length)
        self.allowed_controls = "".join(sorted(allowed_controls))
        self.message = "Must not contain control characters."
        if allowed_controls:
            names = [_CONTROL_NAMES[c] for c in allowed_controls]
            self.message = f"Must not contain control characters other than {', '.join(names[:-1])} and {names[-1]}."
        edge = f"[^{_control_class()}{_SPACE_NOT_CONTROL}]"
        inner = f"[^{_control_class(allowed_controls)}]"
        core = f"{edge}(?:{inner}{{0,{max_length - 2}}}{edge})?"
        if min_length == 0:
            core = f"(?:{core})?"
        self.openapi_pattern = f"^[{WHITE_SPACE_CLASS}]*{core}[{WHITE_SPACE_CLASS}]*$"

    def __call__(self, value):
        messages = []
        try:
            self.length(value)
        except ValidationError as error:
            messages.extend(error.messages)
        if _bad_characters(value, self.allowed_controls):
            messages.append(self.message)
        if messages:
            raise ValidationError(messages)
        return value


# Every URL the document describes is one the validator accepts: RFC 3986 characters for the host
# (no user info, no IPv6 literal), a port in range, then anything but white space and control characters.
_URL_HOST = r"[A-Za-z0-9._~!$&'()*+,;=%-]+"
_URL_PORT = r"(:0*([0-9]{1,4}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])?)?"
_URL_REST = rf"([/?#][^{_control_class()}{_SPACE_NOT_CONTROL}]*)?"


def _any_case(word):
    return "".join(f"[{c.upper()}{c}]" for c in word)


class Url(validate.Validator):
    """An absolute URL of one of `schemes`, with a host, no white space, at most 2048 characters."""

    def __init__(self, schemes):
        self.schemes = frozenset(schemes)
        self.listed = ", ".join(sorted(self.schemes))
        scheme = "|".join(_any_case(s) for s in sorted(self.schemes))
        self.openapi_pattern = f"^({scheme})://{_URL_HOST}{_URL_PORT}{_URL_REST}$"

    def __call__(self, value):
        if len(value) > MAX_URL_LENGTH:
            raise ValidationError(f"Longer than {MAX_URL_LENGTH} characters.")
        # \s is str.isspace()'s set in Python's re.
        if _WHITE_SPACE.search(value) or _bad_characters(value):
            raise ValidationError("Must not contain white space or control characters.")
        try:
            parts = urlsplit(value)
            parts.port  # noqa: B018 - raises ValueError for a malformed port
        except ValueError:
            raise ValidationError("Not a valid URL.") from None
        if parts.scheme.lower() not in self.schemes:
            raise ValidationError(f"Must be an absolute URL with scheme {self.listed}.")
        if not parts.netloc or (parts.scheme.lower() != "ipfs" and not parts.hostname):
            raise ValidationError("Must name a host.")
        return value


def documented_validators(converter, field, **kwargs):
    """apispec attribute function: the `openapi_pattern` of this module's validators goes into the document."""
    patterns = [v.openapi_pattern for v in field.validators if hasattr(v, "openapi_pattern")]
    return {"pattern": patterns[0]} if patterns else {}


class Text(fields.String):
    """A string, NFC-normalized and trimmed exactly as content addressing does it; validators see the result.

    What normalization would cost is bounded first: at most `raw_max_length` characters as sent
    (4 per character allowed after normalization, the longest canonical decomposition), and no run of
    more than 30 combining marks (content.check_normalizable).
    """

    def __init__(self, *, raw_max_length, **kwargs):
        super().__init__(**kwargs)
        self.raw_max_length = raw_max_length

    def _deserialize(self, value, attr, data, **kwargs):
        value = super()._deserialize(value, attr, data, **kwargs)
        if len(value) > self.raw_max_length:
            raise ValidationError(f"Longer than {self.raw_max_length} characters as sent.")
        try:
            return content.normalize_text(value)
        except ValueError as error:
            raise ValidationError(str(error)) from None


class Wallet(fields.String):
    """An Ethereum address, returned in its EIP-55 checksum form."""

    def _deserialize(self, value, attr, data, **kwargs):
        try:
            return checksum_wallet(super()._deserialize(value, attr, data, **kwargs))
        except ValueError as error:
            raise ValidationError(str(error)) from None


class BigInt(fields.String):
    """A non-negative integer up to 2**256 - 1, carried as a decimal string."""

    def __init__(self, **kwargs):
        metadata = {"pattern": BIGINT_PATTERN, "example": "0", **kwargs.pop("metadata", {})}
        super().__init__(metadata=metadata, **kwargs)

    def _serialize(self, value, attr, obj, **kwargs):
        return None if value is None else str(value)


class Timestamp(fields.DateTime):
    """RFC 3339 in UTC with microseconds and a Z: 2026-11-21T09:30:00.123456Z."""

    def _serialize(self, value, attr, obj, **kwargs):
        if value is None:
            return None
        return value.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


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
            "One-case hex, or mixed case passing its EIP-55 checksum. Only an Admin key may name another wallet.",
            "pattern": CREATOR_PATTERN,
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
    num_positions = fields.Integer(required=True, metadata={"minimum": 0, "format": "int64"})
    assets_sum = BigInt(required=True)
    conviction_sum = BigInt(required=True)
    conviction_price = BigInt(required=True)
    status = fields.String(required=True, metadata={"example": "complete"})
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
    status = fields.Integer(required=True, metadata={"minimum": 400, "maximum": 599})
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


STATUSES = ("pending", "complete", "removed", "error")
MAX_INT64 = 2**63 - 1
IMMUTABLE = "content is immutable: its id is its address; create a new identity"


def _uint_pattern(maximum):
    """A regular expression for the decimal numbers 0 to `maximum`, no sign and no leading zero.

    So that the document says exactly what the validator accepts (schemathesis checks both ways):
    every shorter number, then each way a number as long as `maximum` stays below it, digit by digit.
    """
    digits = str(maximum)
    width = len(digits)
    alternatives = ["0", f"[1-9][0-9]{{0,{width - 2}}}"]
    for index, digit in enumerate(digits):
        low, high = (1 if index == 0 else 0), int(digit) - 1
        if low <= high:
            rest = width - index - 1
            alternatives.append(f"{digits[:index]}[{low}-{high}]" + (f"[0-9]{{{rest}}}" if rest else ""))
    alternatives.append(digits)
    return "^(" + "|".join(alternatives) + ")$"


UINT256_PATTERN = _uint_pattern(MAX_UINT256)


class UInt256String(fields.String):
    """A bigint sent as a decimal string, 0 to 2**256 - 1; loaded as an int."""

    def __init__(self, **kwargs):
        metadata = {"pattern": UINT256_PATTERN, "maxLength": 78, "example": "0", **kwargs.pop("metadata", {})}
        super().__init__(metadata=metadata, **kwargs)

    def _deserialize(self, value, attr, data, **kwargs):
        text = super()._deserialize(value, attr, data, **kwargs)
        if not re.fullmatch(r"0|[1-9][0-9]*", text):
            raise ValidationError("Must be a decimal string with no sign, no leading zeros and no exponent.")
        if len(text) > 78 or int(text) > MAX_UINT256:
            raise ValidationError("Must be at most 2**256 - 1.")
        return int(text)


class WholeNumber(fields.Integer):
    """A JSON integer. 3.0 is one too, as JSON Schema says; "3" and true are not."""

    def __init__(self, **kwargs):
        super().__init__(strict=True, **kwargs)

    def _deserialize(self, value, attr, data, **kwargs):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        return super()._deserialize(value, attr, data, **kwargs)


class CurationText(validate.Validator):
    """A string of at most 256 characters with no control characters (nor lone surrogates, which
    no database stores)."""

    def __init__(self, max_length=256):
        self.length = validate.Length(max=max_length)
        self.openapi_pattern = f"^[^{_control_class()}]*$"

    def __call__(self, value):
        self.length(value)
        if _bad_characters(value):
            raise ValidationError("Must not contain control characters.")
        return value


class IdentityPatchSchema(Schema):
    """What an Admin may change on an identity; its content is its address and never changes."""

    class Meta:
        unknown = RAISE

    status = fields.String(
        validate=validate.OneOf(STATUSES),
        metadata={"description": "removed: the identity answers 410 Gone until another status is set."},
    )
    vault_id = UInt256String(metadata={"description": "The on-chain atom's vault id."})
    num_positions = WholeNumber(validate=validate.Range(0, MAX_INT64), metadata={"format": "int64"})
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

    seq = fields.Integer(required=True, metadata={"minimum": 1, "format": "int64"})
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
        metadata={"minimum": 0, "format": "int64", "description": "The `after` of the next poll."},
    )


class ChangeFeedArgsSchema(Schema):
    class Meta:
        unknown = RAISE

    after = fields.Integer(
        load_default=0,
        validate=validate.Range(0, MAX_INT64),
        metadata={"description": "Entries with a sequence number above this one (default 0)."},
    )
    limit = fields.Integer(
        load_default=100, validate=validate.Range(1, 1000), metadata={"description": "At most this many."}
    )


# One instance of each, shared by the HTTP route and the Python API (identity.seed), so that both
# validate and serialize with the very same object; it also spares building a schema per request.
identity_create_schema = IdentityCreateSchema()
identity_schema = IdentitySchema()


# --- Browse and search (identity.browse) ---------------------------------------------------------

MAX_PAGE_ITEMS = 10_000  # page × limit; a cursor goes deeper
SORT_KEYS = ("created_at", "updated_at", "display_name", "num_positions")
STATUSES = ("pending", "complete", "removed", "error")
# A request line must fit gunicorn's default limit (4094 bytes) even at its longest: q and displayName
# of 100 astral characters, percent-encoded (1200 bytes each), and the cursor that carries both.
MAX_SEARCH_LENGTH = 100
MAX_CURSOR_LENGTH = 1400
CURSOR_PATTERN = r"^[A-Za-z0-9_.-]+$"


class SearchText(validate.Validator):
    """1 to 100 characters as sent, no control characters (nor lone surrogates)."""

    def __init__(self):
        self.openapi_pattern = f"^[^{_control_class()}]{{1,{MAX_SEARCH_LENGTH}}}$"

    def __call__(self, value):
        if not 1 <= len(value) <= MAX_SEARCH_LENGTH:
            raise ValidationError(f"Length must be between 1 and {MAX_SEARCH_LENGTH}.")
        if _bad_characters(value):
            raise ValidationError("Must not contain control characters.")
        return value


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
    page = fields.Integer(required=True, metadata={"minimum": 1})
    limit = fields.Integer(required=True, metadata={"minimum": 1, "maximum": 100})
    total = fields.Integer(required=True, metadata={"minimum": 0, "description": "Identities matching the filters."})
    data = fields.List(fields.Nested(IdentitySchema), required=True)
    next = fields.String(
        required=True, allow_none=True, metadata={"description": "Cursor of the next page; null on the last page."}
    )


identity_list_args_schema = IdentityListArgsSchema()
identity_page_schema = IdentityPageSchema()
identity_patch_schema = IdentityPatchSchema()

# Build check_normalizable's pattern now, with the app, rather than in the first request that needs it.
content.check_normalizable("\u0301")
