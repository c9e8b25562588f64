"""The service's operations, shared by the HTTP views, the CLI and the Python API."""

import logging
import uuid
from datetime import timedelta

from flask import current_app
from sqlalchemy import and_, bindparam, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError

from . import content, history
from .auth import forget_keys
from .errors import Forbidden, IdentityExists, KeyNotFound, KeyNotLive
from .extensions import db, single_read, write_transaction
from .keys import new_api_key
from .live import wake as wake_live_feeds
from .models import OFF_CHAIN, ApiKey, Identity, User, new_id, utcnow
from .statements import read_one, typed_row, write_connection
from .wallets import checksum_wallet

ROLES = ("User", "Admin")
SCOPES = ("write", "read")
# Who issued or revoked a key on the command line, or through the Python API (identity.seed).
CLI = "cli"
MIN_EXPIRES_IN, MAX_EXPIRES_IN = 60, 10 * 365 * 86_400
MAX_GRACE_SECONDS = 86_400
# Every key event (issued, rotated, revoked) is a line here, with the key's id and the acting wallet; never the key.
key_log = logging.getLogger("identity.keys")

IDENTITIES = Identity.__table__
USERS = User.__table__
# The creator's columns ride along with the identity's, after them, under this prefix (see identity_record).
_CREATOR = "creator__"
# An identity and its creator in one statement: add a where clause, an order, a limit.
IDENTITIES_WITH_CREATOR = select(IDENTITIES, *(column.label(_CREATOR + column.key) for column in USERS.c)).join_from(
    IDENTITIES, USERS, IDENTITIES.c.creator_id == USERS.c.id
)
_IDENTITY_BY_ID = IDENTITIES_WITH_CREATOR.where(IDENTITIES.c.identity_id == bindparam("identity_id"))
_IDENTITY_OF_CONTENT = select(IDENTITIES.c.identity_id).where(IDENTITIES.c.content_id == bindparam("content_id"))
_USER_OF_WALLET = select(USERS).where(USERS.c.wallet == bindparam("wallet"))
# A user for a wallet unless one exists (its row is left as it is): the insert's rowcount tells which.
_NEW_USER = {
    "sqlite": sqlite.insert(USERS).on_conflict_do_nothing(index_elements=[USERS.c.wallet]),
    "postgresql": postgresql.insert(USERS).on_conflict_do_nothing(index_elements=[USERS.c.wallet]),
}


_IDENTITY_KEYS = tuple(IDENTITIES.c.keys())
_CREATOR_KEYS = tuple(USERS.c.keys())


def identity_record(row):
    """A row of IDENTITIES_WITH_CREATOR as the mapping the Identity schema dumps: the identity's
    columns, and its creator's under "creator"."""
    split = len(_IDENTITY_KEYS)
    record = dict(zip(_IDENTITY_KEYS, row[:split], strict=True))
    record["creator"] = dict(zip(_CREATOR_KEYS, row[split:], strict=True))
    return record


def get_identity(identity_id):
    """The Identity with this identity_id (see identity_record), or None."""
    if not content.has_identity_id_form(identity_id):
        # No stored identity has a malformed id; and PostgreSQL refuses some strings (NUL) outright.
        return None
    with single_read() as connection:
        row = connection.execute(_IDENTITY_BY_ID, {"identity_id": identity_id}).one_or_none()
    return None if row is None else identity_record(row)


def get_identity_row(identity_id):
    """The row of IDENTITIES_WITH_CREATOR with this identity_id as the driver gives it, and how to
    convert it (typed_row); or None: the one statement of a GET (see read_one).

    The row serves to tell a 404 and a 410, and as the key of the identity's body
    (identity.representation), which typed_row gives in the models' types when it is not known yet.
    """
    if not content.has_identity_id_form(identity_id):
        return None
    return read_one(_IDENTITY_BY_ID, identity_id)


def canonical_content(identity):
    """The canonical bytes of an identity's content: exactly the bytes its content_id hashes."""
    # Stored values are already normalized; content_of leaves them as they are and drops the nulls.
    return content.canonical_bytes(content.content_of(identity))


def create_identity(fields, caller):
    """Create an off-chain Identity from validated `fields` on behalf of `caller`; returns it (see identity_record).

    Raises Forbidden when a User key names another creator, IdentityExists for known content.
    """
    creator = fields.get("creator") or caller.wallet
    if caller.role != "Admin" and creator != caller.wallet:
        raise Forbidden("A User key may create identities only with its own wallet as creator.")
    address = content.address(fields, current_app.config["IDENTITY_DID_NAMESPACE"])
    now = utcnow()
    values = {
        "id": new_id(),
        "identity_id": address.identity_id,
        "content_id": address.content_id,
        "identity_hash": address.identity_hash,
        **{name: address.content.get(name) for name in content.CONTENT_FIELDS},
        **OFF_CHAIN,
        "created_at": now,
        "updated_at": now,
    }
    # The creator is read before the write lock is taken, so that the lock is held for the writes
    # alone (every other create waits for it); a wallet not seen yet gets its user under the lock.
    found = read_one(_USER_OF_WALLET, creator)
    known = None if found is None else dict(zip(_CREATOR_KEYS, typed_row(*found), strict=True))
    try:
        with write_connection() as writes:
            user = known if known is not None else _new_creator(writes, creator, now)
            values["creator_id"] = user["id"]
            writes.insert(IDENTITIES, values)
            history.record_created(writes, address.identity_id, caller.wallet, now)
    except IntegrityError:
        # Known content: the unique content_id refused the insert, and the transaction, the creator's
        # new user included, is undone. Asking first would cost every create a round trip, under the
        # write lock, for what is rare; and the constraint is what decides anyway (another writer may
        # store the same content between a check and the insert).
        _refuse_known_content(db.session, address.content_id)
        raise
    wake_live_feeds()
    return {**values, "creator": user}


