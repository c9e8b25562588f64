"""The service's operations, shared by the HTTP views, the CLI and the Python API."""

from dataclasses import dataclass, fields
from datetime import datetime

from flask import current_app
from sqlalchemy import bindparam, insert, select, type_coerce, update
from sqlalchemy.exc import IntegrityError

from . import content, history
from .auth import forget_keys, new_api_key
from .errors import Forbidden, IdentityExists
from .extensions import CoreTransaction, db, fetch_one, raw_write, write_transaction
from .models import AS_TEXT, OFF_CHAIN, ApiKey, Identity, User, new_id, utcnow
from .wallets import checksum_wallet

ROLES = ("User", "Admin")


@dataclass(slots=True)
class UserRecord:
    """A user as the responses show it. (Read with as_text=True, its timestamps are text: see get_identity.)"""

    id: str
    wallet: str
    role: str
    created_at: datetime
    updated_at: datetime
    last_login: datetime | None


@dataclass(slots=True)
class IdentityRecord:
    """An identity as the responses show it, with its creator.

    Read with as_text=True (see get_identity), its timestamps and amounts are the text the responses write.
    """

    id: str
    identity_id: str
    content_id: str
    identity_hash: str
    vault_id: int
    display_name: str
    description: str | None
    image: str | None
    external_reference: str | None
    corpora_id: str | None
    semantic: str | None
    creator_id: str
    created_at: datetime
    updated_at: datetime
    num_positions: int
    assets_sum: int
    conviction_sum: int
    conviction_price: int
    status: str
    is_user: bool
    user_conviction: int
    user_conviction_value: int
    creator: UserRecord


# The statements of the hot paths, built once, with their columns in the order of the records'
# fields, so that a row is a record's positional arguments. They run straight on pooled DBAPI
# connections (see fetch_one and raw_write): an identity is read or written in one statement each,
# and SQLAlchemy's per-execution machinery would only add cost around it.
_IDENTITIES = Identity.__table__
_USERS = User.__table__
_USER_FIELDS = [field.name for field in fields(UserRecord)]
_IDENTITY_FIELDS = [field.name for field in fields(IdentityRecord) if field.name != "creator"]


def _identity_with_creator(read=lambda column: column):
    return (
        select(*(read(_IDENTITIES.c[name]) for name in _IDENTITY_FIELDS), *(read(_USERS.c[name]) for name in _USER_FIELDS))
        .join_from(_IDENTITIES, _USERS, _IDENTITIES.c.creator_id == _USERS.c.id)
        .where(_IDENTITIES.c.identity_id == bindparam("identity_id"))
    )


def _as_text(column):
    """The column read as the responses write it, if its type has such a reading (models.AS_TEXT).
    The SQL is the same: type_coerce changes only how the driver's value is read."""
    text_type = AS_TEXT.get(type(column.type))
    return column if text_type is None else type_coerce(column, text_type)


_IDENTITY_WITH_CREATOR = _identity_with_creator()
_IDENTITY_WITH_CREATOR_AS_TEXT = _identity_with_creator(_as_text)
_IDENTITY_OF_CONTENT = select(_IDENTITIES.c.identity_id).where(_IDENTITIES.c.content_id == bindparam("content_id"))
_USER_OF_WALLET = select(*(_USERS.c[name] for name in _USER_FIELDS)).where(_USERS.c.wallet == bindparam("wallet"))
_INSERT_IDENTITY = insert(_IDENTITIES)
_INSERT_USER = insert(_USERS)


def get_identity(identity_id, *, as_text=False):
    """The Identity with this identity_id (an IdentityRecord), or None.

    as_text=True reads its timestamps and amounts as the text the responses write (see
    models.UTCDateTimeText): a record for a response, which schemas.identity_json passes through.
    """
    if not content.has_identity_id_form(identity_id):
        # No stored identity has a malformed id; and PostgreSQL refuses some strings (NUL) outright.
        return None
    # The hottest read of the service: one indexed SELECT, run on a pooled DBAPI connection.
    statement = _IDENTITY_WITH_CREATOR_AS_TEXT if as_text else _IDENTITY_WITH_CREATOR
    row = fetch_one(statement, {"identity_id": identity_id})
    if row is None:
        return None
    split = len(_IDENTITY_FIELDS)
    return IdentityRecord(*row[:split], UserRecord(*row[split:]))


def canonical_content(identity):
    """The canonical bytes of an identity's content: exactly the bytes its content_id hashes."""
    # Stored values are already normalized; content_of leaves them as they are and drops the nulls.
    fields = {name: getattr(identity, name) for name in content.CONTENT_FIELDS}
    return content.canonical_bytes(content.content_of(fields))


def create_identity(fields, caller):
    """Create an off-chain Identity from validated `fields` on behalf of `caller`; returns its IdentityRecord.

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
        with raw_write() as transaction:
            _refuse_known_content(transaction.first, address.content_id)
            user = _user_of_wallet(transaction, creator, "User")
            transaction.execute(_INSERT_IDENTITY, {**values, "creator_id": user.id})
            history.record_created(transaction, address.identity_id, caller.wallet, now)
    except IntegrityError:
        # Another writer stored the same content between our check and our insert.
        _refuse_known_content(fetch_one, address.content_id)
        raise
    return IdentityRecord(**values, creator_id=user.id, creator=user)


def _user_of_wallet(transaction, wallet, role):
    """The user of `wallet` (a UserRecord); a wallet the service has not seen becomes a user with `role`.

    `transaction` is a RawTransaction or a CoreTransaction.
    """
    row = transaction.first(_USER_OF_WALLET, {"wallet": wallet})
    if row is not None:
        return UserRecord(*row)
    now = utcnow()
    user = UserRecord(id=new_id(), wallet=wallet, role=role, created_at=now, updated_at=now, last_login=None)
    try:
        # A savepoint, so that losing the race below does not undo the rest of the caller's transaction.
        with transaction.savepoint():
            transaction.execute(_INSERT_USER, {name: getattr(user, name) for name in _USER_FIELDS})
    except IntegrityError:
        # Another node created this wallet's user since our read (SQLite's write lock rules that out,
        # PostgreSQL's READ COMMITTED does not); that user is committed now, and this read sees it.
        user = UserRecord(*transaction.first(_USER_OF_WALLET, {"wallet": wallet}))
    return user


def _refuse_known_content(first, content_id):
    """Raise IdentityExists if an identity holds this content; `first` runs the query (fetch_one's signature)."""
    existing = first(_IDENTITY_OF_CONTENT, {"content_id": content_id})
    if existing is not None:
        raise IdentityExists(existing[0])


def issue_key(wallet, role=None):
    """Issue a key for `wallet`; returns (plaintext key, ApiKey).

    A new wallet becomes a user with `role` (default User); for a known one, a given role replaces its role.
    """
    if role is not None and role not in ROLES:
        raise ValueError(f"Unknown role {role!r}: choose one of {', '.join(ROLES)}.")
    wallet = checksum_wallet(wallet)
    with write_transaction() as session:
        user = _user_of_wallet(CoreTransaction(session.connection()), wallet, role or "User")
        if role is not None and user.role != role:
            session.execute(update(User).where(User.id == user.id).values(role=role, updated_at=utcnow()))
        key, api_key = _add_key(session, user.id)
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
