"""The change log: every create and every change of an identity, appended in the same transaction,
read per identity and as a feed that a client can poll without ever missing an entry.

Why the feed never skips. A poller asks for the entries above the last sequence number it saw, so an
entry must never become visible after one with a higher number. On SQLite that holds by itself:
writers take the database's write lock at BEGIN and hold it to COMMIT, so sequence numbers are drawn
and committed in the same order. On PostgreSQL a sequence hands out numbers at once while commits
happen in any order: entry 7 could commit, and be polled, before entry 6. So each append first takes
a transaction-level advisory lock, held until COMMIT (PostgreSQL releases it only after the commit is
visible), and only then draws its number: numbers are drawn in commit order. The lock is taken by
the last statement before COMMIT, so it is held for one INSERT and the commit.
"""

import orjson
from sqlalchemy import (
    ARRAY,
    BigInteger,
    String,
    bindparam,
    column,
    func,
    insert,
    literal,
    literal_column,
    select,
    table,
    text,
)
from sqlalchemy.dialects.postgresql import REGCLASS

from ..storage.database import db, note
from ..storage.models import Change, Identity, utcnow
from . import content
from .errors import BeyondFeedEnd

# Any fixed number, distinct from the migration's (migrations/env.py MIGRATION_LOCK).
FEED_LOCK = 0x1D3_0015
# PostgreSQL's channel that each append notifies at its commit (identity.feed.live listens on it).
CHANNEL = "identity_changes"
# What an append notes in its transaction (storage.database.note): after the commit, the `committed`
# signal carries it to whoever listens (the live feeds of this process).
APPENDED = "changes appended"
CREATED = "created"
CHANGED = "changed"
# What a non-Admin key sees of an entry of a removed identity.
REDACTED_KEYS = ("seq", "identity_id", "at", "kind")
ENTRY_KEYS = ("seq", "identity_id", "at", "wallet", "kind", "fields")


def record_created(session, identity_id, wallet, at=None):
    """Append the `created` entry of `identity_id`, in `session`'s write transaction."""
    _append(session, identity_id, wallet, CREATED, None, at)


def record_changed(session, identity_id, wallet, changes, at=None):
    """Append a `changed` entry: `changes` maps each field to {"before": value, "after": value}."""
    _append(session, identity_id, wallet, CHANGED, changes, at)


def record_created_many(session, identity_ids, wallet, at):
    """Append a `created` entry for each of `identity_ids`, in that order, in `session`'s write
    transaction: one statement, whatever their number (an import)."""
    dialect = session.get_bind().dialect.name
    _prepare_append(session, dialect)
    if dialect == "postgresql":
        ids = func.unnest(bindparam("ids", type_=ARRAY(String))).table_valued("value", with_ordinality="n").render_derived()
        order = ids.c.n
    else:
        ids = func.json_each(bindparam("ids")).table_valued("key", "value")
        order = ids.c.key
        identity_ids = orjson.dumps(identity_ids).decode()
    entries = select(ids.c.value, literal(at, _CHANGES.c.at.type), literal(wallet, String), literal(CREATED, String))
    session.execute(
        insert(_CHANGES).from_select(["identity_id", "at", "wallet", "kind"], entries.order_by(order)), {"ids": identity_ids},
    )
    note(session, APPENDED)


_CHANGES = Change.__table__
_LOCK = select(func.pg_advisory_xact_lock(literal_column(str(FEED_LOCK), BigInteger)))
_INSERT = insert(_CHANGES)
# NOTIFY is queued with the transaction and sent at its commit, never for one rolled back; PostgreSQL
# folds the notifications of one transaction into one.
_NOTIFY = text(f"SELECT pg_notify('{CHANNEL}', '')")


def _append(session, identity_id, wallet, kind, changes, at):
    _prepare_append(session, session.get_bind().dialect.name)
    session.execute(_INSERT, _entry(identity_id, wallet, kind, changes, at))
    note(session, APPENDED)


def _prepare_append(session, dialect):
    """What precedes an append in its transaction: on PostgreSQL, the lock that orders appends and the
    NOTIFY sent at commit."""
    if dialect == "postgresql":
        session.execute(_LOCK)
        session.execute(_NOTIFY)


