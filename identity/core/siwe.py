"""Sign-In with Ethereum (EIP-4361): the message a wallet signs, read line by line as the EIP's ABNF
says and written from its fields; its time checks; and the wallet that signed it. The nonces this service
issues for it are identity.core.nonces'.

Any text is read with bounded work: the length is capped before anything else, every pattern is a
plain run of one character class, and the fields are taken in one pass over the lines.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone

from eth_account.messages import encode_defunct
from eth_utils import is_checksum_address, to_checksum_address

from identity.core import uris
from identity.core.signatures import recover_signer

# The EIP leaves maximum lengths to implementers; a message with a few resources is well under 1 KiB.
MAX_MESSAGE_LENGTH = 8192
PREAMBLE = " wants you to sign in with your Ethereum account:"
VERSION = "1"
MIN_NONCE_LENGTH = 8
NONCE_ALPHABET = string.ascii_letters + string.digits
# The length of every nonce this service issues (identity.core.nonces): 46 letters and digits carry 104 random
# bits, its expiry and its proof.
NONCE_LENGTH = 46
# EIP-155 chain ids are unsigned 256-bit integers: at most 78 digits, and int() never sees thousands.
MAX_CHAIN_ID = 2**256 - 1
OPTIONAL_FIELDS = ("Expiration Time", "Not Before", "Request ID", "Resources")

# What a statement may hold: RFC 3986's reserved and unreserved characters, and spaces.
_STATEMENT = uris.UNRESERVED | uris.RESERVED | {" "}
_DIGITS = frozenset(string.digits)
_NONCE = frozenset(NONCE_ALPHABET)
_ADDRESS = re.compile(r"0x[0-9a-fA-F]{40}")
# RFC 3339's date-time ("T" and "Z" may be lower case, its section 5.6 says).
_DATE_TIME = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt]([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]+))?"
    r"(?:[Zz]|([+-])([0-9]{2}):([0-9]{2}))"
)
_EXAMPLE_TIME = "2021-09-30T16:25:24Z"
# Labels a misplaced line is recognised by, to say which line was found where another was expected.
_LABELS = ("URI", "Version", "Chain ID", "Nonce", "Issued At") + OPTIONAL_FIELDS


class MessageError(ValueError):
    """Text that is not an EIP-4361 message: `line` (1-based, None for the text as a whole) is the first
    line that is wrong, and `detail` says what was expected there."""

    def __init__(self, detail, line=None):
        super().__init__(detail if line is None else f"line {line}: {detail}")
        self.detail = detail
        self.line = line


class TimeCheckError(ValueError):
    """A message read at a time it does not allow; `field` names the line that fails (e.g. "Expiration Time")."""

    def __init__(self, field, detail):
        super().__init__(detail)
        self.field = field
        self.detail = detail


@dataclass(frozen=True, kw_only=True)
class SiweMessage:
    """The fields of an EIP-4361 message; times are timezone-aware, in UTC."""

    domain: str
    address: str
    statement: str | None
    uri: str
    version: str
    chain_id: int
    nonce: str
    issued_at: datetime
    expiration_time: datetime | None = None
    not_before: datetime | None = None
    request_id: str | None = None
    resources: tuple[str, ...] | None = None
    scheme: str | None = None


def personal_sign_message(message_text):
    """What a personal_sign (EIP-191) signature of message_text's UTF-8 bytes signs."""
    return encode_defunct(text=message_text)


def recover_personal_sign(message_text, signature_hex):
    """Return the EIP-55 address whose key made signature_hex, an EIP-191 personal_sign signature of
    message_text's UTF-8 bytes; raise SignatureError when the signature is malformed or unrecoverable."""
    return recover_signer(encode_defunct(text=message_text), signature_hex)


