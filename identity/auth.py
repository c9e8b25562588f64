"""API keys: how they are made, stored, and checked on every request."""

import hashlib
import secrets
import time
from dataclasses import dataclass
from datetime import timedelta

from flask import current_app, g, has_app_context, request
from flask_httpauth import HTTPTokenAuth
from sqlalchemy import bindparam, or_, select, update
from werkzeug.datastructures import Authorization

from .errors import problem
from .extensions import fetch_one, write_transaction
from .models import ApiKey, User, utcnow

# A fixed prefix lets secret scanners find a leaked key; 32 random bytes give 256 bits of entropy.
KEY_PREFIX = "idsk_"
HEADER = "x-api-key"
CHALLENGE = f'ApiKey header="{HEADER}"'
UNAUTHORIZED_DETAIL = f"A valid API key is required in the {HEADER} header."
_MAX_KEY_LENGTH = 128


class ApiKeyAuth(HTTPTokenAuth):
    """Flask-HTTPAuth's token scheme, in a custom header, with the request's objects taken once.

    Its own methods ask the `request`, `g` and `current_app` proxies again for each attribute, and
    each attribute asked of a proxy costs as much as a small function call: eight on every request,
    as much as the key lookup itself. These do the same with the objects behind the proxies.
    """

    def get_auth(self):
        headers = request._get_current_object().headers
        if self.header not in headers:
            return None
        auth = Authorization(self.scheme)
        auth.token = headers[self.header]
        return auth

    def current_user(self):
        return g._get_current_object().get("flask_httpauth_user")

    def ensure_sync(self, f):
        return current_app._get_current_object().ensure_sync(f)


auth = ApiKeyAuth(scheme="ApiKey", header=HEADER)


@dataclass(frozen=True)
class Caller:
    """Who is calling: the key's owner, as the views need it."""

    user_id: str
    key_id: str
    wallet: str
    role: str


def new_api_key():
    """Return a fresh key (the plaintext, shown once) and the hash that is stored."""
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    return key, hash_api_key(key)


def hash_api_key(key):
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


@auth.verify_token
def verify_api_key(key):
    if not key or len(key) > _MAX_KEY_LENGTH:
        return None
    key_hash = hash_api_key(key)
    app = current_app._get_current_object()
    cache = _key_cache(app)
    entry = cache.get(key_hash)
    now = time.monotonic()
    if entry is None or entry.expires < now:
        entry = _look_up(key_hash, now + app.config["IDENTITY_KEY_CACHE_SECONDS"])
        if entry is None:
            cache.pop(key_hash, None)
            return None
        cache[key_hash] = entry
    if now >= entry.touch_after:
        _touch_last_login(entry, app.config["IDENTITY_LAST_LOGIN_INTERVAL"])
    return entry.caller


class _CachedKey:
    """A live key as this worker last saw it: whose it is, and until when to believe that.

    `touch_after` (monotonic, like `expires`) is when the user's last_login may next be written:
    at once for a fresh lookup, so that the database decides.
    """

    __slots__ = ("caller", "last_login", "expires", "touch_after")

    def __init__(self, caller, last_login, expires):
        self.caller = caller
        self.last_login = last_login
        self.expires = expires
        self.touch_after = 0.0


# The query of every cache miss, built once and run through fetch_one.
_KEY_QUERY = (
    select(ApiKey.id.label("key_id"), User.id.label("user_id"), User.wallet, User.role, User.last_login)
    .join(User, ApiKey.user_id == User.id)
    .where(ApiKey.key_hash == bindparam("key_hash"), ApiKey.revoked_at.is_(None))
)


def _look_up(key_hash, expires):
    row = fetch_one(_KEY_QUERY, {"key_hash": key_hash})
    if row is None:
        return None
    key_id, user_id, wallet, role, last_login = row
    return _CachedKey(Caller(user_id=user_id, key_id=key_id, wallet=wallet, role=role), last_login, expires)


def _key_cache(app):
    """This app's cache of key lookups, by key hash.

    Looking the key up is most of the work of a read; a worker believes a lookup for
    IDENTITY_KEY_CACHE_SECONDS, which bounds how long a key revoked elsewhere still works here.
    """
    return app.extensions.setdefault("identity_key_cache", {})


def forget_keys():
    """Drop this process's cached key lookups, so that a revocation made here takes effect at once."""
    if has_app_context():
        _key_cache(current_app).clear()


def _touch_last_login(entry, interval):
    """Record the login at most once an interval, so that reads do not all turn into writes."""
    now = utcnow()
    cutoff = now - timedelta(seconds=interval)
    if entry.last_login is None or entry.last_login <= cutoff:
        user_id = entry.caller.user_id
        with write_transaction() as session:
            # The condition is repeated in SQL so that concurrent workers write it once.
            session.execute(
                update(User)
                .where(User.id == user_id, or_(User.last_login.is_(None), User.last_login <= cutoff))
                .values(last_login=now)
            )
        entry.last_login = now
    # Until the interval since the last login has passed, the requests of this key need not ask.
    entry.touch_after = time.monotonic() + (entry.last_login - cutoff).total_seconds()


ADMIN_ONLY_DETAIL = "Only an Admin key may do this."


@auth.get_user_roles
def caller_roles(caller):
    """The role of the key's user, for `auth.login_required(role="Admin")`."""
    return caller.role


@auth.error_handler
def unauthorized(status):
    if status == 403:  # a valid key whose role is not the one the route needs
        return problem(403, ADMIN_ONLY_DETAIL)
    # One answer for missing, unknown and revoked keys: the response must not tell them apart.
    return problem(401, UNAUTHORIZED_DETAIL, headers={"WWW-Authenticate": CHALLENGE})


def current_caller():
    """The Caller of the request being served."""
    return auth.current_user()