def _entry(identity_id, wallet, kind, changes, at):
    return {"identity_id": identity_id, "at": at or utcnow(), "wallet": wallet, "kind": kind, "fields": changes}


def _entries():
    # The identity's current status says whether an entry is shown whole (see visible).
    return select(Change, Identity.status).outerjoin(Identity, Identity.identity_id == Change.identity_id)


def changes_of(identity_id, full):
    """The entries of one identity, oldest first (mappings that ChangeSchema dumps); None if no identity has that id.

    `full` (an Admin's view) shows every entry whole; otherwise the entries of a removed identity
    carry only REDACTED_KEYS.
    """
    if not content.has_identity_id_form(identity_id):
        return None  # no stored identity has a malformed id; and PostgreSQL refuses some strings (NUL) outright
    status = db.session.execute(select(Identity.status).where(Identity.identity_id == identity_id)).scalar()
    if status is None:
        db.session.commit()
        return None
    rows = db.session.execute(_entries().where(Change.identity_id == identity_id).order_by(Change.seq)).all()
    db.session.commit()
    return [visible(change, status, full) for change, status in rows]


def feed(after, limit, full, show=None):
    """Up to `limit` entries of every identity with a sequence number above `after`, in order:
    {"data": [...], "next_after": the last one's number, or `after` when there is none} (ChangeFeedSchema).
    `show(pairs, full)` makes the data of the (entry, status) pairs (entries_after), each entry as shown by
    default. Raises BeyondFeedEnd when `after` is above every number the log ever issued."""
    pairs = entries_after(after, limit)
    data = show(pairs, full) if show else [shown(entry, status, full) for entry, status in pairs]
    if not data:
        check_position(after)
    return page(data, after)


def page(data, after):
    """A page of the feed (ChangeFeedSchema) holding `data`, the entries after `after`."""
    return {"data": data, "next_after": data[-1]["seq"] if data else after}


def entries_after(after, limit):
    """Up to `limit` (entry, status) pairs above `after`, in order: each entry whole, and its identity's
    current status, which says what a non-Admin key may see of it (see shown)."""
    rows = db.session.execute(_entries().where(Change.seq > after).order_by(Change.seq).limit(limit)).all()
    db.session.commit()
    return [({name: getattr(change, name) for name in ENTRY_KEYS}, status) for change, status in rows]


def head():
    """The sequence number of the last entry, 0 when the log is empty."""
    last = db.session.execute(select(func.max(Change.seq))).scalar()
    db.session.commit()
    return last or 0


# SQLite's record of the highest number each AUTOINCREMENT table ever issued.
_SQLITE_SEQUENCE = table("sqlite_sequence", column("name"), column("seq"))
_ISSUED = {
    "sqlite": select(_SQLITE_SEQUENCE.c.seq).where(_SQLITE_SEQUENCE.c.name == _CHANGES.name),
    # NULL until the sequence first hands a number out.
    "postgresql": select(func.pg_sequence_last_value(
        func.pg_get_serial_sequence(_CHANGES.name, _CHANGES.c.seq.name).cast(REGCLASS)
    )),
}


def issued_end():
    """The highest sequence number the log ever issued, 0 when none: the last entry's, or more where a
    restore raised the sequence above the numbers the database had issued before (identity.data.restore),
    so that no number ever names two entries."""
    issued = db.session.execute(_ISSUED[db.session.get_bind().dialect.name]).scalar()
    db.session.commit()
    return issued or 0


def check_position(position, name="after"):
    """Raise BeyondFeedEnd when `position` is above every number the log ever issued: the entries that will
    come would be numbered at or below it, and a client that asks for what follows it would miss them."""
    if position > 0:
        end = issued_end()
        if position > end:
            raise BeyondFeedEnd(position, end, name)


def visible(change, status, full):
    """The entry as `full` (Admin) or other keys may see it: a mapping that ChangeSchema dumps."""
    return shown({name: getattr(change, name) for name in ENTRY_KEYS}, status, full)


def redacted(status, full):
    """Whether an entry of an identity in `status` is shown to such a key with REDACTED_KEYS only."""
    return status == "removed" and not full


def shown(entry, status, full):
    """`entry` (a whole entry's mapping) as `full` (Admin) or other keys may see it."""
    return {key: entry[key] for key in REDACTED_KEYS} if redacted(status, full) else entry
