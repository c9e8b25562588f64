"""Content addressing: canonical bytes, CID, DID and keccak hash of an identity's content."""

from __future__ import annotations

import functools
import hashlib
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass

import orjson
import rfc8785
from eth_hash.auto import keccak

CONTENT_FIELDS = ("display_name", "description", "image", "external_reference")
DEFAULT_NAMESPACE = "identity"

# CIDv1 0x01, codec raw 0x55, multihash sha2-256 0x12 of length 0x20: these 32 bits are the
# same in every CID made here, and in base32 the first 30 are "afkrei" after multibase "b".
# The other 2 (zero) bits, 256 digest bits and 2 zero pad bits make 26 groups of 10 bits.
_CID_HEAD = "bafkrei"
_BASE32 = "abcdefghijklmnopqrstuvwxyz234567"
# base64.b32encode is pure Python in CPython 3.11; one lookup per 10 bits takes half its time
# (docs/performance.md, "Figures behind the code's choices").
_BASE32_PAIRS = tuple(a + b for a in _BASE32 for b in _BASE32)
_SHIFTS = tuple(range(250, -1, -10))
# int(..., 32) reads digits 0-9a-v, so decoding is a C-speed translate and parse.
_BASE32_TO_DIGITS = str.maketrans(_BASE32, "0123456789abcdefghijklmnopqrstuv")

# fullmatch with explicit ASCII ranges: `$` would also accept a trailing "\n".
_NAMESPACE = re.compile(r"[a-z0-9]+")
_CONTENT_ID = re.compile(r"bafkrei[a-z2-7]{52}")
_IDENTITY_ID = re.compile(r"did:([a-z0-9]+):ipfs:(bafkrei[a-z2-7]{52})")
_IPFS_URI_PREFIX = b"ipfs://"


# UAX #15's stream-safe text format: no more than 30 non-starters in a row. Normalization sorts each
# run of combining marks, at a cost that grows with the square of its length: 32,000 of them took
# seconds of CPU. No text in any script needs more than a handful.
MAX_COMBINING_RUN = 30


@functools.cache
def _combining_run():
    """A pattern matching a run of more than MAX_COMBINING_RUN combining marks (canonical class not 0)."""
    # Every such code point lies in U+0300..U+1EFFF (Unicode 15); reading them takes milliseconds, once.
    ranges = []
    for code in range(0x300, 0x1F000):
        if unicodedata.combining(chr(code)):
            if ranges and ranges[-1][1] == code - 1:
                ranges[-1][1] = code
            else:
                ranges.append([code, code])
    members = "".join(f"\\U{low:08x}-\\U{high:08x}" for low, high in ranges)
    return re.compile(f"[{members}]{{{MAX_COMBINING_RUN + 1},}}")


def check_normalizable(value: str) -> None:
    """Raise ValueError for text whose normalization would be costly: a run of over 30 combining marks."""
    if not value.isascii() and _combining_run().search(value):
        raise ValueError(f"More than {MAX_COMBINING_RUN} combining marks in a row.")


def normalize_text(value: str) -> str:
    """Return value in Unicode NFC with leading and trailing white space removed.

    Raises ValueError, before any normalizing, for text that check_normalizable refuses.
    """
    check_normalizable(value)
    # The contract fixes this order; ids made elsewhere depend on it.
    return unicodedata.normalize("NFC", value).strip()


def content_of(fields: Mapping[str, object]) -> dict[str, str]:
    """Return the normalized content fields that fields gives with a non-null value."""
    content = {}
    for name in CONTENT_FIELDS:
        value = fields.get(name)
        if value is None:
            continue
        if not isinstance(value, str):
            raise TypeError(f"{name} must be a string, not {type(value).__name__}")
        content[name] = normalize_text(value)
    return content


def canonical_bytes(content: Mapping[str, str]) -> bytes:
    """Return the RFC 8785 (JCS) UTF-8 serialization of content."""
    content = dict(content)  # rfc8785 accepts only a real dict, not any Mapping
    if all(_is_plain(key) and _is_plain(value) for key, value in content.items()):
        # For printable ASCII, JCS is what orjson writes with sorted keys: keys in code point order,
        # only " and \ escaped, no white space. orjson does it in C, far faster than rfc8785's Python
        # (an import canonicalizes every line; docs/performance.md, "Figures behind the code's choices").
        return orjson.dumps(content, option=orjson.OPT_SORT_KEYS)
    return rfc8785.dumps(content)


def _is_plain(value: object) -> bool:
    return type(value) is str and value.isascii() and value.isprintable()


