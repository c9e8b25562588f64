"""Users: the wallets the service knows, each with its role. A wallet becomes a user when it is issued a
key, creates an identity, or is named as an identity's creator by an Admin or an import.

Each user has a grant, what a sign-in with Ethereum may issue it at most (identity.core.signin): `read` for a
wallet that came into being with a read key, or that an Admin narrowed (set_grant); `write` for every other,
and for one that is issued a write key (identity.core.keys.issue_key).
"""

import logging

from sqlalchemy import bindparam, func, select, update
from sqlalchemy.dialects import postgresql, sqlite

from ..storage.database import db, write_transaction
from ..storage.models import IdentityCount, User, new_id, utcnow
from . import audit
from .errors import UserNotFound
from .wallets import checksum_wallet

# What a sign-in may issue a wallet at most (users.grant): the scopes of keys.
GRANTS = ("write", "read")
# Changes of who may do what are logged with the keys' events.
log = logging.getLogger("identity.keys")

USERS = User.__table__
USER_COLUMNS = tuple(USERS.c.keys())
_USER_OF_WALLET = select(USERS).where(USERS.c.wallet == bindparam("wallet"))
# A user for a wallet unless one exists (its row is left as it is): the id it returns tells which.
_NEW_USER = {
    "sqlite": sqlite.insert(USERS).on_conflict_do_nothing(index_elements=[USERS.c.wallet]).returning(USERS.c.id),
    "postgresql": postgresql.insert(USERS).on_conflict_do_nothing(index_elements=[USERS.c.wallet]).returning(USERS.c.id),
}


def find_user(session, wallet):
    """The user of `wallet` (EIP-55) as a mapping of its columns, or None (`session`: a Session or a Connection)."""
    row = session.execute(_USER_OF_WALLET, {"wallet": wallet}).one_or_none()
    return None if row is None else row._asdict()


def user_of_wallet(session, wallet, role="User", now=None, grant="write"):
    """The user of `wallet` (a mapping of its columns); a wallet the service has not seen becomes a user
    with `role` and `grant` (what a sign-in may issue it at most). `session` is in its write transaction.

    Two nodes may make the same wallet's user at once: the insert does nothing when another has, and
    the read that follows sees that user (committed by then: the insert waited for it).
    """
    user = find_user(session, wallet)
    if user is not None:
        return user
    now = now or utcnow()
    user = {"id": new_id(), "wallet": wallet, "role": role, "grant": grant, "created_at": now, "updated_at": now,
            "last_login": None}
    dialect = session.get_bind().dialect.name
    if session.execute(_NEW_USER[dialect], user).first() is not None:
        return user
    return find_user(session, wallet)


def user_with_count(wallet):
    """The user of `wallet` (any case) with identity_count, the identities it created that are not removed;
    UserNotFound if none."""
    try:
        wallet = checksum_wallet(wallet)
    except ValueError:
        raise UserNotFound() from None
    user = find_user(db.session, wallet)
    if user is None:
        db.session.commit()
        raise UserNotFound()
    # The counts that triggers keep (migration 0002): a few rows, however many identities.
    count = select(func.coalesce(func.sum(IdentityCount.n), 0)).where(
        IdentityCount.scope == user["id"], IdentityCount.status != "removed"
    )
    identity_count = int(db.session.execute(count).scalar())
    db.session.commit()
    return {**user, "identity_count": identity_count}


def set_grant(wallet, grant, by="cli"):
    """Set what a sign-in with Ethereum may issue `wallet` (any case) at most: `read` narrows it, `write` widens it
    (as issuing it a write key does). Returns the user as user_with_count; UserNotFound for an unknown wallet. The
    wallet's keys stay as they are: revoke its write keys to take write access away now."""
    if grant not in GRANTS:
        raise ValueError(f"Unknown grant {grant!r}: choose one of {', '.join(GRANTS)}.")
    try:
        wallet = checksum_wallet(wallet)
    except ValueError:
        raise UserNotFound() from None
    now = utcnow()
    with write_transaction() as session:
        changed = session.execute(
            update(User).where(User.wallet == wallet, User.grant != grant).values(grant=grant, updated_at=now)
        ).rowcount
        if not changed and find_user(session, wallet) is None:
            raise UserNotFound()
        if changed:
            before = next(other for other in GRANTS if other != grant)
            audit.record("user.grant", "user", wallet, before={"grant": before}, after={"grant": grant})
    if changed:
        log.info("user %s is now grant %s, by %s", wallet, grant, by,
                 extra={"wallet": wallet, "grant": grant, "acting_wallet": by})
    return user_with_count(wallet)
