"""A batch of an upstream's change-feed entries, checked, then applied here in one transaction with the
mirror's new position: after a crash a mirror resumes where its last batch committed, with no entry
lost and none applied twice.

- `created`: the entry's doc must be an Identity whose fields are valid, whose content hashes to the
  content id that its identity_id and identity_hash name (the import's checks, identity.data.imports),
  and whose creator_signature, when it has one, is its creator's (identity.core.verify). It is stored
  as the upstream has it (id, timestamps, creator, status, figures) by the import's bulk insert, with a
  `created` entry in this instance's own log, so that a mirror of this mirror gets it too. Content
  that is here already is counted, and left as it is.
- `changed`: the doc's status and figures are applied to the identity if it came from this mirror, and
  recorded as a `changed` entry here. A change to an identity that came from elsewhere (created here,
  imported, another mirror's) is not applied: two instances that mirror each other would otherwise
  send conflicting changes back and forth for ever.
- An entry shown redacted (the mirror's key is not an Admin's, and the identity is removed upstream)
  has no doc: its change takes the identity down here too; its create is not copied.

Whatever fails a check is rejected: counted, and skipped. So is an entry that cannot be stored for a
reason of its own: out of order (its seq not above the one before it), a value beyond what Python or the
database holds (a timestamp out of range once in UTC), or one the database refuses when the batch is
written (the batch is then written again in halves until that entry is alone, and it is rejected). A
batch's rejections are logged as one line: their number and the first REJECTIONS_LOGGED reasons, with
their upstream seqs, whatever the upstream sends.
"""

import logging
import time
from dataclasses import dataclass
from datetime import UTC, datetime

import orjson
from sqlalchemy import bindparam, insert, select, update
from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from ..core import curation, history
from ..core.identities import IDENTITIES, IDENTITIES_WITH_CREATOR, identity_record
from ..core.verify import Unverified
from ..schemas import identity_import_schema
from ..storage.database import write_transaction
from ..storage.faults import cause
from ..storage.models import Mirror, MirroredIdentity, utcnow
from . import bulk, imports
from .exports import UINT256_KEYS
from .upstream import printable

log = logging.getLogger(__name__)

# Who the entries a mirror writes in this instance's log name as acting.
MIRROR_WALLET = "mirror"
# A doc's keys that an export line (and so identity.data.imports) reads; its creator is reduced to the wallet.
_LINE_KEYS = frozenset(identity_import_schema.fields)
# Entries checked between two looks at the process's other work (a few milliseconds of checking).
YIELD_EVERY = 100
# The reasons a batch's log line names; the others are counted.
REJECTIONS_LOGGED = 5
# What the database's state, not an entry, makes a write fail with: unreachable, locked, full, read-only.
# Retrying the same batch later mends it; an entry is never rejected for it.
_NOT_THE_ENTRYS = (OperationalError, InterfaceError, PoolTimeout)
_REDACTED_KEYS = frozenset(history.REDACTED_KEYS)
_FIGURES = tuple(curation.EDITABLE)
_MIRRORS = Mirror.__table__
_MIRRORED = MirroredIdentity.__table__
_MIRROR_TO_APPLY = select(_MIRRORS.c.position, _MIRRORS.c.active).where(_MIRRORS.c.id == bindparam("id")).with_for_update()
# The identities that came from a mirror, among some identity_ids, locked until the transaction ends.
_FROM_MIRROR = (
    IDENTITIES_WITH_CREATOR.join(_MIRRORED, _MIRRORED.c.id == IDENTITIES.c.id)
    .where(IDENTITIES.c.identity_id.in_(bindparam("identity_ids", expanding=True)), _MIRRORED.c.mirror_id == bindparam("mirror_id"))
    .with_for_update(of=IDENTITIES)
)


@dataclass
class Applied:
    """What a batch did: the mirror's position after it, and its counts."""

    position: int
    applied: int = 0
    already_present: int = 0
    rejected: int = 0


class Rejections:
    """A batch's rejected entries: counted, the first REJECTIONS_LOGGED reasons kept for its one log line."""

    def __init__(self, mirror):
        self.mirror = mirror
        self.count = 0
        self.first = []

    def add(self, seq, reason):
        self.count += 1
        if len(self.first) < REJECTIONS_LOGGED:
            self.first.append({"seq": seq, "reason": _text(reason, 300)})

    def log(self):
        if not self.count:
            return
        named = "; ".join(f"entry {each['seq']}: {each['reason']}" for each in self.first)
        more = f" (and {self.count - len(self.first)} more)" if self.count > len(self.first) else ""
        log.warning("mirror %s: %d upstream entries rejected: %s%s", self.mirror, self.count, named, more,
                    extra={"mirror": self.mirror, "rejected": self.count, "reasons": self.first})


