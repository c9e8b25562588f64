"""The service's operations, shared by the HTTP views, the CLI and the Python API."""

from flask import current_app
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from . import content
from .auth import new_api_key
from .errors import Forbidden, IdentityExists
from .extensions import db, write_transaction
from .models import ApiKey, Identity, User, utcnow
from .wallets import checksum_wallet

ROLES = ("User", "Admin")


def get_identity(identity_id):
    """The Identity with this identity_id, or None."""
    if content.parse_identity_id(identity_id) is None:
        # No stored identity has a malformed id; and PostgreSQL refuses some strings (NUL) outright.
        return None
    identity = db.session.execute(select(Identity).where(Identity.identity_id == identity_id)).scalar_one_or_none()
    db.session.commit()
    return identity


def canonical_content(identity):
    """The canonical bytes of an identity's content: exactly the bytes its content_id hashes."""
    # Stored values are already normalized; content_of leaves them as they are and drops the nulls.
    fields = {name: getattr(identity, name) for name in content.CONTENT_FIELDS}
    return content.canonical_bytes(content.content_of(fields))


def create_identity(fields, caller):
    """Create an off-chain Identity from validated `fields` on behalf of `caller`.

    Raises Forbidden when a User key names another creator, IdentityExists for known content.
    """
    creator = fields.get("creator") or caller.wallet
    if caller.role != "Admin" and creator != caller.wallet:
        raise Forbidden("A User key may create identities only with its own wallet as creator.")
    address = content.address(fields, current_app.config["IDENTITY_DID_NAMESPACE"])
    try:
        with write_transaction() as session:
            _refuse_known_content(session, address.content_id)
            user = _user_of_wallet(session, creator, "User")
            now = utcnow()
            identity = Identity(
                identity_id=address.identity_id,
                content_id=address.content_id,
                identity_hash=address.identity_hash,
                creator=user,
                created_at=now,
                updated_at=now,
                **{name: address.content.get(name) for name in content.CONTENT_FIELDS},
            )
            session.add(identity)
    except IntegrityError:
        # Another writer stored the same content between our check and our insert.
        _refuse_known_content(db.session, address.content_id)
        raise
    return identity


def _user_of_wallet(session, wallet, role):
    """The user of `wallet`; a wallet the service has not seen becomes a user with `role`."""
    query = select(User).where(User.wallet == wallet)
    user = session.execute(query).scalar_one_or_none()
    if user is not None:
        return user
    try:
        # A savepoint, so that losing the race below does not undo the rest of the caller's transaction.
        with session.begin_nested():
            user = User(wallet=wallet, role=role)
            session.add(user)
    except IntegrityError:
        # Another node created this wallet's user since our read (SQLite's write lock rules that out,
        # PostgreSQL's READ COMMITTED does not); that user is committed now, and this read sees it.
        user = session.execute(query).scalar_one()
    return user


def _refuse_known_content(session, content_id):
    existing = session.execute(select(Identity.identity_id).where(Identity.content_id == content_id)).scalar()
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
        if role is not None and user.role != role:
            user.role = role
            user.updated_at = utcnow()
        key, api_key = _add_key(session, user)
    return key, api_key


def _add_key(session, user):
    key, key_hash = new_api_key()
    api_key = ApiKey(user=user, key_hash=key_hash, hint=key[:9])
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
        key, api_key = _add_key(session, old.user)
    return key, api_key
