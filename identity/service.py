"""The service's operations, shared by the HTTP views, the CLI and the Python API."""

from flask import current_app
from sqlalchemy import bindparam, select, update
from sqlalchemy.exc import IntegrityError

from . import content, history
from .auth import forget_keys
from .errors import Forbidden, IdentityExists
from .extensions import db, single_read, write_transaction
from .keys import new_api_key
from .models import OFF_CHAIN, ApiKey, Identity, User, new_id, utcnow
from .wallets import checksum_wallet

ROLES = ("User", "Admin")

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
    try:
        with write_transaction() as session:
            user = _user_of_wallet(session, creator, "User")
            values["creator_id"] = user["id"]
            session.execute(IDENTITIES.insert(), values)
            history.record_created(session, address.identity_id, caller.wallet, now)
    except IntegrityError:
        # Known content: the unique content_id refused the insert, and the transaction, the creator's
        # new user included, is undone. Asking first would cost every create a round trip, under the
        # write lock, for what is rare; and the constraint is what decides anyway (another writer may
        # store the same content between a check and the insert).
        _refuse_known_content(db.session, address.content_id)
        raise
    return {**values, "creator": user}


def _user_of_wallet(session, wallet, role):
    """The user of `wallet` (a mapping of its columns); a wallet the service has not seen becomes a user with `role`."""
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


def issue_key(wallet, role=None):
    """Issue a key for `wallet`; returns (plaintext key, ApiKey).

    A new wallet becomes a user with `role` (default User); for a known one, a given role replaces its role.
    """
    if role is not None and role not in ROLES:
        raise ValueError(f"Unknown role {role!r}: choose one of {', '.join(ROLES)}.")
    wallet = checksum_wallet(wallet)
    with write_transaction() as session:
        user = _user_of_wallet(session, wallet, role or "User")
        if role is not None and user["role"] != role:
            session.execute(update(User).where(User.id == user["id"]).values(role=role, updated_at=utcnow()))
        key, api_key = _add_key(session, user["id"])
    return key, api_key


def _add_key(session, user_id):
    key, key_hash = new_api_key()
    api_key = ApiKey(user_id=user_id, key_hash=key_hash, hint=key[:9])
    session.add(api_key)
    return key, api_key


def list_keys():
    """Every key, newest first, with its user; never the secret."""
    keys = db.session.execute(select(ApiKey).order_by(ApiKey.created_at.desc())).scalars().all()
    db.session.commit()
    return keys


def revoke_key(key_id=None, wallet=None):
    """Revoke one key by id, or every live key of a wallet; returns how many were revoked."""
    if (key_id is None) == (wallet is None):
        raise ValueError("Name either a key id or a wallet.")
    with write_transaction() as session:
        query = select(ApiKey).where(ApiKey.revoked_at.is_(None))
        if key_id is not None:
            query = query.where(ApiKey.id == key_id)
        else:
            query = query.join(User).where(User.wallet == checksum_wallet(wallet))
        keys = session.execute(query).scalars().all()
        now = utcnow()
        for api_key in keys:
            api_key.revoked_at = now
    forget_keys()
    return len(keys)


def rotate_key(key_id):
    """Issue a new key for the user of live key `key_id` and revoke that key, in one transaction.

    Returns (plaintext key, new ApiKey). Raises ValueError when no live key has that id.
    """
    with write_transaction() as session:
        old = session.execute(
            select(ApiKey).where(ApiKey.id == key_id, ApiKey.revoked_at.is_(None))
        ).scalar_one_or_none()
        if old is None:
            raise ValueError(f"No live key has the id {key_id!r}.")
        old.revoked_at = utcnow()
        key, api_key = _add_key(session, old.user_id)
    forget_keys()
    return key, api_key