def content_id_of(data: bytes) -> str:
    """Return the CIDv1 (raw, sha2-256, base32 lower) of data."""
    bits = int.from_bytes(hashlib.sha256(data).digest(), "big") << 2
    return _CID_HEAD + "".join([_BASE32_PAIRS[(bits >> shift) & 0x3FF] for shift in _SHIFTS])


def _has_canonical_tail(content_id: str) -> bool:
    bits = int(content_id[7:].translate(_BASE32_TO_DIGITS), 32)
    # The top 2 bits belong to the length byte 0x20, the low 2 are padding: both must be zero,
    # which also gives every digest exactly one spelling.
    return not (bits >> 258 or bits & 3)


def _is_content_id(content_id: object) -> bool:
    return isinstance(content_id, str) and bool(_CONTENT_ID.fullmatch(content_id)) and _has_canonical_tail(content_id)


def identity_id_of(content_id: str, namespace: str = DEFAULT_NAMESPACE) -> str:
    """Return the DID did:<namespace>:ipfs:<content_id>."""
    if not _NAMESPACE.fullmatch(namespace):
        raise ValueError(f"namespace must be lower-case ASCII letters and digits, not {namespace!r}")
    # Checked so that every id made here is one that parse_identity_id accepts.
    if not _is_content_id(content_id):
        raise ValueError(f"not a CIDv1 raw sha2-256 base32 content id: {content_id!r}")
    return f"did:{namespace}:ipfs:{content_id}"


def identity_hash_of(content_id: str) -> str:
    """Return 0x + hex keccak-256 of the UTF-8 bytes of ipfs://<content_id>."""
    return "0x" + keccak(_IPFS_URI_PREFIX + content_id.encode("utf-8")).hex()


def has_identity_id_form(identity_id: object) -> bool:
    """Whether `identity_id` is did:<namespace>:ipfs:bafkrei + 52 base32 letters.

    parse_identity_id also checks that the base32 tail is the canonical spelling of a digest; a
    lookup does not need that (the store holds canonical ids only), just a string that cannot
    trouble the database.
    """
    return isinstance(identity_id, str) and _IDENTITY_ID.fullmatch(identity_id) is not None


def parse_identity_id(identity_id: str) -> tuple[str, str] | None:
    """Return (namespace, content_id) of a well-formed identity id, else None."""
    if not isinstance(identity_id, str):
        return None
    match = _IDENTITY_ID.fullmatch(identity_id)
    if match is None or not _has_canonical_tail(match.group(2)):
        return None
    return match.group(1), match.group(2)


@dataclass(frozen=True)
class ContentAddress:
    """The content of an identity and every address derived from it."""

    content: dict
    canonical: bytes
    content_id: str
    identity_id: str
    identity_hash: str


def address(fields: Mapping[str, object], namespace: str = DEFAULT_NAMESPACE) -> ContentAddress:
    """Return the content, canonical bytes, CID, DID and keccak hash of fields."""
    if not _NAMESPACE.fullmatch(namespace):
        raise ValueError(f"namespace must be lower-case ASCII letters and digits, not {namespace!r}")
    content = content_of(fields)
    canonical = canonical_bytes(content)
    content_id = content_id_of(canonical)
    # The CID was just made here, so identity_id_of's re-validation would be wasted work.
    return ContentAddress(
        content=content,
        canonical=canonical,
        content_id=content_id,
        identity_id=f"did:{namespace}:ipfs:{content_id}",
        identity_hash=identity_hash_of(content_id),
    )


@dataclass(frozen=True)
class AddressCheck:
    """An identity's addresses recomputed from its stored content, and whether they are the ones it holds."""

    canonical: bytes
    content_id: str
    identity_hash: str
    id_matches: bool
    hash_matches: bool

    @property
    def holds(self) -> bool:
        return self.id_matches and self.hash_matches


def check_address(stored: Mapping[str, object], identity_id: str, identity_hash: str) -> AddressCheck:
    """Recompute the content id and hash of `stored` (an identity's content fields as stored: normalized
    already, None for an absent one) and compare them with the `identity_id` and `identity_hash` it holds."""
    canonical = canonical_bytes({name: stored[name] for name in CONTENT_FIELDS if stored.get(name) is not None})
    content_id = content_id_of(canonical)
    parsed = parse_identity_id(identity_id)
    recomputed_hash = identity_hash_of(content_id)
    return AddressCheck(
        canonical=canonical,
        content_id=content_id,
        identity_hash=recomputed_hash,
        id_matches=parsed is not None and parsed[1] == content_id,
        hash_matches=identity_hash == recomputed_hash,
    )