def check_times(message, now, max_future=timedelta(minutes=5)):
    """Raise TimeCheckError unless, at `now` (timezone-aware), message's Issued At is at most max_future
    ahead, its Expiration Time (if any) is still to come and its Not Before (if any) has come."""
    if message.issued_at > now + max_future:
        raise TimeCheckError("Issued At", f"Issued At is more than {_duration(max_future)} in the future.")
    if message.expiration_time is not None and message.expiration_time <= now:
        raise TimeCheckError("Expiration Time", "Expiration Time has passed.")
    if message.not_before is not None and message.not_before > now:
        raise TimeCheckError("Not Before", "Not Before is still to come.")


def text_of(message):
    """The text of `message` (a SiweMessage) as the EIP's grammar lays it out, what its wallet signs: lines
    ended by LF alone, none after the last; times in UTC with a Z, to the microsecond when they have one.

    The fields are written as they are, not checked: parse(text_of(message)) == message for a message whose
    fields the grammar allows (an address in its EIP-55 form, a statement on one line, ...).
    """
    scheme = f"{message.scheme}://" if message.scheme is not None else ""
    lines = [f"{scheme}{message.domain}{PREAMBLE}", message.address, ""]
    lines += [message.statement, ""] if message.statement is not None else [""]
    lines += [f"URI: {message.uri}", f"Version: {message.version}", f"Chain ID: {message.chain_id}",
              f"Nonce: {message.nonce}", f"Issued At: {_rfc3339(message.issued_at)}"]
    if message.expiration_time is not None:
        lines.append(f"Expiration Time: {_rfc3339(message.expiration_time)}")
    if message.not_before is not None:
        lines.append(f"Not Before: {_rfc3339(message.not_before)}")
    if message.request_id is not None:
        lines.append(f"Request ID: {message.request_id}")
    if message.resources is not None:
        lines += ["Resources:"] + [f"- {resource}" for resource in message.resources]
    return "\n".join(lines)


def parse(text):
    """Return the SiweMessage that text is, or raise MessageError naming the first line that is wrong.

    The address must be in its EIP-55 checksummed form. Lines end with LF alone and the last field
    ends the text, as the grammar says: a message is signed byte for byte, so nothing is tidied here.
    """
    if not isinstance(text, str):
        raise MessageError("Expected the message as text.")
    if len(text) > MAX_MESSAGE_LENGTH:
        raise MessageError(f"The message is longer than {MAX_MESSAGE_LENGTH} characters.")
    lines = _Lines(text)

    header = lines.take(f'"<domain>{PREAMBLE}"')
    if not header.endswith(PREAMBLE):
        raise lines.error(f'expected "<domain>{PREAMBLE}", or "<scheme>://<domain>{PREAMBLE}"')
    scheme, separator, domain = header[: -len(PREAMBLE)].rpartition("://")
    if not separator:
        scheme = None
    elif not uris.SCHEME.fullmatch(scheme):
        raise lines.error("expected a URI scheme before ://: a letter, then letters, digits, +, - or .")
    if problem := uris.authority_problem(domain, host_required=True):
        raise lines.error(f"expected the domain as an RFC 3986 authority ([user@]host[:port]), but {problem}")

    address = lines.take("the wallet address (0x and 40 hex digits)")
    if not _ADDRESS.fullmatch(address):
        raise lines.error("expected the wallet address (0x and 40 hex digits)" + _found(address))
    if not is_checksum_address(address):
        raise lines.error(_checksum_problem(address))

    if lines.take("an empty line after the address"):
        raise lines.error("expected an empty line after the address")
    statement = _statement(lines)

    uri = _field(lines, "URI", "an RFC 3986 URI")
    if problem := uris.uri_problem(uri):
        raise lines.error(f"expected an RFC 3986 URI after \"URI: \", but {problem}")
    if _field(lines, "Version", f"{VERSION}, the only version EIP-4361 defines") != VERSION:
        raise lines.error(f'expected "Version: {VERSION}": version {VERSION} is the only one EIP-4361 defines')
    chain_id = _chain_id(_field(lines, "Chain ID", "the chain's EIP-155 id in decimal digits"), lines)
    nonce = _field(lines, "Nonce", f"at least {MIN_NONCE_LENGTH} letters and digits")
    if len(nonce) < MIN_NONCE_LENGTH or not _NONCE.issuperset(nonce):
        raise lines.error(f'expected "Nonce: " and at least {MIN_NONCE_LENGTH} letters and digits (A-Z, a-z, 0-9)')
    issued_at = _date_time(_field(lines, "Issued At", f"an RFC 3339 date and time like {_EXAMPLE_TIME}"),
                           "Issued At", lines)

    optional = _optional_fields(lines)
    return SiweMessage(
        scheme=scheme, domain=domain, address=address, statement=statement, uri=uri, version=VERSION,
        chain_id=chain_id, nonce=nonce, issued_at=issued_at, **optional,
    )


