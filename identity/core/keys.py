"""API keys: how they are made and stored, who a key's caller is, and issuing, rotating, revoking and
listing them (for the HTTP API and the command line alike).

A key is `idsk_` and 32 random bytes; only its SHA-256 is stored, and keys are looked up by it, so no
comparison can leak timing. Each process believes a lookup for IDENTITY_KEY_CACHE_SECONDS: the bound
on how long a key revoked elsewhere still works here.
"""

import hashlib
import logging
import math
import secrets
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from cachetools import TTLCache
from flask import current_app, has_app_context
from itsdangerous import BadSignature, URLSafeSerializer
from sqlalchemy import and_, bindparam, func, literal, not_, or_, select, tuple_, update

from ..storage.database import db, one_statement, write_transaction
from ..storage.models import ApiKey, User, new_id, utcnow
from . import audit, key_use
from .browse import cursor_secret
from .errors import InvalidParameters, KeyNotFound, KeyNotLive
from .users import USER_COLUMNS, user_of_wallet
from .wallets import checksum_wallet

# A fixed prefix lets secret scanners find a leaked key; 32 random bytes give 256 bits of entropy.
KEY_PREFIX = "idsk_"
MAX_KEY_LENGTH = 128
ROLES, SCOPES = ("User", "Admin"), ("write", "read")
# Who issued or revoked a key on the command line, or through the Python API (identity.seed).
CLI = "cli"
MIN_EXPIRES_IN, MAX_EXPIRES_IN = 60, 10 * 365 * 86_400
MAX_GRACE_SECONDS = 86_400
# Lookups a process keeps: live keys only, and never more than this many (the least recently used go first).
MAX_CACHED_KEYS = 10_000
DEFAULT_LIMIT, CURSOR_SALT = 20, "identity.keyring.cursor.v1"
CACHE = "identity_key_cache"
# Every key event (issued, rotated, revoked) is a line here, with the key's id and the acting wallet; never the key.
key_log = logging.getLogger("identity.keys")


def new_api_key():
    """A fresh key (the plaintext, shown once) and the hash that is stored."""
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    return key, hash_api_key(key)


def hash_api_key(key):
    """The SHA-256 of a key, in hex: the only form the database holds, and the one keys are looked up by."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


# --- who is calling --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Caller:
    """Who is calling: the key's id and scope, its user's id, wallet and role, and (when known) the user's
    columns as the key's lookup read them, which a create names as its creator."""

    user_id: str | None
    key_id: str | None
    wallet: str
    role: str
    scope: str = "write"
    user: dict | None = field(default=None, compare=False)


@dataclass
class _Lookup:
    """A live key as this process last read it. `stops_at` (Unix time) is when the key itself stops: its
    expiry, or the end of a rotation's grace; a cached lookup is refused from then on. `note_after`
    (monotonic) is when its use is next worth noting (identity.core.key_use): at once when the stored
    last_used_at is an interval old, else when it will be."""

    caller: Caller
    stops_at: float = math.inf
    note_after: float = 0.0


_KEY_AND_USER = (
    select(ApiKey.id, ApiKey.scope, ApiKey.revoked_at, ApiKey.expires_at, ApiKey.last_used_at, *User.__table__.c)
    .join(User, ApiKey.user_id == User.id)
    .where(ApiKey.key_hash == bindparam("key_hash"))
)


def init_app(app):
    """`app`'s cache of key lookups: each believed for IDENTITY_KEY_CACHE_SECONDS (the bound on how long a
    key revoked elsewhere still works here), at most MAX_CACHED_KEYS (the least recently used go first);
    and its record of the keys' uses."""
    app.extensions[CACHE] = _Cache(TTLCache(MAX_CACHED_KEYS, app.config["IDENTITY_KEY_CACHE_SECONDS"]), threading.Lock())
    key_use.init_app(app)


@dataclass(frozen=True)
class _Cache:
    lookups: TTLCache
    lock: object  # cachetools' caches are not thread-safe; held for a dict operation, never across a wait


