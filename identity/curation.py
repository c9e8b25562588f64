"""Curation: what an Admin may change on an identity (its status, its on-chain figures), never its content.

Every change is checked and made under the identity's lock: SQLite's write lock, taken at BEGIN, or
PostgreSQL's row lock (SELECT ... FOR UPDATE). So a conditional change (If-Match) compares against the
identity as it is when the change is made, and of two changes made from the same ETag at once,
exactly one succeeds.
"""

from flask import current_app
from sqlalchemy import select
from werkzeug.http import generate_etag

from . import history
from .errors import IdentityNotFound, PreconditionFailed
from .extensions import write_transaction
from .models import Identity, utcnow
from .schemas import identity_schema

# The fields a change may name, and how the Identity object writes their values (the history keeps them so).
EDITABLE = {
    "status": None,
    "vault_id": str,
    "num_positions": None,
    "assets_sum": str,
    "conviction_sum": str,
    "conviction_price": str,
    "corpora_id": None,
    "semantic": None,
}


def representation_etag(identity):
    """The strong ETag of the body GET serves for `identity`: a hash of its exact bytes, as
    headers.conditional makes it."""
    return generate_etag(current_app.json.response(identity_schema.dump(identity)).get_data())


def update_identity(identity_id, changes, wallet, if_match=None):
    """Apply `changes` (validated: field -> new value) to the identity, on behalf of `wallet`, and
    record them in its history; returns the Identity.

    `if_match` (Werkzeug's ETags, from the request's If-Match header) makes the change conditional:
    unless it names the current representation's ETag, PreconditionFailed and nothing changes.
    Raises IdentityNotFound for an unknown id. Values equal to the current ones are no change: a
    request that changes nothing records nothing and leaves updated_at as it is.
    """
    unknown = set(changes) - set(EDITABLE)
    if unknown:
        raise ValueError(f"Not editable: {', '.join(sorted(unknown))}")
    with write_transaction() as session:
        identity = session.execute(
            select(Identity).where(Identity.identity_id == identity_id).with_for_update(of=Identity)
        ).scalar_one_or_none()
        if identity is None:
            raise IdentityNotFound()
        if if_match and not if_match.contains(representation_etag(identity)):
            raise PreconditionFailed()
        changed = {}
        for name, after in changes.items():
            before = getattr(identity, name)
            if before != after:
                write = EDITABLE[name] or _as_is
                changed[name] = {"before": write(before), "after": write(after)}
                setattr(identity, name, after)
        if changed:
            identity.updated_at = utcnow()
            session.flush()
            history.record_changed(session, identity.identity_id, wallet, changed, at=identity.updated_at)
    return identity


def _as_is(value):
    return value
