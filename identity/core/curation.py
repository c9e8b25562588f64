"""Curation: what an Admin may change on an identity (its status, its on-chain figures), never its content.

Every change is checked and made under the identity's lock: SQLite's write lock, taken at BEGIN, or
PostgreSQL's row lock (SELECT ... FOR UPDATE). So a conditional change (If-Match) compares against the
identity as it is when the change is made, and of two changes made from the same ETag at once,
exactly one succeeds.
"""

from sqlalchemy import bindparam, update

from ..storage.database import write_transaction
from ..storage.models import utcnow
from . import audit, content, history
from .errors import IdentityNotFound, PreconditionFailed
from .identities import IDENTITIES, IDENTITIES_WITH_CREATOR, identity_record


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


def update_identity(identity_id, changes, wallet, precondition=None):
    """Apply `changes` (validated: field -> new value) to the identity, on behalf of `wallet`, and
    record them in its history; returns the Identity (a mapping, as identities.get_identity's).

    `precondition(identity)`, when given, makes the change conditional: it is asked with the identity
    as it is under the lock, and unless it holds, PreconditionFailed and nothing changes (HTTP's
    If-Match, which the web layer turns into one).
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
        if precondition is not None and not precondition(identity):
            raise PreconditionFailed()
        changed = apply_changes(session, identity, changes, wallet, utcnow())
        if changed:
            audit.record(_curation_action(changed), "identity", identity_id,
                         before={name: change["before"] for name, change in changed.items()},
                         after={name: change["after"] for name, change in changed.items()},
                         actor=None if wallet == "cli" else {"wallet": wallet})
    return identity


def _curation_action(changed):
    """identity.take_down, identity.restore (a status to or from removed), or identity.curate."""
    status = changed.get("status")
    if status is not None and set(changed) == {"status"}:
        if status["after"] == "removed":
            return "identity.take_down"
        if status["before"] == "removed":
            return "identity.restore"
    return "identity.curate"


def status_before_removal(entries):
    """The status an identity had before it was last taken down (what a Restore brings back), read from
    its history `entries` (history.changes_of, oldest first); `complete` when they do not say."""
    for entry in reversed(entries):
        status = (entry.get("fields") or {}).get("status")
        if status and status["after"] == "removed" and status["before"] != "removed":
            return status["before"]
    return "complete"


def apply_changes(session, identity, changes, wallet, at, updated_at=None):
    """In `session`'s write transaction, with `identity` (a mapping, as identity_record's) locked: set those of
    `changes` (validated: field -> new value) that differ from it, and record them in its history at `at`.
    Its updated_at becomes `updated_at` (default `at`); `identity` is updated too. Returns what was recorded
    ({field: {"before", "after"}}; empty when nothing differed, and then nothing is written)."""
    changed = {
        name: {"before": EDITABLE[name](identity[name]), "after": EDITABLE[name](after)}
        for name, after in changes.items()
        if identity[name] != after
    }
    if changed:
        values = {**{name: changes[name] for name in changed}, "updated_at": updated_at or at}
        session.execute(update(IDENTITIES).where(IDENTITIES.c.id == identity["id"]).values(**values))
        history.record_changed(session, identity["identity_id"], wallet, changed, at=at)
        identity.update(values)
    return changed
