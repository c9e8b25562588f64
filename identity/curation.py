"""Curation: what an Admin may change on an identity (its status, its on-chain figures), never its content.

Every change is checked and made under the identity's lock: SQLite's write lock, taken at BEGIN, or
PostgreSQL's row lock (SELECT ... FOR UPDATE). So a conditional change (If-Match) compares against the
identity as it is when the change is made, and of two changes made from the same ETag at once,
exactly one succeeds.
"""

from flask import current_app
from sqlalchemy import bindparam, update

from . import content, history
from .errors import IdentityNotFound, PreconditionFailed
from .extensions import write_transaction
from .headers import body_etag
from .models import utcnow
from .schemas import identity_schema
from .service import IDENTITIES, IDENTITIES_WITH_CREATOR, identity_record


def _as_is(value):
    return value


# The fields a change may name, and how the Identity object writes their values (the history keeps them so).
EDITABLE = {
    "status": _as_is,
    "vault_id": str,
    "num_positions": _as_is,
    "assets_sum": str,
    "conviction_sum": str,
    "conviction_price": str,
    "corpora_id": _as_is,
    "semantic": _as_is,
}
# The identity as GET reads it, and its row locked until the transaction ends (SQLite: no-op, its
# write lock is the transaction's).
_LOCKED_IDENTITY = IDENTITIES_WITH_CREATOR.where(IDENTITIES.c.identity_id == bindparam("identity_id")).with_for_update(
    of=IDENTITIES
)


def representation_etag(identity):
    """The ETag GET sends for `identity`: headers.body_etag of the very body it serves."""
    return body_etag(current_app.json.response(identity_schema.dump(identity)).get_data())


def update_identity(identity_id, changes, wallet, if_match=None):
    """Apply `changes` (validated: field -> new value) to the identity, on behalf of `wallet`, and
    record them in its history; returns the Identity (a mapping, as service.get_identity's).

    `if_match` (Werkzeug's ETags, from the request's If-Match header) makes the change conditional:
    unless it names the current representation's ETag, PreconditionFailed and nothing changes.
    Raises IdentityNotFound for an unknown id. Values equal to the current ones are no change: a
    request that changes nothing records nothing and leaves updated_at as it is.
    """
    unknown = set(changes) - set(EDITABLE)
    if unknown:
        raise ValueError(f"Not editable: {', '.join(sorted(unknown))}")
    if not content.has_identity_id_form(identity_id):
        raise IdentityNotFound()  # as service.get_identity: PostgreSQL refuses some strings (NUL) outright
    with write_transaction() as session:
        row = session.execute(_LOCKED_IDENTITY, {"identity_id": identity_id}).one_or_none()
        if row is None:
            raise IdentityNotFound()
        identity = identity_record(row)
        if if_match and not if_match.contains(representation_etag(identity)):
            raise PreconditionFailed()
        changed = {
            name: {"before": EDITABLE[name](identity[name]), "after": EDITABLE[name](after)}
            for name, after in changes.items()
            if identity[name] != after
        }
        if changed:
            now = utcnow()
            values = {name: changes[name] for name in changed}
            session.execute(update(IDENTITIES).where(IDENTITIES.c.id == identity["id"]).values(**values, updated_at=now))
            history.record_changed(session, identity_id, wallet, changed, at=now)
            identity.update(values, updated_at=now)
    return identity
