"""The audit log: who did what to the service (keys, users, webhooks, mirrors, curation, sign-ins, console
sessions, the data commands), kept as a chain of hashes that shows a later edit.

An action records its entry with `record(...)`, in its own transaction: the entry waits in the session and is
appended when the session commits (the `before_commit` event), so it commits with the action or not at all.
An action refused before any transaction of its own (a sign-in refused, a 403 on an Admin route) records with
`record_now(...)`, in a transaction of the entry alone.

The append takes the chain's row under a lock (identity.storage.audit), numbers the entries from its head,
and gives each `hash`: the SHA-256 of its canonical JSON (RFC 8785, `entry_document`), which holds the
previous entry's hash (`prev_hash`). It runs last in the transaction, so the lock is held only for the
commit, and no transaction waits for the chain while holding something the chain's holder waits for.

Who acted, and from where, comes from the way in: the web, the console and the command line each provide a
context (`provide`), asked when an entry is recorded; work of the service itself is `via` service.
"""

import hashlib
import secrets
import weakref
from datetime import UTC, datetime
from decimal import Decimal

import orjson
import rfc8785
from flask import has_app_context
from sqlalchemy import and_, bindparam, case, event, insert, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from ..storage.audit import AuditChain, AuditEntry
from ..storage.database import db, one_statement, write_transaction
from ..storage.models import ApiKey, utcnow

ENTRIES = AuditEntry.__table__
CHAIN = AuditChain.__table__
GENESIS = "0" * 64
CHAIN_ID = 1
VIAS = ("api", "console", "cli", "service")
OUTCOMES = ("ok", "refused", "failed")
_PENDING = "identity_audit_pending"
# Where the context providers are asked, in order; the first that answers names the way in.
_providers = []
# Integers past this are written as strings: RFC 8785 numbers are IEEE doubles.
_MAX_EXACT = 2**53 - 1


def provide(provider):
    """Add `provider()` to the ways in asked for an entry's context: it returns None when the current work is
    not its own, else a dict of via, request_id, client_address, user_agent and caller (a core.keys.Caller or
    None). Adding it again changes nothing."""
    if provider not in _providers:
        _providers.append(provider)


def context():
    """The current work's context: the first provider's answer, or the service's own."""
    for provider in _providers:
        found = provider()
        if found is not None:
            return found
    return {"via": "service"}


def new_request_id():
    """An id for work that came without one (a command): 128 random bits, as a request's own."""
    return secrets.token_hex(16)


