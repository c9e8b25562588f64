"""The nonces of sign-in with Ethereum: stateless until spent.

A nonce carries its own proof: 13 random bytes (104 bits), its expiry (Unix seconds) and an HMAC-SHA256 of both
under a key derived from the service's shared secret (the one every worker and node reads from the database,
identity.core.browse.cursor_secret), written in letters and digits (base 62) as EIP-4361 requires. Any worker or
node checks a nonce another issued without asking anyone, and issuing one stores nothing: no number of clients
asking for nonces fills anything that other users then meet.

A nonce is recorded only when a sign-in spends it: an INSERT into signin_spent_nonces that does nothing when the
row is there already, so of two sign-ins with one nonce, on any workers and nodes, only the one whose insert
wrote the row goes on. A spent nonce is kept until its expiry (after which it is refused as expired anyway) and
purged by the next spend: the table holds at most the sign-ins that the per-address budgets let through in
IDENTITY_SIWE_NONCE_SECONDS.
"""

import hashlib
import hmac
import secrets
import string
from datetime import UTC, datetime

from flask import current_app
from sqlalchemy import bindparam, delete
from sqlalchemy.dialects import postgresql, sqlite

from ..storage.models import SpentNonce
from .browse import cursor_secret
from .siwe import NONCE_LENGTH

ALPHABET = string.digits + string.ascii_uppercase + string.ascii_lowercase
RANDOM_BYTES, EXPIRY_BYTES, MAC_BYTES = 13, 5, 16
_SIZE = RANDOM_BYTES + EXPIRY_BYTES + MAC_BYTES
# Base-62 digits of _SIZE bytes: 62**46 > 2**272, and every nonce is written with exactly this many.
LENGTH = NONCE_LENGTH
_SALT = b"identity.siwe.nonce.v1"
_CACHE = "identity.siwe.nonces"

SPENT = SpentNonce.__table__
_PURGE = delete(SPENT).where(SPENT.c.expires_at <= bindparam("now"))
# The spend: a row for the nonce unless one is there already; the nonce it returns tells which.
_SPEND = {
    "sqlite": sqlite.insert(SPENT).on_conflict_do_nothing(index_elements=[SPENT.c.nonce]).returning(SPENT.c.nonce),
    "postgresql": postgresql.insert(SPENT).on_conflict_do_nothing(index_elements=[SPENT.c.nonce])
    .returning(SPENT.c.nonce),
}


def issue(now, seconds):
    """A fresh nonce valid `seconds` from `now` (to the second below): (nonce, expires_at). Stores nothing."""
    expires = int(now.timestamp()) + seconds
    body = secrets.token_bytes(RANDOM_BYTES) + expires.to_bytes(EXPIRY_BYTES, "big")
    return _encode(body + _mac(body)), datetime.fromtimestamp(expires, UTC)


def expiry_of(nonce):
    """When `nonce` expires, if this service issued it (its proof holds); else None."""
    raw = _decode(nonce)
    if raw is None:
        return None
    body, mac = raw[:-MAC_BYTES], raw[-MAC_BYTES:]
    if not hmac.compare_digest(mac, _mac(body)):
        return None
    return datetime.fromtimestamp(int.from_bytes(body[RANDOM_BYTES:], "big"), UTC)


def spend(session, nonce, expires_at, now):
    """Record `nonce` (one expiry_of accepted) as spent, in `session`'s write transaction; whether this was its
    first use. The spent nonces expired by `now` are purged first."""
    session.execute(_PURGE, {"now": now})
    dialect = session.get_bind().dialect.name
    return session.execute(_SPEND[dialect], {"nonce": nonce, "expires_at": expires_at}).first() is not None


def _mac(body):
    cache = current_app.extensions.setdefault(_CACHE, {})
    if "key" not in cache:
        cache["key"] = hmac.new(cursor_secret().encode(), _SALT, hashlib.sha256).digest()
    return hmac.new(cache["key"], body, hashlib.sha256).digest()[:MAC_BYTES]


def _encode(raw):
    number, digits = int.from_bytes(raw, "big"), []
    for _ in range(LENGTH):
        number, digit = divmod(number, 62)
        digits.append(ALPHABET[digit])
    return "".join(reversed(digits))


def _decode(nonce):
    """The bytes `nonce` writes, or None when it is not LENGTH base-62 digits of _SIZE bytes."""
    if not (isinstance(nonce, str) and len(nonce) == LENGTH and nonce.isascii() and nonce.isalnum()):
        return None
    number = 0
    for character in nonce:
        number = number * 62 + ALPHABET.index(character)
    return number.to_bytes(_SIZE, "big") if number < 1 << (8 * _SIZE) else None
