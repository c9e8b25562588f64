"""Sessions of the Admin console: a sign-in with an Admin key, or an Admin wallet's signed message, that
lasts, so that the key is pasted once (or the wallet asked once) and nothing travels again.

The browser holds a random token (32 bytes); the database holds its SHA-256, the id of the key that
signed in, and the session's CSRF token. Each use of a session reads it with its key and checks both
in one statement: the session is refused as soon as it has ended (sign-out, SESSION_SECONDS) or its
key stopped working (revoked, rotated out, expired; keys.live decides), on every worker and node at
once, with no cache to wait for.

A wallet's session has a key too, issued for it by its sign-in (label CONSOLE_LABEL, created_by siwe,
expiring when the session does): the rule above then holds for both kinds, so that revoking that key on
the Keys page, with DELETE /keys/<id> or `flask keys revoke` ends the session. Its plaintext is never
shown nor kept: the session is the only way to use it.
"""

import hashlib
import hmac
import logging
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import bindparam, delete, select

from ..storage.database import one_statement, write_transaction
from ..storage.models import ApiKey, ConsoleSession, User, utcnow
from . import audit, signin
from .errors import ServiceError
from .keys import Caller, add_key, caller_of, forget_keys, key_log, live
from .users import USER_COLUMNS, find_user

SESSION_SECONDS = 12 * 3600
# The label of the key a wallet's sign-in issues for its session.
CONSOLE_LABEL = "console sign-in"
# Sign-ins are logged with the key's id and the wallet; never the key, nor a session's token.
log = logging.getLogger(__name__)


class SignInRefused(ServiceError):
    """The key cannot open a console session; `admin_only` tells a valid key of another role apart."""

    def __init__(self, detail, admin_only=False):
        super().__init__(detail)
        self.admin_only = admin_only


UNKNOWN_KEY = (
    "This key does not work: it is unknown, revoked or expired. Paste an Admin key; "
    "`flask --app app keys create --wallet ADDRESS --role Admin` issues one."
)
NOT_ADMIN = (
    "This is a User key: the console is for Admins, and a User key may not see it. Sign in with a key of "
    "an Admin (an Admin issues one on the Keys page, with POST /keys, or with "
    "`flask --app app keys create --wallet ADDRESS --role Admin`)."
)
# What admit answers for an Admin wallet granted read only that asked for a write session, and what it may ask.
GRANTED_READ = "granted read"
READ_ONLY_SESSION = ('tick "Read-only" on the sign-in page and sign again. An Admin widens the grant by issuing the '
                     "wallet a write key (on the Keys page, POST /keys, or `flask keys create --scope write`).")
NOT_ADMIN_WALLET = (
    "The wallet {wallet} {is_what}: the console is for Admins, so no session was opened. To make it an Admin's, "
    "an Admin issues it a key of role Admin (on the Keys page, with POST /keys, or with "
    "`flask --app app keys create --wallet {wallet} --role Admin`); or sign in with an Admin key."
)


@dataclass(frozen=True)
class Session:
    """A live console session: its id (the hash of its token), who is signed in (the key's Caller), the
    token its forms carry, and when it ends at the latest."""

    id: str
    caller: Caller
    csrf_token: str
    expires_at: datetime


def _digest(token):
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def open_session(key):
    """Sign in with API key `key`: returns (token, Session), the token for the browser's cookie.

    Raises SignInRefused for a key that does not work, or that is not an Admin's.
    """
    caller = caller_of(key)
    if caller is None:
        raise SignInRefused(UNKNOWN_KEY)
    if caller.role != "Admin":
        audit.record_now("session.open", "session", None, outcome="refused", detail="not an Admin key",
                         actor=_actor(caller))
        log.info("console sign-in refused to a %s key %s", caller.role, caller.key_id,
                 extra={"key_id": caller.key_id, "wallet": caller.wallet})
        raise SignInRefused(NOT_ADMIN, admin_only=True)
    token, now = secrets.token_urlsafe(32), utcnow()
    session = Session(_digest(token), caller, secrets.token_urlsafe(32), now + timedelta(seconds=SESSION_SECONDS))
    with write_transaction() as db_session:
        signin.record_login(db_session, dict(caller.user), now)
        _store(db_session, session, now)
        audit.record("session.open", "session", session.id[:16], actor=_actor(caller), after={"way": "key"})
    forget_keys()  # this process's lookups carry the user's last_login before this sign-in
    _log_sign_in(session, "key")
    return token, session