class _Lines:
    """The message's lines, taken in order; `number` is the 1-based number of the line last taken."""

    def __init__(self, text):
        self._lines = text.split("\n")
        self.number = 0

    def take(self, expected):
        """The next line; MessageError when the text ends before it or it holds a character no line may."""
        if self.number == len(self._lines):
            raise MessageError(f"expected {expected}, found the end of the message", self.number + 1)
        line = self._lines[self.number]
        self.number += 1
        if not (line.isascii() and line.isprintable()):
            raise self.error(_character_problem(line))
        return line

    def take_if_any(self):
        """The next line, or None at the end of the text."""
        return self.take("") if self.number < len(self._lines) else None

    def peek(self):
        """The line after the one last taken, as it is, or None at the end of the text."""
        return self._lines[self.number] if self.number < len(self._lines) else None

    def error(self, detail):
        return MessageError(detail, self.number)


def _character_problem(line):
    if "\r" in line:
        return "holds a carriage return (CR): the message's lines end with a line feed (LF) alone"
    character = next(c for c in line if not (c.isascii() and c.isprintable()))
    return (f"holds the character U+{ord(character):04X}, which no line may: "
            "the message is printable ASCII, its lines ended by line feeds (LF)")


def _found(line):
    """What a line that is not the one expected is, in words, without echoing text the wallet signed."""
    if line == "":
        return ", found an empty line"
    for label in _LABELS:
        if line.startswith(label + ":"):
            return f", found the {label} line"
    return ""


def _field(lines, label, what):
    """The value of the next line, which must be `label: value`."""
    prefix = label + ": "
    line = lines.take(f'"{prefix}" and {what}')
    if not line.startswith(prefix):
        raise lines.error(f'expected "{prefix}" and {what}' + _found(line))
    return line[len(prefix):]


def _checksum_problem(address):
    digits = address[2:]
    if digits == digits.lower() or digits == digits.upper():
        case = "lower" if digits == digits.lower() else "upper"
        return (f"the address is all {case} case, which carries no EIP-55 checksum: "
                f"expected its checksummed form, {to_checksum_address(address)}")
    return "the address fails its EIP-55 checksum (the case of its letters): is a character mistyped?"


def _statement(lines):
    """The optional statement and the empty line after it; None when the message has none.

    The grammar puts an empty line both before and after a statement, so a message without one has
    two empty lines after the address, and one whose statement is empty has three.
    """
    line = lines.take("a statement or an empty line")
    if line == "" and lines.peek() != "":
        return None
    if line.startswith("URI: ") and lines.peek() != "":
        # A URI line where the second empty line belongs, rather than a statement that reads "URI: ...".
        raise lines.error("expected an empty line: a message without a statement has two empty lines "
                          "between the address and the URI line")
    if (bad := uris.first_bad(line, _STATEMENT)) is not None:
        raise lines.error(f"the statement holds {line[bad]!r}, which a statement may not: it may hold letters, "
                          "digits, spaces and RFC 3986's reserved and unreserved marks, -._~:/?#[]@!$&'()*+,;=")
    if lines.take("an empty line after the statement") != "":
        raise lines.error("expected an empty line after the statement")
    return line


