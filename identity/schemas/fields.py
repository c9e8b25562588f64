"""The field types and validators the schemas are built from, and the patterns the OpenAPI document
gives them: each says in the document exactly what it accepts."""

import functools
import re
from datetime import UTC
from urllib.parse import urlsplit

from marshmallow import ValidationError, fields, validate

from ..core import content
from ..core.contract_wallets import MAX_SIGNATURE_BYTES
from ..core.wallets import checksum_wallet
from ..storage.models import MAX_UINT256

# A request line must fit gunicorn's default limit (4094 bytes) even at its longest: q and displayName
# of 100 astral characters, percent-encoded (1200 bytes each), and the cursor that carries both.
MAX_SEARCH_LENGTH = 100

BIGINT_PATTERN = r"^(0|[1-9][0-9]{0,77})$"
CONTENT_ID_PATTERN = r"bafkrei[a-z2-7]{52}"  # unanchored: it appears inside identity ids and ETags
IDENTITY_ID_PATTERN = rf"^did:[a-z0-9]+:ipfs:{CONTENT_ID_PATTERN}$"
IDENTITY_HASH_PATTERN = r"^0x[0-9a-f]{64}$"
WALLET_PATTERN = r"^0x[0-9a-fA-F]{40}$"
# A one-case address needs no checksum; a mixed-case one must pass EIP-55, which no pattern can say:
# the pattern admits every case, and the service refuses a mixed-case address whose checksum fails (422).
CREATOR_PATTERN = WALLET_PATTERN
# A wallet's signature as a client may send it: an ordinary wallet's is 65 bytes (r, s, v), a contract wallet's
# (EIP-1271, EIP-6492) any bytes its contract reads, up to MAX_SIGNATURE_BYTES; and the form the service stores and
# serves: lower case (an ordinary wallet's with v 27 or 28, identity.core.signatures.canonical_signature).
SIGNATURE_PATTERN = r"^0x([0-9a-fA-F]{2})*$"
CANONICAL_SIGNATURE_PATTERN = r"^0x([0-9a-f]{2})*$"
SIGNATURE_MAX_LENGTH = 2 + 2 * MAX_SIGNATURE_BYTES
# The largest integer every JSON parser reads exactly (JavaScript's included): no integer field exceeds it.
MAX_SAFE_INTEGER = 2**53 - 1
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
    of every create. tests/web/test_validation.py checks it against unicodedata for every code point.
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


class BaseUrl(Url):
    """The base URL of a service (a mirror's upstream): an absolute http(s) URL with a host, and no user
    name, password, query or fragment."""

    def __init__(self):
        super().__init__({"https", "http"})
        scheme = "|".join(_any_case(s) for s in sorted(self.schemes))
        self.openapi_pattern = f"^({scheme})://{_URL_HOST}{_URL_PORT}(/[^?#{_control_class()}{_SPACE_NOT_CONTROL}]*)?$"

    def __call__(self, value):
        super().__call__(value)
        if "@" in urlsplit(value).netloc:
            raise ValidationError("Must not carry a user name or password: the upstream is sent `key`.")
        if "?" in value or "#" in value:
            raise ValidationError("Give the base URL, without a query or fragment: its feed is this URL followed by /changes.")
        return value


def documented_validators(converter, field, **kwargs):
    """apispec attribute function: the `openapi_pattern` of this module's validators goes into the document."""
    patterns = [v.openapi_pattern for v in field.validators if hasattr(v, "openapi_pattern")]
    return {"pattern": patterns[0]} if patterns else {}


def safe_integers(converter, field, ret, **kwargs):
    """apispec attribute function: an integer with no documented maximum gets MAX_SAFE_INTEGER, so that no
    integer of the document (flask-smorest's own schemas included) goes past what JavaScript reads exactly."""
    if isinstance(field, fields.Integer) and "maximum" not in ret:
        return {"maximum": MAX_SAFE_INTEGER}
    return {}


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
        # Field by field: a naive copy's isoformat(timespec=...) parses keyword arguments twice (its own
        # and replace()'s), which costs more than the formatting, five times in the answer to a create.
        value = value.astimezone(UTC)
        return "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ" % (  # noqa: UP031 - see above
            value.year, value.month, value.day, value.hour, value.minute, value.second, value.microsecond,
        )


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


class JsonBoolean(fields.Boolean):
    """A JSON true or false, and nothing else: marshmallow's Boolean also takes 1, 0 and "yes" (and 0 is in
    any set that holds False, so truthy/falsy sets cannot keep it out)."""

    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, bool):
            raise self.make_error("invalid", input=value)
        return value


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