def plain(value):
    """`value` as JSON that RFC 8785 writes exactly: timestamps as RFC 3339 text in UTC, decimals and integers
    beyond 2**53 as decimal strings, tuples and sets as lists."""
    if type(value) is str or value is None:
        return value
    if isinstance(value, dict):
        return {name if type(name) is str else str(name): plain(item) for name, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    if isinstance(value, (set, frozenset)):
        return sorted(plain(item) for item in value)
    if isinstance(value, datetime):
        return moment(value)
    if isinstance(value, bool) or value is None or isinstance(value, (str, float)):
        return value
    if isinstance(value, int):
        return value if -_MAX_EXACT <= value <= _MAX_EXACT else str(value)
    if isinstance(value, Decimal):
        return str(value)
    return str(value)


def moment(value):
    """A timestamp as the log writes it: RFC 3339 in UTC, to the microsecond, with Z (2026-11-21T09:30:00.123456Z)."""
    return value.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def record(action, target_kind, target_id=None, *, outcome="ok", before=None, after=None, detail=None, actor=None,
           session=None):
    """Record that `action` was done (or refused) to the `target_kind` `target_id`, in `session`'s transaction
    (default the app's session): the entry is appended when that transaction commits, and dropped if it rolls
    back. `before` and `after` are the fields changed, never a secret; `actor` (a dict) overrides the
    context's caller (a sign-in names its wallet)."""
    found = context()
    caller = found.get("caller")
    who = {
        "user_id": getattr(caller, "user_id", None), "wallet": getattr(caller, "wallet", None),
        "role": getattr(caller, "role", None), "key_id": getattr(caller, "key_id", None),
    }
    who.update(actor or {})
    entry = {
        "actor_user_id": who["user_id"], "actor_wallet": who["wallet"], "actor_role": who["role"],
        "actor_key_id": who["key_id"], "via": found.get("via", "service"), "action": action,
        "target_kind": target_kind, "target_id": None if target_id is None else str(target_id)[:128],
        "outcome": outcome, "detail": detail, "request_id": found.get("request_id"),
        "client_address": found.get("client_address"), "user_agent": found.get("user_agent"),
        "before": None if before is None else plain(before), "after": None if after is None else plain(after),
    }
    (session or db.session()).info.setdefault(_PENDING, []).append(entry)


def key_issued(api_key, wallet, role_before, role=None):
    """The entries of a key issued for `wallet` (core.keys.issue_key): the user's role first, when `role` changes it."""
    if role is not None and role != role_before:
        record("user.role", "user", wallet, before={"role": role_before}, after={"role": role})
    record("key.issue", "key", api_key.id, after={"wallet": wallet, "role": role or role_before, **{
        name: getattr(api_key, name) for name in ("scope", "label", "expires_at", "hint", "created_by")}})


def key_rotated(old, new, grace_seconds):
    """The entry of key `old` rotated (core.keys.rotate_key): it stops at its revoked_at, replaced by key `new`."""
    record("key.rotate", "key", old.id, before={"revoked_at": None},
           after={"revoked_at": old.revoked_at, "replaced_by": new.id, "grace_seconds": grace_seconds})


def record_now(*args, **kwargs):
    """record(...) in a transaction of its own, committed at once: for a refusal that has none."""
    with write_transaction() as session:
        record(*args, session=session, **kwargs)


@event.listens_for(Session, "before_commit")
def _append_pending(session):
    pending = session.info.pop(_PENDING, None)
    if pending:
        append(session, pending)


@event.listens_for(Session, "after_rollback")
def _drop_pending(session):
    session.info.pop(_PENDING, None)


def append(session, entries):
    """Append `entries` (as record makes them) to the chain in `session`'s transaction, under the chain's lock.

    Two statements when the chain's head is the one this process last left it at (the usual case for one
    writer): the head row is advanced, and so locked, only if it is still that head (`_ADVANCE`), then the
    entries are inserted. Three when another process or node has appended since (or none was seen yet): the
    head as it is now, read under the lock, then the head moved and the entries inserted. What the process
    remembers is a guess that saves a read: the chain is always continued from the head the database holds."""
    session.flush()  # the action's own rows first, so the chain's lock is held for the commit alone
    connection = session.connection()
    engine = connection.engine
    seen = _heads_seen.get(engine)
    hints = _hints(session, {entry["actor_key_id"] for entry in entries if entry["actor_key_id"]})
    if seen is not None:
        rows = _chained(entries, hints, *seen)
        found = connection.execute(_ADVANCE, {"seen_seq": seen[0], "seen_hash": seen[1], "new_seq": rows[-1]["seq"],
                                              "new_hash": rows[-1]["hash"]}).first()
        if found is None or (found.head_seq, found.head_hash) != (rows[-1]["seq"], rows[-1]["hash"]):
            # Not advanced: locked by the UPDATE as it stands (or gone, made again under the lock).
            rows = _chained(entries, hints, *(_locked_head(session) if found is None else found))
            connection.execute(_MOVE, {"new_seq": rows[-1]["seq"], "new_hash": rows[-1]["hash"]})
    else:
        rows = _chained(entries, hints, *_locked_head(session))
        connection.execute(_MOVE, {"new_seq": rows[-1]["seq"], "new_hash": rows[-1]["hash"]})
    connection.execute(_INSERT, rows[0] if len(rows) == 1 else rows)
    # Should this transaction roll back, the next append finds the head elsewhere and reads it.
    _heads_seen[engine] = (rows[-1]["seq"], rows[-1]["hash"])


def _chained(entries, hints, head_seq, prev_hash):
    """The rows of `entries` numbered from `head_seq`, each stamped now and linked to the hash before it."""
    at = utcnow()
    rows = []
    for entry in entries:
        head_seq += 1
        row = {**entry, "seq": head_seq, "at": at, "actor_key_hint": hints.get(entry["actor_key_id"]),
               "prev_hash": prev_hash}
        row["hash"] = prev_hash = entry_hash(row)
        rows.append(row)
    return rows


# The head each database's chain was left at by this process's last append, by engine.
_heads_seen = weakref.WeakKeyDictionary()
_AT_SEEN = and_(CHAIN.c.head_seq == bindparam("seen_seq"), CHAIN.c.head_hash == bindparam("seen_hash"))
# One statement that locks the head row and moves it past the new entries if it is still where this process
# saw it; RETURNING says which (SQLite 3.35 and later, PostgreSQL). A head that held our last seq and hash
# already would read as moved too: that takes an entry identical to ours, to the microsecond, appended from
# the same head by another writer, and our INSERT would then fail on its seq rather than fork the chain.
_ADVANCE = (
    update(CHAIN).where(CHAIN.c.id == CHAIN_ID)
    .values(head_seq=case((_AT_SEEN, bindparam("new_seq")), else_=CHAIN.c.head_seq),
            head_hash=case((_AT_SEEN, bindparam("new_hash")), else_=CHAIN.c.head_hash))
    .returning(CHAIN.c.head_seq, CHAIN.c.head_hash)
)
_MOVE = update(CHAIN).where(CHAIN.c.id == CHAIN_ID).values(head_seq=bindparam("new_seq"),
                                                           head_hash=bindparam("new_hash"))
_INSERT = insert(ENTRIES)


# A key's hint never changes: each process remembers those it read, up to MAX_HINTS (then it starts afresh).
_known_hints = {}
MAX_HINTS = 10_000


def _hints(session, key_ids):
    """{key id: its hint} for `key_ids`, read once per key and process."""
    missing = key_ids - _known_hints.keys()
    if missing:
        if len(_known_hints) >= MAX_HINTS:
            _known_hints.clear()
        _known_hints.update(session.execute(select(ApiKey.id, ApiKey.hint).where(ApiKey.id.in_(missing))).all())
    return {key_id: _known_hints.get(key_id) for key_id in key_ids}


_HEAD = select(CHAIN.c.head_seq, CHAIN.c.head_hash).where(CHAIN.c.id == CHAIN_ID)
_LOCKED_HEAD = _HEAD.with_for_update()


def _locked_head(session):
    """The chain's head (seq, hash), its row locked until the transaction ends (on SQLite the write lock
    the transaction holds already). A chain row gone (a database emptied by hand) is made again from the
    entries there are."""
    row = session.execute(_LOCKED_HEAD).first()
    if row is None:
        # Two first appends at once: one inserts, the other's insert waits for it and then does nothing.
        dialect = session.get_bind().dialect.name
        start = (postgresql.insert if dialect == "postgresql" else sqlite.insert)(CHAIN)
        session.execute(start.values(**_chain_from_entries(session)).on_conflict_do_nothing(index_elements=["id"]))
        row = session.execute(_LOCKED_HEAD).first()
    return row.head_seq, row.head_hash


def _chain_from_entries(session):
    first = session.execute(select(ENTRIES.c.seq, ENTRIES.c.prev_hash).order_by(ENTRIES.c.seq).limit(1)).first()
    last = session.execute(select(ENTRIES.c.seq, ENTRIES.c.hash).order_by(ENTRIES.c.seq.desc()).limit(1)).first()
    if first is None:
        return {"id": CHAIN_ID, "head_seq": 0, "head_hash": GENESIS, "start_seq": 0, "start_hash": GENESIS}
    return {"id": CHAIN_ID, "head_seq": last.seq, "head_hash": last.hash, "start_seq": first.seq - 1,
            "start_hash": first.prev_hash}


# --- an entry as it is shown and hashed ----------------------------------------------------------------

def entry_document(row):
    """The entry (a mapping of its columns: a row of audit_entries read with .mappings()) as GET /audit shows
    it, less its `hash`: the document its hash covers."""
    get = row.get
    at = get("at")
    return {
        "seq": get("seq"),
        "at": moment(at) if isinstance(at, datetime) else at,
        "actor": {
            "user_id": get("actor_user_id"), "wallet": get("actor_wallet"), "role": get("actor_role"),
            "key_id": get("actor_key_id"), "key_hint": get("actor_key_hint"), "via": get("via"),
        },
        "action": get("action"),
        "target": {"kind": get("target_kind"), "id": get("target_id")},
        "outcome": get("outcome"),
        "detail": get("detail"),
        "request_id": get("request_id"),
        "client_address": get("client_address"),
        "user_agent": get("user_agent"),
        "before": get("before"),
        "after": get("after"),
        "prev_hash": get("prev_hash"),
    }


def entry_hash(row):
    """The SHA-256, in hex, of the entry's canonical JSON (RFC 8785), which includes its prev_hash."""
    return hashlib.sha256(canonical_json(entry_document(row))).hexdigest()


def canonical_json(document):
    """`document`'s RFC 8785 (JCS) UTF-8 bytes.

    For objects, arrays, strings, integers within 2**53, booleans and nulls, with ASCII keys, JCS is what
    orjson writes with sorted keys: no white space, keys in code point order (UTF-16's, for ASCII), strings
    with only `"`, `\\` and the control characters escaped, as JCS escapes them, integers in decimal. orjson does
    it in C, some 30 times faster than rfc8785's Python; rfc8785 writes anything else (a float, whose JCS form
    is ECMAScript's) or refuses it (a larger integer, text with a lone surrogate)."""
    if _orjson_writes_jcs(document):
        try:
            return orjson.dumps(document, option=orjson.OPT_SORT_KEYS)
        except orjson.JSONEncodeError:
            pass  # text that is not Unicode (a lone surrogate): rfc8785 says so in its own words
    return rfc8785.dumps(document)


def _orjson_writes_jcs(value):
    kind = type(value)
    if kind is dict:
        return all(type(name) is str and name.isascii() and (type(item) is str or item is None or _orjson_writes_jcs(item))
                   for name, item in value.items())
    if kind is str or kind is bool or value is None:
        return True
    if kind is int:
        return -_MAX_EXACT <= value <= _MAX_EXACT
    if kind is list:
        return all(_orjson_writes_jcs(item) for item in value)
    return False


def shown(row):
    """The entry as GET /audit, the console and `audit export` show it: its document and its hash."""
    return {**entry_document(row), "hash": row["hash"]}


def head():
    """The chain's head: {"seq", "hash"} of the last entry appended ({0, the genesis hash} before any), for
    /metrics and a backup's manifest, so that a copy kept elsewhere can later show an edit."""
    if not has_app_context():
        raise RuntimeError("audit.head() needs an app context")
    with one_statement() as connection:
        row = connection.execute(_HEAD).first()
    if row is None:
        return {"seq": 0, "hash": GENESIS}
    return {"seq": row.head_seq, "hash": row.head_hash}
