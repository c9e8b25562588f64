"""Identities as data: import of JSON Lines that checks every line's id against its content.

Import reads the lines that identity.data.exports writes; each is validated by the same field rules as
a create (schemas.IdentityImportSchema), and its identity_id and identity_hash must be the addresses of
its content, recomputed here: a line that fails is refused by its number and nothing of it is written.
Lines are written in batches, one transaction each, so a long import keeps what it committed when it is
stopped.
"""

import functools
import queue
import threading
from dataclasses import dataclass, field
from datetime import UTC

import orjson
from flask import current_app
from marshmallow import ValidationError
from sqlalchemy import select, text

from ..core import history
from ..core.identities import IDENTITIES
from ..core.users import USERS
from ..core.verify import Unverified, verified_content_id
from ..schemas import identity_import_schema
from ..storage.database import db, write_transaction
from ..storage.models import new_id, utcnow
from .exports import TIMESTAMP_KEYS, UINT256_KEYS
from .plain_lines import load_common

# Lines written per transaction on import, by one statement: large enough that the costs of each
# transaction (the full-text indexes' flush, the commit) spread thin, small enough that a batch commits
# in about a second, since the service's own writes wait for it.
IMPORT_BATCH = 10_000
# Rows inserted by one statement. SQLite journals each page a statement changes once per statement,
# where one statement per row journaled the pages of a dozen indexes for every row.
STATEMENT_ROWS = 2000


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
class Batch:
    """Rows to write in one transaction (an import's lines, a mirror's entries; each with its number): as
    JSON arrays of STATEMENT_ROWS rows each (text is compact, so memory stays flat), with what the writer
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
        if len(self.pending) >= STATEMENT_ROWS:
            self.close()
        self.lines.append(number)
        self.identity_ids.append(row[_IDENTITY_ID])
        self.content_ids.add(row[_CONTENT_ID])
        self.ids.add(row[_ID])
        self.creators.add(row[_CREATOR])

    def close(self):
        if self.pending:
            self.chunks.append(orjson.dumps(self.pending).decode())
            self.sizes.append(len(self.pending))
            self.pending = []


def import_identities(lines, wallet, counts=None, on_refused=None, progress=None, batch_size=IMPORT_BATCH):
    """Import exported identities from `lines` (bytes or str, one JSON object each); returns ImportCounts.

    An identity whose content is already stored is skipped. A line that is not valid is refused:
    `on_refused(line_number, message)` is called and nothing of it is written. Every imported
    identity gets a `created` entry in the change log, in the name of `wallet`. `counts` (an
    ImportCounts) is updated after each committed batch, so a caller that is interrupted knows what
    was committed. `progress(n)` is called as lines are read.

    Lines are read and checked here while a thread writes the previous batch: the database does its
    part with Python's lock released, so the two share a machine's cores.
    """
    counts = counts if counts is not None else ImportCounts()
    report = _Report(counts, on_refused)
    with _Writer(current_app._get_current_object(), wallet, report) as writer:
        batch = Batch()
        for number, line in enumerate(lines, 1):
            counts.lines = number
            if progress:
                progress(1)
            if not line.strip():
                continue
            try:
                row = parse_line(line)
            except Refused as refusal:
                report.refused(number, str(refusal))
                continue
            if row[_CONTENT_ID] in batch.content_ids:
                report.skipped()  # the same content twice in the file: the first one stands
                continue
            if row[_ID] in batch.ids:
                report.refused(number, f"id {row[_ID]} is the id of an earlier line's identity; give this line a new id")
                continue
            batch.add(number, row)
            if len(batch.lines) >= batch_size:
                writer.write(batch)
                batch = Batch()
        if batch.lines:
            writer.write(batch)
    return counts


# A row of an import, as parse_line returns it and the insert reads it: the identities' columns in
# this order, the creator's wallet in place of creator_id, each value as JSON holds it (numbers of
# 256 bits as decimal text, timestamps as the export's RFC 3339 text in UTC).
_ROW = (
    "id", "identity_id", "content_id", "identity_hash", "vault_id", "display_name", "description", "image",
    "external_reference", "corpora_id", "semantic", "creator", "created_at", "updated_at", "num_positions",
    "assets_sum", "conviction_sum", "conviction_price", "status", "is_user", "user_conviction", "user_conviction_value",
)
_ID, _IDENTITY_ID, _CONTENT_ID, _CREATOR = (_ROW.index(name) for name in ("id", "identity_id", "content_id", "creator"))


def parse_line(line):
    """The row to insert for one export line (see _ROW); raises Refused when the line is not a sound identity."""
    try:
        data = orjson.loads(line)
    except orjson.JSONDecodeError as error:
        raise Refused(f"not JSON ({error}); each line must be one Identity object as `identities export` writes it") from None
    if not isinstance(data, dict):
        raise Refused("not a JSON object; each line must be one Identity object as `identities export` writes it")
    try:
        return row_of(data)
    except Unverified as unverified:
        raise Refused(f"{unverified}: the line was altered; export it again from its source") from None


def row_of(data):
    """The row to insert for `data`, an exported Identity (a dict, as a line holds it): its fields validated
    as a create's (Refused when one is not valid) and its addresses recomputed from its content
    (identity.core.verify's Unverified when they are not its own)."""
    fields = load_common(data)
    if fields is not None:
        # The common form spells each number and timestamp one way only, the way they are stored.
        fields.update({name: data[name] for name in (*UINT256_KEYS, *TIMESTAMP_KEYS)})
    else:
        try:
            fields = identity_import_schema.load(data)
        except ValidationError as error:
            problems = "; ".join(f"{name}: {' '.join(map(str, _flat(messages)))}" for name, messages in error.messages.items())
            raise Refused(f"invalid fields: {problems}") from None
        fields.update({name: str(fields[name]) for name in UINT256_KEYS})
        fields.update({name: _utc_text(fields[name]) for name in TIMESTAMP_KEYS})
        fields["id"] = str(fields["id"])
    fields["content_id"] = verified_content_id(fields)
    return tuple([fields.get(name) for name in _ROW])


def row_values(row, names):
    """The values of `names` in `row` (as row_of makes it)."""
    return {name: row[_ROW.index(name)] for name in names}


def _utc_text(moment):
    return moment.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def _flat(messages):
    if isinstance(messages, dict):
        return [f"{key}: {' '.join(map(str, _flat(value)))}" for key, value in messages.items()]
    return messages if isinstance(messages, list) else [messages]


class _Report:
    """The import's counts and refusals, kept by the reading loop and the writing thread alike."""

    def __init__(self, counts, on_refused):
        self.counts = counts
        self.on_refused = on_refused
        self.lock = threading.Lock()

    def refused(self, number, message):
        with self.lock:
            self.counts.refused += 1
            if self.on_refused:
                self.on_refused(number, message)

    def skipped(self):
        with self.lock:
            self.counts.skipped += 1

    def committed(self, imported, skipped, taken):
        """A batch is committed: `taken` lists (line number, id) of the lines refused for a taken id."""
        with self.lock:
            self.counts.imported += imported
            self.counts.skipped += skipped
            self.counts.refused += len(taken)
            for number, identity_id in taken:
                if self.on_refused:
                    self.on_refused(number, f"id {identity_id} belongs to another identity here; give the line a new id")


class _Writer:
    """A thread that writes the import's batches, one transaction each, while the caller reads the next.

    A batch is handed over only when the thread takes it, so at most two are in memory (the one being
    written and the next one), and memory stays flat. Leaving the block waits for every batch to be
    written; leaving it by an exception (Ctrl-C) lets the batch being written commit and drops the rest.
    An error of the thread is raised in the caller. The thread writes through the app's session, in an
    app context of its own.
    """

    def __init__(self, app, wallet, report):
        self.app, self.wallet, self.report = app, wallet, report
        self.batches = queue.Queue(maxsize=1)
        self.taken = threading.Semaphore(0)
        self.stopping = threading.Event()
        self.error = None
        self.thread = threading.Thread(target=self._run, name="identities-import-writer")

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, kind, _value, _traceback):
        if kind is not None:
            self.stopping.set()
        self._put(None)
        self.thread.join()
        if self.error is not None and kind is None:
            raise self.error

    def write(self, batch):
        self._put(batch)
        while not self.taken.acquire(timeout=0.1) and self.thread.is_alive():
            continue
        if self.error is not None:
            raise self.error

    def _put(self, item):
        while self.thread.is_alive():
            try:
                self.batches.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    def _run(self):
        try:
            with self.app.app_context():
                while (batch := self.batches.get()) is not None and not self.stopping.is_set():
                    self.taken.release()
                    _write(batch, self.wallet, self.report)
        except BaseException as error:  # noqa: BLE001 - raised again in the caller's thread
            self.error = error


