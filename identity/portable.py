"""Identities as data: export to JSON Lines, and import that checks every line's id against its content.

An export line is the Identity as an Admin reads it, its creator reduced to the wallet
(schemas.IdentityExportSchema), in (created_at, id) order. Import reads such lines; each is
validated by the same field rules as a create (schemas.IdentityImportSchema), and its identity_id
and identity_hash must be the addresses of its content, recomputed here: a line that fails is
refused by its number and nothing of it is written. Lines are written in batches, one transaction
each, so a long import keeps what it committed when it is stopped.
"""

import os
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import orjson
from flask import current_app
from marshmallow import ValidationError
from sqlalchemy import String, Text, cast, func, select, text, type_coerce

from . import content, history
from .extensions import db, write_transaction
from .lines import load_common
from .models import new_id, utcnow
from .schemas import identity_import_schema
from .service import IDENTITIES, USERS

# Rows fetched per round trip on export, and lines written per transaction on import.
EXPORT_BATCH = 2000
IMPORT_BATCH = 1000

# The export's keys in the order of schemas.IdentitySchema, each with the column that holds it.
_EXPORT_KEYS = (
    "id", "identity_id", "identity_hash", "vault_id", "display_name", "description", "image", "corpora_id",
    "semantic", "external_reference", "creator", "created_at", "updated_at", "num_positions", "assets_sum",
    "conviction_sum", "conviction_price", "status", "isUser", "user_conviction", "user_conviction_value",
)
_UINT256 = {"vault_id", "assets_sum", "conviction_sum", "conviction_price", "user_conviction", "user_conviction_value"}
_TIMESTAMPS = ("created_at", "updated_at")
# SQLite keeps a timestamp as the text SQLAlchemy writes, naive UTC with microseconds; PostgreSQL
# formats its timestamptz in UTC itself. Either way the database hands over the export's text form.
_SQLITE_TIMESTAMP = len("2026-01-01 00:00:00.000000")