def _chain_id(value, lines):
    if not value or not _DIGITS.issuperset(value) or len(value) > 78 or int(value) > MAX_CHAIN_ID:
        raise lines.error('expected "Chain ID: " and the chain\'s EIP-155 id in decimal digits (below 2**256)')
    return int(value)


def _date_time(value, label, lines):
    """The RFC 3339 date-time `value` as a datetime in UTC."""
    match = _DATE_TIME.fullmatch(value)
    if not match:
        raise lines.error(f'expected "{label}: " and an RFC 3339 date and time like {_EXAMPLE_TIME}')
    year, month, day, hour, minute, second, fraction, sign, offset_hours, offset_minutes = match.groups()
    # Finer than microseconds (Go and Java write nanoseconds) is cut to microseconds.
    microsecond = int((fraction or "").ljust(6, "0")[:6])
    offset = timedelta(hours=int(offset_hours or 0), minutes=int(offset_minutes or 0))
    try:
        zone = timezone(-offset if sign == "-" else offset)
        moment = datetime(int(year), int(month), int(day), int(hour), int(minute), int(second), microsecond, zone)
        return moment.astimezone(UTC)
    # A day, hour or second that no calendar has (a leap second too), or a year beyond 1..9999 in UTC.
    except (ValueError, OverflowError):
        raise lines.error(f"{label} is not a date and time that exists (RFC 3339, like {_EXAMPLE_TIME})") from None


def _optional_fields(lines):
    """Expiration Time, Not Before, Request ID and Resources: each optional, in this order, to the end."""
    found = {}
    position = 0
    while (line := lines.take_if_any()) is not None:
        label = next((label for label in OPTIONAL_FIELDS if line.startswith(label + ":")), None)
        if label is None:
            _refuse_final_line_feed(line, lines)
            raise lines.error("expected " + ", ".join(f'"{label}: "' for label in OPTIONAL_FIELDS[:-1])
                              + ', "Resources:" or the end of the message' + _found(line))
        index = OPTIONAL_FIELDS.index(label)
        if index < position:
            raise lines.error(f"the {label} line is out of place or repeated: after Issued At come, each at "
                              "most once and in this order, " + ", ".join(OPTIONAL_FIELDS))
        position = index + 1
        if label == "Resources":
            found["resources"] = _resources(line, lines)
            continue
        value = line[len(label) + 2:] if line.startswith(label + ": ") else None
        if label == "Request ID":
            if value is None or uris.first_bad(value, uris.PCHAR) is not None:
                raise lines.error('expected "Request ID: " and an id of RFC 3986 path characters (pchar)')
            found["request_id"] = value
        else:
            if value is None:
                raise lines.error(f'expected "{label}: " and an RFC 3339 date and time like {_EXAMPLE_TIME}')
            found[label.lower().replace(" ", "_")] = _date_time(value, label, lines)
    return found


def _resources(line, lines):
    if line != "Resources:":
        raise lines.error('expected "Resources:" alone on its line, each resource on a line of its own below')
    resources = []
    while (line := lines.take_if_any()) is not None:
        if not line.startswith("- "):
            _refuse_final_line_feed(line, lines)
            raise lines.error('expected a resource ("- " and a URI) or the end of the message' + _found(line))
        if problem := uris.uri_problem(line[2:]):
            raise lines.error(f'expected a resource, "- " and an RFC 3986 URI, but {problem}')
        resources.append(line[2:])
    return tuple(resources)


def _refuse_final_line_feed(line, lines):
    """Say so when `line` is the empty one after a line feed that ends the text."""
    if line == "" and lines.peek() is None:
        raise lines.error("expected the end of the message: it ends with its last field, not with a line feed")


def _rfc3339(moment):
    """A timezone-aware time as RFC 3339 in UTC: 2026-05-01T12:00:00Z, or 2026-05-01T12:00:00.123456Z."""
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _duration(delta):
    seconds = int(delta.total_seconds())
    if seconds % 60:
        return f"{seconds} seconds"
    minutes = seconds // 60
    return "1 minute" if minutes == 1 else f"{minutes} minutes"