class _Checked:
    """The batch's entries once checked: the rows to insert, the changes to apply, and the counts so far."""

    def __init__(self, rejections):
        self.rejections = rejections
        self.rows = bulk.Batch()
        self.changes = {}  # identity_id -> (figures, updated_at)
        self.rejected = 0
        self.already_present = 0
        self.last_at = None

    def reject(self, entry, reason):
        self.rejected += 1
        self.rejections.add(entry["seq"], reason)


def apply(mirror_id, mirror, entries, position, head):
    """Apply `entries` (an upstream's, in its order: dicts, or (seq, JSON text) as identity.data.upstream
    reads them) to mirror `mirror_id` (named `mirror`) at `position`, the upstream having `head` as its last
    seq; returns Applied, or None when the mirror is no longer there to apply them: removed, paused, or
    moved on by another follower (nothing is written then). Raises what the database's state makes the
    write fail with (OperationalError and the like): the same batch is to be applied again later."""
    rejections = Rejections(mirror)
    try:
        return _apply(mirror_id, rejections, list(entries), position, head)
    finally:
        rejections.log()


def _apply(mirror_id, rejections, entries, position, head):
    """apply's work on `entries`; a write the database refuses for an entry's value is done again in halves."""
    checked = _Checked(Rejections(rejections.mirror))
    last = position
    for number, item in enumerate(entries, 1):
        entry = _entry(item)
        if entry["seq"] <= last:
            checked.reject(entry, f"out of order: its seq is not above {last}, the one before it")
            continue
        last = entry["seq"]
        try:
            _check(checked, entry)
        except Exception as error:  # noqa: BLE001 - whatever an entry makes fail is that entry's, and rejects it alone
            checked.reject(entry, f"it cannot be read here ({type(error).__name__}: {error})")
        if number % YIELD_EVERY == 0:
            time.sleep(0)  # under gevent's worker, the process's requests are served in between
    try:
        done = _write(mirror_id, checked, position, last, head)
    except _NOT_THE_ENTRYS:
        raise
    except Exception as error:  # noqa: BLE001 - a value the database refuses: found by halves, and rejected
        return _refused(mirror_id, rejections, entries, position, head, error)
    if done is not None:  # what it rejected is written: counted in the batch's log line
        rejections.count += checked.rejections.count
        rejections.first = (rejections.first + checked.rejections.first)[:REJECTIONS_LOGGED]
    return done


def _refused(mirror_id, rejections, entries, position, head, error):
    """The batch `entries` whose write failed with `error`: each half applied alone, until the entry that the
    database refuses is alone, and rejected."""
    if len(entries) > 1:
        half = len(entries) // 2
        first = _apply(mirror_id, rejections, entries[:half], position, head)
        if first is None:
            return None
        second = _apply(mirror_id, rejections, entries[half:], first.position, head)
        if second is None:
            return None
        return Applied(second.position, first.applied + second.applied,
                       first.already_present + second.already_present, first.rejected + second.rejected)
    entry = _entry(entries[0])
    if entry["seq"] <= position:
        raise error  # nothing of it was to be written: not the entry's doing
    rejected = _Checked(Rejections(rejections.mirror))
    rejected.rejected = 1
    done = _write(mirror_id, rejected, position, entry["seq"], head)
    if done is not None:
        rejections.add(entry["seq"], f"the database refuses it ({cause(error) if hasattr(error, 'orig') else error})")
    return done


def _entry(item):
    """An entry as a dict, from what the reader gives: (seq, JSON text), checked to be an object with that seq."""
    if isinstance(item, dict):
        return item
    seq, data = item
    try:
        entry = orjson.loads(data)
    except orjson.JSONDecodeError:
        entry = None
    return entry if isinstance(entry, dict) and entry.get("seq") == seq else {"seq": seq}


def _write(mirror_id, checked, position, last, head):
    """Write what `checked` holds, and the position `last`, in one transaction; None when the mirror is gone,
    paused, or no longer at `position`."""
    with write_transaction() as session:
        row = session.execute(_MIRROR_TO_APPLY, {"id": mirror_id}).first()
        if row is None or not row.active or row.position != position:
            return None
        done = Applied(last, already_present=checked.already_present, rejected=checked.rejected)
        if checked.changes:
            # The identities to change are locked before the feed's lock (which storing takes), in the order
            # a curation takes them: a PATCH of one of them meanwhile waits, and never deadlocks with this.
            session.execute(_FROM_MIRROR, {"identity_ids": sorted(checked.changes), "mirror_id": mirror_id}).all()
        _store(session, mirror_id, checked, done)
        _change(session, mirror_id, checked, done)
        values = {"position": last, "upstream_head": max(head, last)}
        if last != position:  # entries handled: a change of the mirror's row (and a past last_error, if any)
            values["updated_at"] = utcnow()
        if checked.last_at is not None:
            values["position_at"] = checked.last_at
        session.execute(
            update(_MIRRORS).where(_MIRRORS.c.id == mirror_id).values(
                applied=_MIRRORS.c.applied + done.applied,
                already_present=_MIRRORS.c.already_present + done.already_present,
                rejected=_MIRRORS.c.rejected + done.rejected,
                **values,
            )
        )
    return done