def caller_of(key):
    """The Caller of `key`, or None for a missing, unknown, revoked or expired key.

    Reads only: the key's use is noted in memory (identity.core.key_use), written off the request's path.
    """
    if not key or len(key) > MAX_KEY_LENGTH:
        return None
    key_hash = hash_api_key(key)
    cache = current_app.extensions[CACHE]
    with cache.lock:
        lookup = cache.lookups.get(key_hash)
    if lookup is None:
        lookup = _look_up(key_hash)
        if lookup is None:
            return None
        with cache.lock:
            cache.lookups[key_hash] = lookup
    if time.time() >= lookup.stops_at:  # expired, or rotated out: as unknown
        with cache.lock:
            cache.lookups.pop(key_hash, None)
        return None
    now = time.monotonic()
    if now >= lookup.note_after:
        key_use.note(lookup.caller.key_id)
        lookup.note_after = now + current_app.config["IDENTITY_KEY_USE_INTERVAL"]
    return lookup.caller


def _look_up(key_hash):
    with one_statement() as connection:
        row = connection.execute(_KEY_AND_USER, {"key_hash": key_hash}).one_or_none()
    if row is None:
        return None
    key_id, scope, revoked_at, expires_at, last_used_at, *user_values = row
    stops_at = min((moment.timestamp() for moment in (revoked_at, expires_at) if moment is not None), default=math.inf)
    if stops_at <= time.time():
        return None
    user = dict(zip(USER_COLUMNS, user_values, strict=True))
    caller = Caller(user["id"], key_id, user["wallet"], user["role"], scope, user)
    note_after = 0.0
    if last_used_at is not None:
        due_in = (last_used_at - utcnow()).total_seconds() + current_app.config["IDENTITY_KEY_USE_INTERVAL"]
        note_after = time.monotonic() + due_in if due_in > 0 else 0.0
    return _Lookup(caller, stops_at, note_after)


def forget_keys():
    """Drop this process's cached lookups, so that a revocation made here takes effect at once."""
    if has_app_context():
        cache = current_app.extensions[CACHE]
        with cache.lock:
            cache.lookups.clear()


# --- issuing, rotating, revoking ---------------------------------------------------------------------

def issue_key(wallet, role=None, *, scope="write", label=None, expires_in=None, created_by=CLI):
    """Issue a key for `wallet`; returns (plaintext key, ApiKey).

    A new wallet becomes a user with `role` (default User), granted `scope`; for a known one, a given role
    replaces its role, and a write key widens its grant to write (users.grant: what a sign-in may issue it).
    `scope` is write or read; `expires_in` seconds (MIN_EXPIRES_IN to MAX_EXPIRES_IN) or None for no expiry;
    `created_by` is the wallet of the issuing key, or "cli".
    """
    if role is not None and role not in ROLES:
        raise ValueError(f"Unknown role {role!r}: choose one of {', '.join(ROLES)}.")
    if scope not in SCOPES:
        raise ValueError(f"Unknown scope {scope!r}: choose one of {', '.join(SCOPES)}.")
    if expires_in is not None and not MIN_EXPIRES_IN <= expires_in <= MAX_EXPIRES_IN:
        raise ValueError(f"expires_in must be {MIN_EXPIRES_IN} to {MAX_EXPIRES_IN:,} seconds (10 years).")
    wallet = checksum_wallet(wallet)
    now = utcnow()
    expires_at = None if expires_in is None else now + timedelta(seconds=expires_in)
    with write_transaction() as session:
        user = user_of_wallet(session, wallet, role or "User", now, grant=scope)
        changed = {"role": role} if role is not None and user["role"] != role else {}
        if scope == "write" and user["grant"] != "write":
            changed["grant"] = "write"
        if changed:
            session.execute(update(User).where(User.id == user["id"]).values(**changed, updated_at=now))
        key, api_key = add_key(session, user["id"], now, scope, label, expires_at, created_by)
        audit.key_issued(api_key, wallet, user["role"], changed.get("role"))
        if "grant" in changed:
            audit.record("user.grant", "user", wallet, before={"grant": user["grant"]}, after={"grant": "write"})
    if changed:
        forget_keys()  # this process's lookups of the wallet's other keys carry its old role and grant
        now_is = ", ".join(f"{name} {value}" for name, value in changed.items())
        key_log.info("user %s is now %s, by %s", wallet, now_is, created_by,
                     extra={"wallet": wallet, **changed, "acting_wallet": created_by})
    key_log.info("key %s issued for %s by %s", api_key.id, wallet, created_by,
                 extra={"key_id": api_key.id, "wallet": wallet, "acting_wallet": created_by, "scope": scope})
    return key, api_key