def _write(batch, wallet, report):
    """Insert one batch in one transaction: known content is skipped, a taken id refused."""
    with write_transaction() as session:
        use_bulk_cache(session)
        written = write_batch(session, batch, wallet)
    inserted = len(written.identity_ids)
    report.committed(inserted, len(batch.lines) - inserted - len(written.taken), written.taken)


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
        if row[_CONTENT_ID] in known:
            written.known.append(number)
        elif row[_ID] in taken:
            written.taken.append((number, row[_ID]))
        else:
            kept.append(row)
            written.identity_ids.append(row[_IDENTITY_ID])
            written.ids.append(row[_ID])
    chunks = [kept[start:start + STATEMENT_ROWS] for start in range(0, len(kept), STATEMENT_ROWS)]
    return [orjson.dumps(chunk).decode() for chunk in chunks], list(map(len, chunks)), written


def _row_source(dialect):
    """The FROM clause that reads `:rows`, a JSON array of _ROW arrays, as rows `r` (r.value one
    array), and what orders them as in the array."""
    if dialect == "sqlite":
        return "json_each(:rows) AS r", "r.key"
    return "jsonb_array_elements(CAST(:rows AS jsonb)) WITH ORDINALITY AS r(value, n)", "r.n"


@functools.cache
def _present(dialect, name):
    """The `name` (content_id or id) of each row of `:rows` that an identity here has already."""
    rows, _order = _row_source(dialect)
    # Every name in the SQL comes from this module (_ROW, _row_source), none from the input: its
    # values are bound (:rows).
    sql = f"SELECT i.{name} FROM {rows} JOIN identities AS i ON i.{name} = r.value ->> {_ROW.index(name)}"  # nosec B608
    return text(sql)


@functools.cache
def _insert_rows(dialect):
    """INSERT ... SELECT of every row of a batch, given as one JSON array of _ROW arrays (`:rows`).

    One statement for the whole batch: SQLite journals each page it changes once per statement, and
    the database does the work with Python's lock released.
    """
    columns = [IDENTITIES.c["creator_id" if name == "creator" else name] for name in _ROW]
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
    sql = f"INSERT INTO identities ({names}) SELECT {', '.join(values)} FROM {rows} JOIN users ON users.wallet = r.value ->> {_CREATOR} ORDER BY {order}"  # nosec B608
    return text(sql)


def _make_users(session, wallets):
    """Make a User of each of `wallets` not seen before."""
    known = set(session.scalars(select(USERS.c.wallet).where(USERS.c.wallet.in_(wallets))))
    missing = sorted(wallets - known)
    if missing:
        now = utcnow()
        new = [{"id": new_id(), "wallet": w, "role": "User", "created_at": now, "updated_at": now, "last_login": None} for w in missing]
        session.execute(USERS.insert(), new)