def _check(checked, entry):
    """Check one entry, and add what it asks to `checked`, or reject it."""
    kind, doc = entry.get("kind"), entry.get("doc")
    at = _timestamp(entry.get("at"))
    if at is None or not isinstance(entry.get("identity_id"), str):
        return checked.reject(entry, "not the contract's shape: an entry needs an identity_id and an RFC 3339 `at` "
                              "(years 1 to 9999 once in UTC)")
    checked.last_at = at
    if kind not in ("created", "changed"):
        return checked.reject(entry, f"kind {_text(kind)} is neither created nor changed")
    if doc is None:
        if entry.keys() - {"doc"} != _REDACTED_KEYS:
            return checked.reject(entry, "the entry carries no doc: the upstream does not serve include_docs")
        if kind == "changed":  # redacted: the identity is removed upstream, and the key may not see it
            checked.changes[entry["identity_id"]] = ({"status": "removed"}, at)
        else:
            log.debug("mirror %s: upstream entry %s not copied: its identity is removed upstream, and the mirror's "
                      "key is not an Admin's, which would see it", checked.rejections.mirror, entry["seq"])
        return None
    try:
        row = _verified_row(entry, doc)
    except (imports.Refused, Unverified) as refused:
        return checked.reject(entry, str(refused))
    if kind == "changed":
        values = imports.row_values(row, (*_FIGURES, "updated_at"))
        figures = {name: int(values[name]) if name in UINT256_KEYS else values[name] for name in _FIGURES}
        checked.changes[entry["identity_id"]] = (figures, datetime.fromisoformat(values["updated_at"]))
        return None
    found = imports.row_values(row, ("id", "content_id"))
    if found["content_id"] in checked.rows.content_ids:
        checked.already_present += 1  # the same content twice in one batch: the first one stands
    elif found["id"] in checked.rows.ids:
        checked.reject(entry, f"id {found['id']} is the id of another identity of the same batch")
    else:
        checked.rows.add(entry["seq"], row)
    return None


def _verified_row(entry, doc):
    """The import's row for the entry's doc (imports.row_of, which checks its addresses and its creator's
    signature), once the doc is checked to be that identity's; raises imports.Refused or Unverified."""
    if not isinstance(doc, dict):
        raise imports.Refused("its doc is not an Identity object")
    if doc.get("identity_id") != entry["identity_id"]:
        raise imports.Refused(f"its doc is the identity {_text(doc.get('identity_id'))}, not the entry's")
    creator = doc.get("creator")
    if not isinstance(creator, dict) or not isinstance(creator.get("wallet"), str):
        raise imports.Refused("its doc's creator is not a User object with a wallet")
    line = {name: value for name, value in doc.items() if name in _LINE_KEYS}
    line["creator"] = creator["wallet"]
    return imports.row_of(line)


def _store(session, mirror_id, checked, done):
    """Insert the batch's new identities, noted as this mirror's."""
    if not checked.rows.lines:
        return
    bulk.use_bulk_cache(session)
    written = bulk.write_batch(session, checked.rows, MIRROR_WALLET)
    if written.ids:
        session.execute(insert(_MIRRORED), [{"id": identity, "mirror_id": mirror_id} for identity in written.ids])
    done.applied += len(written.ids)
    done.already_present += len(written.known)
    for seq, identity in written.taken:
        checked.rejections.add(seq, f"id {identity} belongs to another identity here")
        done.rejected += 1


def _change(session, mirror_id, checked, done):
    """Apply the batch's changes to those of their identities that came from this mirror."""
    if not checked.changes:
        return
    rows = session.execute(_FROM_MIRROR, {"identity_ids": sorted(checked.changes), "mirror_id": mirror_id}).all()
    found = {identity["identity_id"]: identity for identity in map(identity_record, rows)}
    now = utcnow()
    # In the upstream's order, so that this feed records the changes in the order the upstream's did.
    for identity_id, (figures, updated_at) in checked.changes.items():
        identity = found.get(identity_id)
        if identity is not None and curation.apply_changes(session, identity, figures, MIRROR_WALLET, now, updated_at):
            done.applied += 1


def _timestamp(value):
    """An RFC 3339 `at` in UTC, or None: not a timestamp, without its offset, or beyond Python's (and the
    database's) range once in UTC, as 0001-01-01T00:00:00+14:00 is."""
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value)
        return moment.astimezone(UTC) if moment.tzinfo is not None else None
    except (ValueError, OverflowError):
        return None


def _text(value, limit=200):
    return printable(value if isinstance(value, str) else repr(value), limit)
