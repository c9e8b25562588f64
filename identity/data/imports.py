"""Identities as data: import of JSON Lines that checks every line's id against its content.

Import reads the lines that identity.data.exports writes; each is validated by the same field rules as
a create (schemas.IdentityImportSchema), its identity_id and identity_hash must be the addresses of its
content, recomputed here, and its creator_signature, when it has one, must be its creator's (recovered to it, or
accepted by its contract wallet on creator_signature_chain_id, asked of that chain's endpoint): a line that fails,
or whose contract wallet's signature cannot be checked here, is refused by its number and nothing of it is written.
Lines are written in batches, one transaction each, so a long import keeps what it committed when it is
stopped.
"""

import queue
import threading
from dataclasses import dataclass
from datetime import UTC

import orjson
from flask import current_app
from marshmallow import ValidationError

from ..core import contract_wallets
from ..core.verify import Unverifiable, Unverified, check_creator_signature, verified_content_id
from ..schemas import identity_import_schema
from ..storage.database import write_transaction
from .bulk import ROW, ROW_CONTENT_ID, ROW_ID, Batch, use_bulk_cache, write_batch
from .exports import TIMESTAMP_KEYS, UINT256_KEYS
from .plain_lines import load_common

# Lines written per transaction on import, by one statement: large enough that the costs of each
# transaction (the full-text indexes' flush, the commit) spread thin, small enough that a batch commits
# in about a second, since the service's own writes wait for it.
IMPORT_BATCH = 10_000


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
            if row[ROW_CONTENT_ID] in batch.content_ids:
                report.skipped()  # the same content twice in the file: the first one stands
                continue
            if row[ROW_ID] in batch.ids:
                report.refused(number, f"id {row[ROW_ID]} is the id of an earlier line's identity; give this line a new id")
                continue
            batch.add(number, row)
            if len(batch.lines) >= batch_size:
                writer.write(batch)
                batch = Batch()
        if batch.lines:
            writer.write(batch)
    return counts


def parse_line(line):
    """The row to insert for one export line (see bulk.ROW); raises Refused when the line is not a sound identity."""
    try:
        data = orjson.loads(line)
    except orjson.JSONDecodeError as error:
        raise Refused(f"not JSON ({error}); each line must be one Identity object as `identities export` writes it") from None
    if not isinstance(data, dict):
        raise Refused("not a JSON object; each line must be one Identity object as `identities export` writes it")
    try:
        return row_of(data)
    except Unverifiable as unverifiable:
        raise Refused(str(unverifiable)) from None
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
        fields.update({name: _utc_text(name, fields[name]) for name in TIMESTAMP_KEYS})
        fields["id"] = str(fields["id"])
    content_id = fields["content_id"] = verified_content_id(fields)
    if fields["creator_signature"] is not None or fields.get("creator_signature_chain_id") is not None:
        fields["creator_signature"], fields["creator_signature_chain_id"] = check_creator_signature(
            content_id, fields["creator"], fields["creator_signature"], fields.get("creator_signature_chain_id"),
            contract_wallets.Endpoints.of(current_app.config))
    return tuple([fields.get(name) for name in ROW])


def row_values(row, names):
    """The values of `names` in `row` (as row_of makes it)."""
    return {name: row[ROW.index(name)] for name in names}


def _utc_text(name, moment):
    """The timestamp `moment` in UTC as export writes it; Refused when UTC cannot hold it (a valid RFC 3339
    time such as 0001-01-01T00:00:00+14:00 is before year 1 there)."""
    try:
        return moment.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"
    except (OverflowError, ValueError):
        raise Refused(f"invalid fields: {name}: {moment.isoformat()} is outside the years 1 to 9999 in UTC, which "
                      "a timestamp here can hold; give a time within them") from None


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


