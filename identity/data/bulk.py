"""Identities written in bulk, as the import and a mirror write them: a batch of rows (each an identity
as an export line holds it, checked already) inserted by a few statements in one transaction, with a
`created` entry in the change log for each; content present already is skipped, a taken id refused.

One statement per STATEMENTROWS rows (INSERT ... SELECT from a JSON array: json_each on SQLite,
jsonb_array_elements on PostgreSQL), whose work the database does with Python's lock released.
"""

import functools
from dataclasses import dataclass, field

import orjson
from flask import current_app
from sqlalchemy import select, text

from ..core import history
from ..core.identities import IDENTITIES
from ..core.users import USERS
from ..storage.database import db
from ..storage.models import new_id, utcnow
from .exports import TIMESTAMP_KEYS

# Rows inserted by one statement. SQLite journals each page a statement changes once per statement,
# where one statement per row journaled the pages of a dozen indexes for every row.
STATEMENTROWS = 2000

# A row, as imports.row_of makes it and the insert reads it: the identities' columns in
# this order, the creator's wallet in place of creator_id, each value as JSON holds it (numbers of
# 256 bits as decimal text, timestamps as the export's RFC 3339 text in UTC).
ROW = (
    "id", "identity_id", "content_id", "identity_hash", "vault_id", "display_name", "description", "image",
    "external_reference", "corpora_id", "semantic", "creator", "created_at", "updated_at", "num_positions",
    "assets_sum", "conviction_sum", "conviction_price", "status", "is_user", "user_conviction", "user_conviction_value",
    "creator_signature", "creator_signature_chain_id",
)
ROW_ID, ROW_IDENTITY_ID, ROW_CONTENT_ID, ROW_CREATOR = (ROW.index(name) for name in ("id", "identity_id", "content_id", "creator"))



@dataclass
class Batch:
    """Rows to write in one transaction (an import's lines, a mirror's entries; each with its number): as
    JSON arrays of STATEMENTROWS rows each (text is compact, so memory stays flat), with what the writer
    looks up, in the rows' order."""

    chunks: list = field(default_factory=list)
    sizes: list = field(default_factory=list)
    pending: list = field(default_factory=list)
    lines: list = field(default_factory=list)
    identity_ids: list = field(default_factory=list)
    content_ids: set = field(default_factory=set)
    ids: set = field(default_factory=set)
    creators: set = field(default_factory=set)

    def add(self, number, row):
        self.pending.append(row)
        if len(self.pending) >= STATEMENTROWS:
            self.close()
        self.lines.append(number)
        self.identity_ids.append(row[ROW_IDENTITY_ID])
        self.content_ids.add(row[ROW_CONTENT_ID])
        self.ids.add(row[ROW_ID])
        self.creators.add(row[ROW_CREATOR])

    def close(self):
        if self.pending:
            self.chunks.append(orjson.dumps(self.pending).decode())
            self.sizes.append(len(self.pending))
            self.pending = []



@dataclass
class Written:
    """What write_batch inserted (identity_ids and ids, in the batch's order) and what it left out: the
    numbers of the rows whose content is here already, and (number, id) of those refused for a taken id."""

    identity_ids: list
    ids: list
    known: list
    taken: list


def use_bulk_cache(session):
    """On SQLite, give the session's connection IDENTITY_IMPORT_CACHE_MB of page cache: a large import
    inserts into many indexes at random places, and a bigger cache keeps them in memory."""
    if session.get_bind().dialect.name == "sqlite":
        cache_kib = int(current_app.config["IDENTITY_IMPORT_CACHE_MB"]) * 1024
        session.execute(text(f"PRAGMA cache_size = -{cache_kib}"))


