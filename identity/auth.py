"""API keys: how they are made, stored, and checked on every request."""

import hashlib
import secrets
from dataclasses import dataclass
from datetime import timedelta

from flask import current_app
from flask_httpauth import HTTPTokenAuth
from sqlalchemy import or_, select, update

from .errors import problem
from .extensions import db, write_transaction
from .models import ApiKey, User, utcnow

# A fixed prefix lets secret scanners find a leaked key; 32 random bytes give 256 bits of entropy.
KEY_PREFIX = "idsk_"
HEADER = "x-api-key"
CHALLENGE = f'ApiKey header="{HEADER}"'
UNAUTHORIZED_DETAIL = f"A valid API key is required in the {HEADER} header."
_MAX_KEY_LENGTH = 128

auth = HTTPTokenAuth(scheme="ApiKey", header=HEADER)


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
    row = db.session.execute(
        select(ApiKey.id, User.id, User.wallet, User.role, User.last_login)
        .join(User, ApiKey.user_id == User.id)
        .where(ApiKey.key_hash == hash_api_key(key), ApiKey.revoked_at.is_(None))
    ).first()
    db.session.commit()
    if row is None:
        return None
    key_id, user_id, wallet, role, last_login = row
    _touch_last_login(user_id, last_login)
    return Caller(user_id=user_id, key_id=key_id, wallet=wallet, role=role)


def _touch_last_login(user_id, last_login):
    """Record the login at most once an interval, so that reads do not all turn into writes."""
    now = utcnow()
    cutoff = now - timedelta(seconds=current_app.config["IDENTITY_LAST_LOGIN_INTERVAL"])
    if last_login is not None and last_login > cutoff:
        return
    with write_transaction() as session:
        # The condition is repeated in SQL so that concurrent workers write it once.
        session.execute(
            update(User)
            .where(User.id == user_id, or_(User.last_login.is_(None), User.last_login <= cutoff))
            .values(last_login=now)
        )


@auth.error_handler
def unauthorized(status):
    # One answer for missing, unknown and revoked keys: the response must not tell them apart.
    return problem(401, UNAUTHORIZED_DETAIL, headers={"WWW-Authenticate": CHALLENGE})


def current_caller():
    """The Caller of the request being served."""
    return auth.current_user()
