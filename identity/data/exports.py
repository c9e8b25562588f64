"""Identities as data: every identity as a line of JSON (JSON Lines), oldest first.

An export line is the Identity as an Admin reads it, its creator reduced to the wallet
(schemas.IdentityExportSchema), in (created_at, id) order; identity.data.imports reads such lines back.
"""

import os
import tempfile
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import orjson
from sqlalchemy import String, Text, cast, func, select, type_coerce

from ..core.identities import IDENTITIES
from ..core.users import USERS
from ..storage.database import db

# Rows fetched per round trip on export.
EXPORT_BATCH = 2000

# The export's keys in the order of schemas.IdentitySchema, each with the column that holds it.
_EXPORT_KEYS = (
    "id", "identity_id", "identity_hash", "vault_id", "display_name", "description", "image", "corpora_id",
    "semantic", "external_reference", "creator", "creator_signature", "creator_signature_chain_id", "created_at",
    "updated_at", "num_positions", "assets_sum", "conviction_sum", "conviction_price", "status", "isUser", "user_conviction", "user_conviction_value",
)
UINT256_KEYS = {"vault_id", "assets_sum", "conviction_sum", "conviction_price", "user_conviction", "user_conviction_value"}
TIMESTAMP_KEYS = ("created_at", "updated_at")
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
    if name in UINT256_KEYS:
        return cast(column, Text).label(name)
    if name in TIMESTAMP_KEYS:
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


_CREATED_AT, _UPDATED_AT = (_EXPORT_KEYS.index(name) for name in TIMESTAMP_KEYS)


def export_line(row):
    """One row of the export query as a line of the export: JSON and a newline, as bytes.

    The Identity object as schemas.IdentitySchema writes it for an Admin (same keys, order and value
    forms), with the creator as its wallet; written here directly because a schema's dump of 22
    fields would cost most of an export's time. tests/data/test_portable.py compares both.
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
def replacing(path, overwrite=False):
    """A binary file to write `path` through: written under a temporary name beside it and put at `path`
    only when the block ends without an error, so an interrupted write leaves no partial file (and any
    earlier `path` as it was). Unless `overwrite`, a file that appeared at `path` meanwhile is kept and
    FileExistsError raised: the complete file is linked in place, which fails rather than replace one."""
    path = Path(path)
    handle, partial = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as stream:
            yield stream
            stream.flush()
            os.fsync(stream.fileno())
        put_in_place(partial, path, overwrite)
    finally:
        Path(partial).unlink(missing_ok=True)


def put_in_place(partial, path, overwrite):
    """Move the complete file `partial` to `path`, beside it: over an existing file only when `overwrite`
    (else FileExistsError, and `path` is left as it was)."""
    if overwrite:
        os.replace(partial, path)
    else:
        os.link(partial, path)  # atomic, and refuses an existing path; `partial` goes with the caller's cleanup