def write_batch(session, batch, wallet):
    """Insert `batch`'s rows in `session`'s write transaction, each with a `created` entry in the change
    log in the name of `wallet`, and their creators made Users when new: a few statements, whatever their
    number. A row whose content is here already is left out, and so is one whose id another identity has."""
    batch.close()
    dialect = session.get_bind().dialect.name
    known, taken = set(), set()
    for chunk in batch.chunks:
        known.update(session.scalars(_present(dialect, "content_id"), {"rows": chunk}))
        taken.update(session.scalars(_present(dialect, "id"), {"rows": chunk}))
    chunks, sizes, written = batch.chunks, batch.sizes, None
    if known or taken:
        chunks, sizes, written = _without(batch, known, taken)
    else:
        written = Written(batch.identity_ids, list(batch.ids), [], [])
    if written.identity_ids:
        _make_users(session, batch.creators)
        for chunk, size in zip(chunks, sizes, strict=True):
            inserted = session.execute(_insert_rows(dialect), {"rows": chunk}).rowcount
            if inserted != size:  # every creator was made a User above: no row may be left out
                raise RuntimeError(f"the import inserted {inserted} rows of a statement's {size}")
        history.record_created_many(session, written.identity_ids, wallet, utcnow())
    return written


def _without(batch, known, taken):
    """The batch's chunks and their sizes without the rows of `known` content or a `taken` id, and what
    is left of it (Written)."""
    rows = [row for chunk in batch.chunks for row in orjson.loads(chunk)]
    kept, written = [], Written([], [], [], [])
    for row, number in zip(rows, batch.lines, strict=True):
        if row[ROW_CONTENT_ID] in known:
            written.known.append(number)
        elif row[ROW_ID] in taken:
            written.taken.append((number, row[ROW_ID]))
        else:
            kept.append(row)
            written.identity_ids.append(row[ROW_IDENTITY_ID])
            written.ids.append(row[ROW_ID])
    chunks = [kept[start:start + STATEMENTROWS] for start in range(0, len(kept), STATEMENTROWS)]
    return [orjson.dumps(chunk).decode() for chunk in chunks], list(map(len, chunks)), written


def _row_source(dialect):
    """The FROM clause that reads `:rows`, a JSON array of ROW arrays, as rows `r` (r.value one
    array), and what orders them as in the array."""
    if dialect == "sqlite":
        return "json_each(:rows) AS r", "r.key"
    return "jsonb_array_elements(CAST(:rows AS jsonb)) WITH ORDINALITY AS r(value, n)", "r.n"


@functools.cache
def _present(dialect, name):
    """The `name` (content_id or id) of each row of `:rows` that an identity here has already."""
    rows, _order = _row_source(dialect)
    # Every name in the SQL comes from this module (ROW, _row_source), none from the input: its
    # values are bound (:rows).
    sql = f"SELECT i.{name} FROM {rows} JOIN identities AS i ON i.{name} = r.value ->> {ROW.index(name)}"  # nosec B608
    return text(sql)


@functools.cache
def _insert_rows(dialect):
    """INSERT ... SELECT of every row of a batch, given as one JSON array of ROW arrays (`:rows`).

    One statement for the whole batch: SQLite journals each page it changes once per statement, and
    the database does the work with Python's lock released.
    """
    columns = [IDENTITIES.c["creator_id" if name == "creator" else name] for name in ROW]
    values = []
    for index, column in enumerate(columns):
        value = f"r.value ->> {index}"
        if column.name == "creator_id":
            value = "users.id"
        elif dialect == "sqlite":
            if column.name in TIMESTAMP_KEYS:
                # SQLite keeps the naive UTC text SQLAlchemy writes: 2026-01-01 00:00:00.000000.
                value = f"substr({value}, 1, 10) || ' ' || substr({value}, 12, 15)"
        else:
            value = f"CAST({value} AS {column.type.compile(dialect=db.engine.dialect)})"
        values.append(value)
    rows, order = _row_source(dialect)
    # As in _present: the table's own column names and this module's expressions; the rows are bound.
    names = ", ".join(column.name for column in columns)
    sql = f"INSERT INTO identities ({names}) SELECT {', '.join(values)} FROM {rows} JOIN users ON users.wallet = r.value ->> {ROW_CREATOR} ORDER BY {order}"  # nosec B608
    return text(sql)


def _make_users(session, wallets):
    """Make a User of each of `wallets` not seen before."""
    known = set(session.scalars(select(USERS.c.wallet).where(USERS.c.wallet.in_(wallets))))
    missing = sorted(wallets - known)
    if missing:
        now = utcnow()
        new = [{"id": new_id(), "wallet": w, "role": "User", "created_at": now, "updated_at": now, "last_login": None} for w in missing]
        session.execute(USERS.insert(), new)
