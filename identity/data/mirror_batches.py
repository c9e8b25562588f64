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

Whatever fails a check is counted as rejected, logged with its reason and upstream seq, and skipped.
"""

import logging
import time
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import bindparam, insert, select, update

from ..core import curation, history
from ..core.identities import IDENTITIES, IDENTITIES_WITH_CREATOR, identity_record
from ..core.verify import Unverified
from ..schemas import identity_import_schema
from ..storage.database import write_transaction
from ..storage.models import Mirror, MirroredIdentity, utcnow
from . import bulk, imports
from .exports import UINT256_KEYS

log = logging.getLogger(__name__)

# Who the entries a mirror writes in this instance's log name as acting.
MIRROR_WALLET = "mirror"
# A doc's keys that an export line (and so identity.data.imports) reads; its creator is reduced to the wallet.
_LINE_KEYS = frozenset(identity_import_schema.fields)
# Entries checked between two looks at the process's other work (a few milliseconds of checking).
YIELD_EVERY = 100
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


class _Checked:
    """The batch's entries once checked: the rows to insert, the changes to apply, and the counts so far."""

    def __init__(self, mirror):
        self.mirror = mirror
        self.rows = bulk.Batch()
        self.changes = {}  # identity_id -> (figures, updated_at)
        self.rejected = 0
        self.already_present = 0
        self.last_at = None

    def reject(self, entry, reason):
        self.rejected += 1
        log_rejected(self.mirror, entry["seq"], reason, entry.get("identity_id"))


def log_rejected(mirror, seq, reason, identity_id=None):
    log.warning("mirror %s: upstream entry %s rejected: %s", mirror, seq, reason, extra={
        "mirror": mirror, "seq": seq, "identity_id": _text(identity_id), "reason": reason,
    })


def apply(mirror_id, mirror, entries, position, head):
    """Apply `entries` (an upstream's, in its order) to mirror `mirror_id` (named `mirror`) at `position`,
    the upstream having `head` as its last seq; returns Applied, or None when the mirror is no longer
    there to apply them: removed, paused, or moved on by another follower (nothing is written then)."""
    checked = _Checked(mirror)
    last = position
    for number, entry in enumerate(entries, 1):
        if entry["seq"] <= last:
            continue  # given again (a stream resumed): handled already
        last = entry["seq"]
        _check(checked, entry)
        if number % YIELD_EVERY == 0:
            time.sleep(0)  # under gevent's worker, the process's requests are served in between
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
        values = {"position": last, "upstream_head": max(head, last), "updated_at": utcnow()}
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
        return checked.reject(entry, "not the contract's shape: an entry needs an identity_id and an RFC 3339 `at`")
    checked.last_at = at
    if kind not in ("created", "changed"):
        return checked.reject(entry, f"kind {_text(kind)} is neither created nor changed")
    if doc is None:
        if entry.keys() - {"doc"} != _REDACTED_KEYS:
            return checked.reject(entry, "the entry carries no doc: the upstream does not serve include_docs")
        if kind == "changed":  # redacted: the identity is removed upstream, and the key may not see it
            checked.changes[entry["identity_id"]] = ({"status": "removed"}, at)
        else:
            log.info("mirror %s: upstream entry %s not copied: its identity is removed upstream, and the mirror's "
                     "key is not an Admin's, which would see it", checked.mirror, entry["seq"])
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
        log_rejected(checked.mirror, seq, f"id {identity} belongs to another identity here")
        done.rejected += 1


def _change(session, mirror_id, checked, done):
    """Apply the batch's changes to those of their identities that came from this mirror."""
    if not checked.changes:
        return
    rows = session.execute(_FROM_MIRROR, {"identity_ids": sorted(checked.changes), "mirror_id": mirror_id}).all()
    now = utcnow()
    for row in rows:
        identity = identity_record(row)
        figures, updated_at = checked.changes[identity["identity_id"]]
        if curation.apply_changes(session, identity, figures, MIRROR_WALLET, now, updated_at):
            done.applied += 1


def _timestamp(value):
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else None


def _text(value):
    return value[:200] if isinstance(value, str) else repr(value)[:200]