def _export_column(name, dialect):
    """The column of export key `name`, read as the text or number the line holds.

    The models' column types (UInt256, UTCDateTime) would turn every value into an int or a datetime
    that export_line turns back into text: at a million rows, most of an export's time. The database
    does it in C instead: a big integer is cast to its decimal text, a timestamp to RFC 3339 in UTC.
    """
    if name == "creator":
        return USERS.c.wallet.label(name)
    column = IDENTITIES.c["is_user" if name == "isUser" else name]
    if name in _UINT256:
        return cast(column, Text).label(name)
    if name in _TIMESTAMPS:
        if dialect == "postgresql":
            return func.to_char(func.timezone("UTC", column), 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"').label(name)
        return type_coerce(column, String).label(name)
    return column.label(name)


def _export_query(dialect):
    return (
        select(*(_export_column(name, dialect) for name in _EXPORT_KEYS))
        .join_from(IDENTITIES, USERS, IDENTITIES.c.creator_id == USERS.c.id)
        .order_by(IDENTITIES.c.created_at, IDENTITIES.c.id)
        .execution_options(yield_per=EXPORT_BATCH)
    )


def count_identities():
    """How many identities there are (for a progress bar's total)."""
    total = db.session.execute(select(func.count()).select_from(IDENTITIES)).scalar_one()
    db.session.commit()
    return total


_CREATED_AT, _UPDATED_AT = (_EXPORT_KEYS.index(name) for name in _TIMESTAMPS)


def export_line(row):
    """One row of the export query as a line of the export: JSON and a newline, as bytes.

    The Identity object as schemas.IdentitySchema writes it for an Admin (same keys, order and value
    forms), with the creator as its wallet; written here directly because a schema's dump of 21
    fields would cost most of an export's time. tests/test_portable.py compares both.
    """
    values = list(row)
    values[_CREATED_AT] = _timestamp(values[_CREATED_AT])
    values[_UPDATED_AT] = _timestamp(values[_UPDATED_AT])
    return orjson.dumps(dict(zip(_EXPORT_KEYS, values, strict=True))) + b"\n"


def _timestamp(value):
    """As fields.Timestamp writes it: RFC 3339 in UTC with microseconds and a Z.

    `value` is the database's text: already that on PostgreSQL; on SQLite, "YYYY-MM-DD HH:MM:SS.ffffff"
    as SQLAlchemy writes it (naive UTC), or any other ISO form that something else wrote.
    """
    if value.endswith("Z"):
        return value
    if len(value) == _SQLITE_TIMESTAMP and value[10] == " ":
        return f"{value[:10]}T{value[11:]}Z"
    parsed = datetime.fromisoformat(value)
    if parsed.tzinfo is not None:
        parsed = parsed.astimezone(UTC)
    return parsed.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def export_identities(stream, progress=None):
    """Write every identity to the binary `stream`, one line each, sorted by created_at, id; returns
    how many. Rows are read `EXPORT_BATCH` at a time (a server-side cursor on PostgreSQL), so memory
    does not grow with their number. `progress(n)` is called as rows are written."""
    written = 0
    try:
        query = _export_query(db.session.get_bind().dialect.name)
        for rows in db.session.execute(query).partitions():
            stream.write(b"".join(map(export_line, rows)))
            written += len(rows)
            if progress:
                progress(len(rows))
    finally:
        db.session.rollback()  # a read only; ends the snapshot and frees the cursor
    return written


@contextmanager
def replacing(path):
    """A binary file to write `path` through: written under a temporary name beside it and renamed
    over `path` only when the block ends without an error, so an interrupted write leaves no partial
    file (and any earlier `path` as it was)."""
    path = Path(path)
    handle, partial = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as stream:
            yield stream
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(partial, path)
    finally:
        Path(partial).unlink(missing_ok=True)


@dataclass
class ImportCounts:
    """What an import did so far: only committed lines count as imported or skipped."""

    imported: int = 0
    skipped: int = 0
    refused: int = 0
    lines: int = 0

    def summary(self):
        return f"imported {self.imported}, skipped {self.skipped}, refused {self.refused}"


class Refused(Exception):
    """A line that cannot be imported; the message says why and what to fix."""


@dataclass
class _Batch:
    rows: list = field(default_factory=list)
    content_ids: set = field(default_factory=set)
    ids: set = field(default_factory=set)


def import_identities(lines, wallet, counts=None, on_refused=None, progress=None, batch_size=IMPORT_BATCH):
    """Import exported identities from `lines` (bytes or str, one JSON object each); returns ImportCounts.

    An identity whose content is already stored is skipped. A line that is not valid is refused:
    `on_refused(line_number, message)` is called and nothing of it is written. Every imported
    identity gets a `created` entry in the change log, in the name of `wallet`. `counts` (an
    ImportCounts) is updated after each committed batch, so a caller that is interrupted knows what
    was committed. `progress(n)` is called as lines are read.
    """
    counts = counts if counts is not None else ImportCounts()
    batch = _Batch()
    for number, line in enumerate(lines, 1):
        counts.lines = number
        if progress:
            progress(1)
        if not line.strip():
            continue
        try:
            row = parse_line(line)
        except Refused as refusal:
            counts.refused += 1
            if on_refused:
                on_refused(number, str(refusal))
            continue
        if row["content_id"] in batch.content_ids:
            counts.skipped += 1  # the same content twice in the file: the first one stands
            continue
        if row["id"] in batch.ids:
            counts.refused += 1
            if on_refused:
                on_refused(number, f"id {row['id']} is the id of an earlier line's identity; give this line a new id")
            continue
        row["line"] = number
        batch.rows.append(row)
        batch.content_ids.add(row["content_id"])
        batch.ids.add(row["id"])
        if len(batch.rows) >= batch_size:
            _write(batch.rows, wallet, counts, on_refused)
            batch = _Batch()
    if batch.rows:
        _write(batch.rows, wallet, counts, on_refused)
    return counts


def parse_line(line):
    """The row to insert for one export line; raises Refused when the line is not a sound identity."""
    try:
        data = orjson.loads(line)
    except orjson.JSONDecodeError as error:
        raise Refused(f"not JSON ({error}); each line must be one Identity object as `identities export` writes it") from None
    if not isinstance(data, dict):
        raise Refused("not a JSON object; each line must be one Identity object as `identities export` writes it")
    fields = load_common(data)
    try:
        fields = fields or identity_import_schema.load(data)
    except ValidationError as error:
        problems = "; ".join(f"{name}: {' '.join(map(str, _flat(messages)))}" for name, messages in error.messages.items())
        raise Refused(f"invalid fields: {problems}") from None
    stored = {name: fields[name] for name in content.CONTENT_FIELDS if fields.get(name) is not None}
    content_id = content.content_id_of(content.canonical_bytes(stored))
    parsed = content.parse_identity_id(fields["identity_id"])
    if parsed is None or parsed[1] != content_id:
        raise Refused(
            f"identity_id {fields['identity_id']} is not the address of this content, which is {content_id}: "
            "the line was altered; export it again from its source"
        )
    identity_hash = content.identity_hash_of(content_id)
    if fields["identity_hash"] != identity_hash:
        raise Refused(f"identity_hash is not the hash of this content's address, which is {identity_hash}")
    row = {name: fields.get(name) for name in content.CONTENT_FIELDS}
    row.update(
        {name: value for name, value in fields.items() if name not in content.CONTENT_FIELDS and name != "creator"}
    )
    row["id"] = str(fields["id"])
    row["content_id"] = content_id
    row["creator"] = fields["creator"]
    return row


def _flat(messages):
    if isinstance(messages, dict):
        return [f"{key}: {' '.join(map(str, _flat(value)))}" for key, value in messages.items()]
    return messages if isinstance(messages, list) else [messages]


def _write(rows, wallet, counts, on_refused):
    """Insert one batch in one transaction: known content is skipped, a taken id refused."""
    refused = []
    with write_transaction() as session:
        if session.get_bind().dialect.name == "sqlite":
            # Per connection; the import's connection keeps it for the next batches.
            cache_kib = int(current_app.config["IDENTITY_IMPORT_CACHE_MB"]) * 1024
            session.execute(text(f"PRAGMA cache_size = -{cache_kib}"))
        known = set(
            session.execute(select(IDENTITIES.c.content_id).where(IDENTITIES.c.content_id.in_([r["content_id"] for r in rows]))).scalars()
        )
        fresh = [row for row in rows if row["content_id"] not in known]
        taken = set(session.execute(select(IDENTITIES.c.id).where(IDENTITIES.c.id.in_([r["id"] for r in fresh]))).scalars())
        refused = [row for row in fresh if row["id"] in taken]
        fresh = [row for row in fresh if row["id"] not in taken]
        users = _users_of(session, {row["creator"] for row in fresh})
        values = [{**_columns(row), "creator_id": users[row["creator"]]} for row in fresh]
        if values:
            session.execute(IDENTITIES.insert(), values)
            now = utcnow()
            history.record_created_many(session, [row["identity_id"] for row in fresh], wallet, now)
    counts.imported += len(fresh)
    counts.skipped += len(rows) - len(fresh) - len(refused)
    counts.refused += len(refused)
    for row in refused:
        if on_refused:
            on_refused(row["line"], f"id {row['id']} belongs to another identity here; give the line a new id")


def _columns(row):
    return {name: value for name, value in row.items() if name not in ("creator", "line")}


def _users_of(session, wallets):
    """{wallet: user id} for `wallets`; a wallet not seen before becomes a User."""
    if not wallets:
        return {}
    users = dict(session.execute(select(USERS.c.wallet, USERS.c.id).where(USERS.c.wallet.in_(wallets))).all())
    missing = sorted(wallets - users.keys())
    if missing:
        now = utcnow()
        new = [{"id": new_id(), "wallet": w, "role": "User", "created_at": now, "updated_at": now, "last_login": None} for w in missing]
        session.execute(USERS.insert(), new)
        users.update((user["wallet"], user["id"]) for user in new)
    return users