def add_key(session, user_id, now, scope="write", label=None, expires_at=None, created_by=CLI):
    """A new key of user `user_id`, added to `session` (in its write transaction): (plaintext key, ApiKey)."""
    key, key_hash = new_api_key()
    api_key = ApiKey(
        id=new_id(), user_id=user_id, key_hash=key_hash, hint=key[:9], created_at=now,
        scope=scope, label=label, expires_at=expires_at, created_by=created_by,
    )
    session.add(api_key)
    return key, api_key


def is_key_id(value):
    """Whether `value` is a key id's form (a UUID): no stored key has another; PostgreSQL refuses some (NUL)."""
    try:
        return str(uuid.UUID(value)) == value
    except (TypeError, ValueError):
        return False


def live(now):
    """The SQL condition of a key that works at `now`: not revoked (or within a rotation's grace), not expired."""
    return and_(
        or_(ApiKey.revoked_at.is_(None), ApiKey.revoked_at > now),
        or_(ApiKey.expires_at.is_(None), ApiKey.expires_at > now),
    )


def revoke_key(key_id=None, wallet=None, by=CLI):
    """Revoke one key by id, or every live key of a wallet, now; returns how many were revoked.

    A key within a rotation's grace is revoked at once too.
    """
    if (key_id is None) == (wallet is None):
        raise ValueError("Name either a key id or a wallet.")
    if key_id is not None and not is_key_id(key_id):
        return 0
    now = utcnow()
    with write_transaction() as session:
        query = select(ApiKey).where(live(now))
        if key_id is not None:
            query = query.where(ApiKey.id == key_id)
        else:
            query = query.join(User).where(User.wallet == checksum_wallet(wallet))
        keys = session.execute(query).scalars().all()
        for api_key in keys:
            audit.record("key.revoke", "key", api_key.id, before={"revoked_at": api_key.revoked_at}, after={"revoked_at": now})
            api_key.revoked_at = now
    forget_keys()
    for api_key in keys:
        key_log.info("key %s revoked by %s", api_key.id, by, extra={"key_id": api_key.id, "acting_wallet": by})
    return len(keys)


def rotate_key(key_id, grace_seconds=0, by=CLI):
    """Issue a new key for the user of live key `key_id`, with its scope, label and expiry, and revoke
    that key after `grace_seconds` (0 to MAX_GRACE_SECONDS), in one transaction.

    Returns (plaintext key, new ApiKey). Raises KeyNotFound for an unknown id, KeyNotLive for a key that
    is revoked, expired, or rotated already.
    """
    if not 0 <= grace_seconds <= MAX_GRACE_SECONDS:
        raise ValueError(f"grace_seconds must be 0 to {MAX_GRACE_SECONDS:,}.")
    now = utcnow()
    with write_transaction() as session:
        old = session.get(ApiKey, key_id) if is_key_id(key_id) else None
        if old is None:
            raise KeyNotFound()
        _refuse_dead_key(old, now)
        old.revoked_at = now + timedelta(seconds=grace_seconds)
        # Rotation renews the secret, not the term: the new key expires when the old one would have.
        key, api_key = add_key(session, old.user_id, now, old.scope, old.label, old.expires_at, by)
        audit.key_rotated(old, api_key, grace_seconds)
    forget_keys()
    key_log.info(
        "key %s rotated by %s: replaced by key %s; it stops at %s", old.id, by, api_key.id, old.revoked_at.isoformat(),
        extra={"key_id": old.id, "new_key_id": api_key.id, "acting_wallet": by, "grace_seconds": grace_seconds},
    )
    return key, api_key


def _refuse_dead_key(api_key, now):
    if api_key.revoked_at is not None and api_key.revoked_at > now:
        raise KeyNotLive(
            f"This key was rotated already and stops at {api_key.revoked_at.isoformat()}; "
            "rotate the key that replaced it instead."
        )
    if api_key.revoked_at is not None:
        raise KeyNotLive("This key is revoked; issue a new one (POST /keys, or `flask keys create`).")
    if api_key.expires_at is not None and api_key.expires_at <= now:
        raise KeyNotLive("This key has expired; issue a new one (POST /keys, or `flask keys create`).")