def _new_creator(writes, wallet, now):
    """The user of `wallet`, a creator that was not a user when the create read it: a new User, or
    the one another writer has made since (a mapping of its columns), in the transaction of `writes`."""
    user = {"id": new_id(), "wallet": wallet, "role": "User", "created_at": now, "updated_at": now, "last_login": None}
    if writes.insert(_NEW_USER[writes.dialect.name], user):
        return user
    # Another node made this wallet's user since the read (SQLite's write lock leaves only the time
    # before the lock was taken); that user is committed, and this read sees it.
    return dict(zip(_CREATOR_KEYS, writes.read_one(_USER_OF_WALLET, {"wallet": wallet}), strict=True))


def _user_of_wallet(session, wallet, role):
    """The user of `wallet` (a mapping of its columns); a wallet the service has not seen becomes a user with `role`.

    `session`: a Session, in its write transaction."""
    row = session.execute(_USER_OF_WALLET, {"wallet": wallet}).one_or_none()
    if row is not None:
        return row._asdict()
    now = utcnow()
    user = {"id": new_id(), "wallet": wallet, "role": role, "created_at": now, "updated_at": now, "last_login": None}
    try:
        # A savepoint, so that losing the race below does not undo the rest of the caller's transaction.
        with session.begin_nested():
            session.execute(USERS.insert(), user)
    except IntegrityError:
        # Another node created this wallet's user since our read (SQLite's write lock rules that out,
        # PostgreSQL's READ COMMITTED does not); that user is committed now, and this read sees it.
        user = session.execute(_USER_OF_WALLET, {"wallet": wallet}).one()._asdict()
    return user


def _refuse_known_content(session, content_id):
    """Raise IdentityExists if an identity holds this content."""
    existing = session.execute(_IDENTITY_OF_CONTENT, {"content_id": content_id}).scalar_one_or_none()
    if existing is not None:
        raise IdentityExists(existing)


def issue_key(wallet, role=None, *, scope="write", label=None, expires_in=None, created_by=CLI):
    """Issue a key for `wallet`; returns (plaintext key, ApiKey).

    A new wallet becomes a user with `role` (default User); for a known one, a given role replaces its role.
    `scope` is write or read; `expires_in` seconds (MIN_EXPIRES_IN to MAX_EXPIRES_IN) or None for no
    expiry; `created_by` is the wallet of the issuing key, or "cli".
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
        user = _user_of_wallet(session, wallet, role or "User")
        role_changed = role is not None and user["role"] != role
        if role_changed:
            session.execute(update(User).where(User.id == user["id"]).values(role=role, updated_at=now))
        key, api_key = _add_key(session, user["id"], now, scope, label, expires_at, created_by)
    if role_changed:
        key_log.info("user %s is now %s, by %s", wallet, role, created_by,
                     extra={"wallet": wallet, "role": role, "acting_wallet": created_by})
    key_log.info("key %s issued for %s by %s", api_key.id, wallet, created_by,
                 extra={"key_id": api_key.id, "wallet": wallet, "acting_wallet": created_by, "scope": scope})
    return key, api_key


def _add_key(session, user_id, now, scope="write", label=None, expires_at=None, created_by=CLI):
    key, key_hash = new_api_key()
    api_key = ApiKey(
        id=new_id(), user_id=user_id, key_hash=key_hash, hint=key[:9], created_at=now,
        scope=scope, label=label, expires_at=expires_at, created_by=created_by,
    )
    session.add(api_key)
    return key, api_key


def list_keys():
    """Every key, newest first, with its user; never the secret."""
    keys = db.session.execute(select(ApiKey).order_by(ApiKey.created_at.desc())).scalars().all()
    db.session.commit()
    return keys


def is_key_id(value):
    """Whether `value` has the form of a key id (a UUID): no stored key has another, and PostgreSQL
    refuses some strings (NUL) outright."""
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
            api_key.revoked_at = now
    forget_keys()
    for api_key in keys:
        key_log.info("key %s revoked by %s", api_key.id, by, extra={"key_id": api_key.id, "acting_wallet": by})
    return len(keys)


def rotate_key(key_id, grace_seconds=0, by=CLI):
    """Issue a new key for the user of live key `key_id`, with its scope, label and expiry, and revoke
    that key after `grace_seconds` (0 to MAX_GRACE_SECONDS), in one transaction.

    Returns (plaintext key, new ApiKey). Raises KeyNotFound for an unknown id, KeyNotLive for a key
    that is revoked, expired, or rotated already.
    """
    if not 0 <= grace_seconds <= MAX_GRACE_SECONDS:
        raise ValueError(f"grace_seconds must be 0 to {MAX_GRACE_SECONDS:,}.")
    now = utcnow()
    with write_transaction() as session:
        old = None
        if is_key_id(key_id):
            old = session.execute(select(ApiKey).where(ApiKey.id == key_id)).scalar_one_or_none()
        if old is None:
            raise KeyNotFound()
        _refuse_dead_key(old, now)
        old.revoked_at = now + timedelta(seconds=grace_seconds)
        # Rotation renews the secret, not the term: the new key expires when the old one would have.
        key, api_key = _add_key(session, old.user_id, now, old.scope, old.label, old.expires_at, by)
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