def open_wallet_session(text, signature, scope="write"):
    """Sign in with an Admin wallet: its EIP-4361 message `text` and personal_sign `signature`, checked as POST
    /auth/siwe checks them (identity.core.signin, the nonce spent alike). Returns (token, Session), the session
    holding a key of `scope` issued for it in the transaction that spends the nonce.

    Raises InvalidMessage or SigninRefused as a sign-in does, SignInRefused (admin_only) when every check passed
    but the wallet is not an Admin's, and BeyondGrant when it is but asks for `write` and is granted read only
    (users.grant): then nothing is issued, the nonce is spent all the same, and an unknown wallet stays unknown
    (it does not become a User, as it would through POST /auth/siwe).
    """
    token = secrets.token_urlsafe(32)

    def admit(db_session, message, now, expires_at):
        user = find_user(db_session, message.address)
        if user is None or user["role"] != "Admin":
            audit.record("session.open", "session", None, outcome="refused", detail="not an Admin wallet",
                         actor={"wallet": message.address, "user_id": user and user["id"], "role": user and user["role"]})
            return None, user and user["role"]
        if signin.granted_scope(user, scope) is None:
            signin.record_beyond_grant(user)
            return None, GRANTED_READ
        signin.record_login(db_session, user, now)
        expires_at = min(expires_at, now + timedelta(seconds=SESSION_SECONDS))
        _, api_key = add_key(db_session, user["id"], now, scope, CONSOLE_LABEL, expires_at, created_by=signin.SIWE)
        caller = Caller(user["id"], api_key.id, user["wallet"], user["role"], scope, user)
        session = Session(_digest(token), caller, secrets.token_urlsafe(32), expires_at)
        _store(db_session, session, now)
        signin.record_signed_in(api_key, user)
        audit.record("session.open", "session", session.id[:16], actor=_actor(caller), after={"way": "wallet"})
        return session, user["role"]

    # admit runs whenever checked_sign_in returns: every check passed.
    message, (session, role) = signin.checked_sign_in(text, signature, admit)
    if role == GRANTED_READ:
        raise signin.beyond_grant(message, READ_ONLY_SESSION)
    if session is None:
        is_what = "is not known to this service" if role is None else f"is a {role}'s"
        log.info("console sign-in refused to the wallet %s (%s)", message.address, is_what,
                 extra={"wallet": message.address})
        raise SignInRefused(NOT_ADMIN_WALLET.format(wallet=message.address, is_what=is_what), admin_only=True)
    caller = session.caller
    key_log.info("key %s issued for %s by the console's sign-in with Ethereum", caller.key_id, caller.wallet, extra={
        "key_id": caller.key_id, "wallet": caller.wallet, "acting_wallet": signin.SIWE, "scope": caller.scope,
    })
    _log_sign_in(session, "wallet")
    return token, session


def _actor(caller):
    """The audit log's actor of a sign-in to the console: the key's user, whatever the request's context says."""
    return {"user_id": caller.user_id, "wallet": caller.wallet, "role": caller.role, "key_id": caller.key_id}


def _store(db_session, session, now):
    # Ended sessions go as new ones come: the table holds about as many rows as people signed in.
    db_session.execute(delete(ConsoleSession).where(ConsoleSession.expires_at <= now))
    db_session.add(ConsoleSession(id=session.id, key_id=session.caller.key_id, csrf_token=session.csrf_token,
                                  created_at=now, expires_at=session.expires_at))


def _log_sign_in(session, way):
    caller = session.caller
    log.info("console sign-in by %s with key %s (by %s)", caller.wallet, caller.key_id, way,
             extra={"key_id": caller.key_id, "wallet": caller.wallet, "scope": caller.scope, "sign_in": way})


_SESSION_AND_KEY = (
    select(ConsoleSession.csrf_token, ConsoleSession.expires_at, ApiKey.id, ApiKey.scope, *User.__table__.c)
    .join(ApiKey, ConsoleSession.key_id == ApiKey.id)
    .join(User, ApiKey.user_id == User.id)
    .where(ConsoleSession.id == bindparam("session_id"), ConsoleSession.expires_at > bindparam("now"), live(bindparam("now")))
)


def session_of(token):
    """The live Session whose cookie holds `token`, or None: unknown, signed out, past its 12 hours, or
    its key no longer working."""
    if not token or len(token) > 128:
        return None
    now, session_id = utcnow(), _digest(token)
    with one_statement() as db_session:
        row = db_session.execute(_SESSION_AND_KEY, {"session_id": session_id, "now": now}).one_or_none()
    if row is None:
        return None
    csrf_token, expires_at, key_id, scope, *user_values = row
    user = dict(zip(USER_COLUMNS, user_values, strict=True))
    caller = Caller(user["id"], key_id, user["wallet"], user["role"], scope, user)
    return Session(session_id, caller, csrf_token, expires_at)


def close_session(token):
    """Sign out: the session with this token ends now, everywhere."""
    if token and len(token) <= 128:
        with write_transaction() as db_session:
            ended = db_session.execute(delete(ConsoleSession).where(ConsoleSession.id == _digest(token))).rowcount
            if ended:
                audit.record("session.close", "session", _digest(token)[:16])


def holds_csrf_token(session, token):
    """Whether a form's `token` is its session's (compared in constant time)."""
    return bool(token) and hmac.compare_digest(session.csrf_token.encode(), token.encode("utf-8", "surrogatepass"))