# --- reading keys --------------------------------------------------------------------------------------

_KEY_COLUMNS = ("id", "scope", "label", "created_at", "expires_at", "last_used_at", "revoked_at", "created_by")
_USER = ("wallet", "role", "grant")


def all_keys():
    """Every key, newest first, with its user; never the secret (the command line's listing)."""
    keys = db.session.execute(select(ApiKey).order_by(ApiKey.created_at.desc())).scalars().all()
    db.session.commit()
    return keys


def key_record(api_key, user):
    """An ApiKey and its user as the Key schema dumps them (and its user's grant); never the secret, nor its hash."""
    return {**{name: getattr(api_key, name) for name in _KEY_COLUMNS}, **{name: getattr(user, name) for name in _USER}}


def issued_record(key, api_key):
    """A key just issued: its record and, this once, its plaintext."""
    user = db.session.get(User, api_key.user_id)
    db.session.commit()
    return {**key_record(api_key, user), "key": key}


def me(caller):
    """The caller's user and key."""
    api_key, user = _key_and_user(caller.key_id)
    return {"user": user, "key": key_record(api_key, user)}


def get_key(key_id):  # as key_record makes it; KeyNotFound if none
    return key_record(*_key_and_user(key_id))


def _key_and_user(key_id):
    if not is_key_id(key_id):
        raise KeyNotFound()
    row = db.session.execute(select(ApiKey, User).join(User).where(ApiKey.id == key_id)).one_or_none()
    db.session.commit()
    if row is None:
        raise KeyNotFound()
    return row


def list_keys(args):
    """The page of keys that query arguments `args` (KeyListArgsSchema) ask for, newest first."""
    wallet = checksum_wallet(args["wallet"].lower()) if "wallet" in args else None  # any case, as documented
    active = args.get("active")
    limit, page, after = args.get("limit", DEFAULT_LIMIT), args.get("page", 1), None
    if "cursor" in args:
        wallet_, active_, limit_, page, after = _decode(args["cursor"])
        for name, asked, carried in (("wallet", wallet, wallet_), ("active", active, active_)):
            if name in args and asked != carried:
                raise InvalidParameters({name: ["Differs from the listing the cursor continues; leave it out."]})
        wallet, active, limit = wallet_, active_, args.get("limit", limit_)
    conditions = []
    if wallet is not None:
        conditions.append(User.wallet == wallet)
    if active is not None:
        working = live(utcnow())
        conditions.append(working if active else not_(working))
    query = select(ApiKey, User).join(User).where(*conditions)
    if after is not None:
        bound = (literal(after[0], ApiKey.created_at.type), literal(after[1], ApiKey.id.type))
        query = query.where(tuple_(ApiKey.created_at, ApiKey.id) < tuple_(*bound))
    elif page > 1:
        query = query.offset((page - 1) * limit)
    rows = db.session.execute(query.order_by(ApiKey.created_at.desc(), ApiKey.id.desc()).limit(limit + 1)).all()
    total = db.session.execute(select(func.count()).select_from(ApiKey).join(User).where(*conditions)).scalar()
    db.session.commit()
    following = None
    if len(rows) > limit:
        rows = rows[:limit]
        last = rows[-1][0]
        following = _serializer().dumps([wallet, active, limit, page + 1, last.created_at.isoformat(), last.id])
    return {
        "page": page,
        "limit": limit,
        "total": total,
        "data": [key_record(api_key, user) for api_key, user in rows],
        "next": following,
    }


def _serializer():  # cursors signed with the identity listing's shared secret, salted apart
    cache = current_app.extensions.setdefault("identity.keyring", {})
    if "serializer" not in cache:
        cache["serializer"] = URLSafeSerializer(cursor_secret(), salt=CURSOR_SALT)
    return cache["serializer"]


def _decode(token):  # a cursor's listing and position
    try:
        wallet, active, limit, page, created_at, key_id = _serializer().loads(token)
        return wallet, active, int(limit), int(page), (datetime.fromisoformat(created_at), str(key_id))
    except (BadSignature, TypeError, ValueError):
        raise InvalidParameters({"cursor": ["Not a cursor this service issued; use the next of a page."]}) from None
