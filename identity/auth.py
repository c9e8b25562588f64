"""Who is calling: the API key in x-api-key, checked on every request, and the user's last login."""

import logging
import math
import time
from dataclasses import dataclass
from datetime import timedelta

from flask import current_app, has_app_context, request
from flask_httpauth import HTTPTokenAuth
from sqlalchemy import bindparam, or_, select, update
from sqlalchemy.exc import DBAPIError

from .errors import ReadOnlyKey, problem
from .extensions import single_read, write_transaction
from .faults import cause
from .keys import hash_api_key
from .models import ApiKey, User, utcnow

HEADER = "x-api-key"
CHALLENGE = f'ApiKey header="{HEADER}"'
UNAUTHORIZED_DETAIL = f"A valid API key is required in the {HEADER} header."
MAX_KEY_LENGTH = 128
# Lookups a worker keeps: live keys only, and never more than this many (then it starts afresh).
MAX_CACHED_KEYS = 10_000

auth = HTTPTokenAuth(scheme="ApiKey", header=HEADER)
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Caller:
    """Who is calling: the key's owner, as the views need it."""

    user_id: str
    key_id: str
    wallet: str
    role: str
    scope: str = "write"


@dataclass
class _CachedKey:
    """A live key as this worker last saw it, and until when (monotonic) to believe that.

    `touch_after` (monotonic too) is when the user's last_login may next be written: at once for a
    fresh lookup, so that the database decides.
    """

    caller: Caller
    last_login: object
    expires: float
    touch_after: float = 0.0
    # When the key itself stops (Unix time): its expiry, or the end of a rotation's grace. A cached
    # lookup is refused from then on, however long the cache would otherwise trust it.
    stops_at: float = math.inf
    last_used_at: object = None


_KEY_QUERY = (
    select(
        ApiKey.id, User.id, User.wallet, User.role, User.last_login,
        ApiKey.scope, ApiKey.revoked_at, ApiKey.expires_at, ApiKey.last_used_at,
    )
    .join(User, ApiKey.user_id == User.id)
    .where(ApiKey.key_hash == bindparam("key_hash"))
)
# What a read-only key may do besides GET, HEAD and OPTIONS: revoke itself, should it leak.
READ_SCOPE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
READ_SCOPE_ENDPOINTS = {"identities.revoke_my_key"}


@auth.verify_token
def authenticate(key):
    """Flask-HTTPAuth's check of a request's key: its Caller, or None for no valid key. The Caller is
    also kept on the request (wrappers.Request.caller), where current_caller reads it."""
    caller = request.caller = verify_api_key(key)
    return caller


def verify_api_key(key):
    """The Caller of `key`, or None for a missing, unknown, revoked or expired key; ReadOnlyKey for a
    read-only key on a route that writes."""
    if not key or len(key) > MAX_KEY_LENGTH:
        return None
    key_hash = hash_api_key(key)
    cache = _key_cache()
    entry = cache.get(key_hash)
    now = time.monotonic()
    if entry is None or entry.expires < now:
        entry = _look_up(key_hash, now + current_app.config["IDENTITY_KEY_CACHE_SECONDS"])
        if entry is None:
            cache.pop(key_hash, None)
            return None
        if len(cache) >= MAX_CACHED_KEYS:
            cache.clear()
        cache[key_hash] = entry
    if time.time() >= entry.stops_at:  # expired, or rotated out: as unknown
        cache.pop(key_hash, None)
        return None
    if entry.caller.scope == "read" and request.method not in READ_SCOPE_METHODS:
        if request.endpoint not in READ_SCOPE_ENDPOINTS:
            raise ReadOnlyKey()
    if now >= entry.touch_after:
        _touch_last_login(entry, current_app.config["IDENTITY_LAST_LOGIN_INTERVAL"])
    return entry.caller


def _look_up(key_hash, expires):
    with single_read() as connection:
        row = connection.execute(_KEY_QUERY, {"key_hash": key_hash}).one_or_none()
    if row is None:
        return None
    key_id, user_id, wallet, role, last_login, scope, revoked_at, expires_at, last_used_at = row
    stops_at = min((moment.timestamp() for moment in (revoked_at, expires_at) if moment is not None), default=math.inf)
    if stops_at <= time.time():
        return None
    caller = Caller(user_id=user_id, key_id=key_id, wallet=wallet, role=role, scope=scope)
    return _CachedKey(caller, last_login, expires, stops_at=stops_at, last_used_at=last_used_at)


def _key_cache():
    """This app's key lookups, by key hash.

    Looking the key up is most of the work of a read; a worker believes a lookup for
    IDENTITY_KEY_CACHE_SECONDS, which bounds how long a key revoked elsewhere still works here.
    """
    return current_app.extensions.setdefault("identity_key_cache", {})


def forget_keys():
    """Drop this process's cached key lookups, so that a revocation made here takes effect at once."""
    if has_app_context():
        _key_cache().clear()


def _touch_last_login(entry, interval):
    """Record the login (and the key's last use) at most once an interval, so that reads do not all
    turn into writes.

    Best effort: a read never waits for the write lock and never fails because of this write. When
    the database is locked, read-only or full, the write is skipped with a WARNING, and tried again
    after the interval.
    """
    now = utcnow()
    cutoff = now - timedelta(seconds=interval)
    if any(moment is None or moment <= cutoff for moment in (entry.last_login, entry.last_used_at)):
        user_id, key_id = entry.caller.user_id, entry.caller.key_id
        due = or_(User.last_login.is_(None), User.last_login <= cutoff)
        key_due = or_(ApiKey.last_used_at.is_(None), ApiKey.last_used_at <= cutoff)
        try:
            with write_transaction(wait=False) as session:
                # The condition is repeated in SQL so that concurrent workers write it once; a row
                # another transaction holds is skipped, not waited for (PostgreSQL's SKIP LOCKED).
                held = select(User.id).where(User.id == user_id, due).with_for_update(skip_locked=True)
                session.execute(update(User).where(User.id.in_(held.scalar_subquery())).values(last_login=now))
                held = select(ApiKey.id).where(ApiKey.id == key_id, key_due).with_for_update(skip_locked=True)
                session.execute(update(ApiKey).where(ApiKey.id.in_(held.scalar_subquery())).values(last_used_at=now))
        except DBAPIError as error:
            log.warning("last_login of user %s not recorded: database %s", user_id, cause(error))
            entry.touch_after = time.monotonic() + interval
            return
        entry.last_login = entry.last_used_at = now
    # Until the interval since the older of the two has passed, the requests of this key need not ask.
    oldest = min(entry.last_login, entry.last_used_at)
    entry.touch_after = time.monotonic() + (oldest - cutoff).total_seconds()


ADMIN_ONLY_DETAIL = "Only an Admin key may do this."


@auth.get_user_roles
def caller_roles(caller):
    """The role of the key's user, for `auth.login_required(role="Admin")`."""
    return caller.role


@auth.error_handler
def unauthorized(status):
    if status == 403:  # a valid key whose role is not the one the route needs
        return problem(403, ADMIN_ONLY_DETAIL)
    # One answer for missing, unknown, revoked and expired keys: the response must not tell them apart.
    return problem(401, UNAUTHORIZED_DETAIL, headers={"WWW-Authenticate": CHALLENGE})


def current_caller():
    """The Caller of the request being served (None before authentication, and for no valid key).

    Read from the request (one read through Flask's proxy; Flask-HTTPAuth's current_user makes two
    in `g`). It is set as soon as the key is known good, before a route's role is checked: a request
    refused for its role (403) is logged with its key's id.
    """
    return request.caller
