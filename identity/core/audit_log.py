"""Reading the audit log (identity.core.audit writes it): the listing GET /audit, the console's Audit page and
`flask audit list` share, the export, and `verify`, which walks the chain and names the first entry changed,
removed or inserted."""

from dataclasses import dataclass
from datetime import datetime, timedelta

from flask import current_app
from itsdangerous import BadSignature, URLSafeSerializer
from sqlalchemy import select

from ..storage.database import db
from . import audit
from .browse import cursor_secret
from .errors import InvalidParameters
from .wallets import checksum_wallet

ENTRIES = audit.ENTRIES
CHAIN = audit.CHAIN
DEFAULT_LIMIT = 20
CURSOR_SALT = "identity.audit.cursor.v1"
FILTERS = ("actor", "action", "target", "since", "until")
# More than the clocks of two nodes differ (see conditions).
SKEW = timedelta(seconds=60)
# Entries read per statement by the export and the walk of verify.
BATCH = 5_000


def list_entries(args):
    """The page of entries that query arguments `args` (AuditListArgsSchema: actor, action, target, since,
    until, limit, cursor) ask for, newest first: {"limit", "data", "next"}."""
    asked = {name: args.get(name) for name in FILTERS}
    if asked["actor"] is not None:
        try:
            asked["actor"] = checksum_wallet(asked["actor"].lower())  # any case, as documented
        except ValueError:
            raise InvalidParameters({"actor": ["Not an Ethereum address: expected 0x and 40 hex digits."]}) from None
    limit, before = args.get("limit", DEFAULT_LIMIT), None
    if "cursor" in args:
        carried, limit_, before = _decode(args["cursor"])
        for name in FILTERS:
            if args.get(name) is not None and asked[name] != carried[name]:
                raise InvalidParameters({name: ["Differs from the listing the cursor continues; leave it out."]})
        asked, limit = carried, args.get("limit", limit_)
    query = select(ENTRIES).where(*conditions(asked))
    if before is not None:
        query = query.where(ENTRIES.c.seq < before)
    rows = db.session.execute(query.order_by(ENTRIES.c.seq.desc()).limit(limit + 1)).mappings().all()
    db.session.commit()
    following = None
    if len(rows) > limit:
        rows = rows[:limit]
        state = {name: audit.plain(value) for name, value in asked.items()}
        following = _serializer().dumps([state, limit, rows[-1]["seq"]])
    return {"limit": limit, "data": [audit.shown(row) for row in rows], "next": following}


def conditions(asked):
    """The SQL conditions of the filters `asked` (actor a checksummed wallet; since and until datetimes).

    A time bound is also turned into a bound on seq, read from the index of `at` (a subquery of one index
    lookup), so that the page is read from the primary key in order however many entries the range holds. The
    append stamps an entry after the one before it was appended, so `at` follows `seq` but for the difference
    of the nodes' clocks (well under SKEW): the seq bounds are taken SKEW wider than asked, and `at` itself is
    compared too."""
    found = []
    if asked.get("actor") is not None:
        found.append(ENTRIES.c.actor_wallet == asked["actor"])
    if asked.get("action") is not None:
        found.append(ENTRIES.c.action == asked["action"])
    if asked.get("target") is not None:
        found.append(ENTRIES.c.target_id == asked["target"])
    if asked.get("since") is not None:
        found.append(ENTRIES.c.at >= asked["since"])
        first = (select(ENTRIES.c.seq).where(ENTRIES.c.at >= asked["since"] - SKEW)
                 .order_by(ENTRIES.c.at).limit(1).scalar_subquery())
        found.append(ENTRIES.c.seq >= first)  # none there: NULL, so no entry
    if asked.get("until") is not None:
        found.append(ENTRIES.c.at <= asked["until"])
        last = (select(ENTRIES.c.seq).where(ENTRIES.c.at <= asked["until"] + SKEW)
                .order_by(ENTRIES.c.at.desc()).limit(1).scalar_subquery())
        found.append(ENTRIES.c.seq <= last)
    return found


def _serializer():
    """Signs cursors with the service's shared secret (the one the other listings' cursors use), salted apart."""
    cache = current_app.extensions.setdefault("identity.audit", {})
    if "serializer" not in cache:
        cache["serializer"] = URLSafeSerializer(cursor_secret(), salt=CURSOR_SALT)
    return cache["serializer"]


def _decode(token):
    try:
        state, limit, before = _serializer().loads(token)
        asked = {name: state.get(name) for name in FILTERS}
        for name in ("since", "until"):
            if asked[name] is not None:
                asked[name] = datetime.fromisoformat(asked[name].replace("Z", "+00:00"))
        return asked, int(limit), int(before)
    except (BadSignature, AttributeError, TypeError, ValueError):
        raise InvalidParameters({"cursor": ["Not a cursor this service issued; use the next of a page."]}) from None


def entries(after=0):
    """Every entry after seq `after`, oldest first, each a mapping of its columns, read in batches (each a
    statement of its own)."""
    while True:
        rows = db.session.execute(
            select(ENTRIES).where(ENTRIES.c.seq > after).order_by(ENTRIES.c.seq).limit(BATCH)
        ).mappings().all()
        db.session.commit()
        yield from rows
        if len(rows) < BATCH:
            return
        after = rows[-1]["seq"]


def chain_row():
    """The chain's row (head_seq, head_hash, start_seq, start_hash), or None."""
    row = db.session.execute(select(CHAIN).where(CHAIN.c.id == audit.CHAIN_ID)).first()
    db.session.commit()
    return row


# --- verify --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Finding:
    """The first break of the chain: the entry's seq, what happened to it (changed, removed, inserted), and how
    the walk saw it."""

    seq: int
    what: str
    detail: str

    def __str__(self):
        return f"entry {self.seq} {self.what}: {self.detail}"


@dataclass(frozen=True)
class Verified:
    checked: int
    start_seq: int
    head_seq: int
    head_hash: str
    finding: Finding | None


def verify(expect=None):
    """Walk the chain from its start (the chain row's start: the genesis, or the last entry pruned) to its head,
    checking each entry's hash, its link to the one before, and that the numbers run without a gap; returns
    Verified, whose `finding` names the first entry changed, removed or inserted (None: the chain holds).

    `expect` (seq, hash), a head kept elsewhere (/metrics, a backup's manifest): the entry of that seq must be
    there, with that hash, unless pruned since."""
    chain = chain_row()
    if chain is None:
        first = next(entries(), None)
        if first is None:
            return Verified(0, 0, 0, audit.GENESIS, None)
        return Verified(0, 0, 0, audit.GENESIS, Finding(first["seq"], "inserted", "the chain's row is missing: "
                                                         "the log has entries but no head"))
    expected_seq, expected_prev, checked = chain.start_seq + 1, chain.start_hash, 0
    kept = {}
    finding = None
    for row in entries(after=-(2**62)):  # from the lowest seq there is: one numbered before the start shows
        finding = _check(row, expected_seq, expected_prev, chain)
        if finding is not None:
            break
        if expect is not None and row["seq"] == expect[0]:
            kept[row["seq"]] = row["hash"]
        expected_seq, expected_prev, checked = row["seq"] + 1, row["hash"], checked + 1
    if finding is None:
        finding = _check_head(expected_seq - 1, expected_prev, chain)
    if finding is None and expect is not None:
        finding = _check_expected(expect, kept, chain)
    return Verified(checked, chain.start_seq, chain.head_seq, chain.head_hash, finding)


def _check(row, expected_seq, expected_prev, chain):
    seq = row["seq"]
    if seq <= chain.start_seq:
        return Finding(seq, "inserted", f"it is numbered at or before the chain's start (seq {chain.start_seq})")
    if seq > expected_seq:
        return Finding(expected_seq, "removed", f"the numbers jump from {expected_seq - 1} to {seq}")
    if seq > chain.head_seq:
        return Finding(seq, "inserted", f"it comes after the chain's head (seq {chain.head_seq})")
    if audit.entry_hash(row) != row["hash"]:
        return _renumbered(row) or Finding(seq, "changed", "its content does not match its hash")
    if row["prev_hash"] != expected_prev:
        if seq == chain.start_seq + 1:
            return Finding(seq - 1, "removed", "the first entry kept does not follow the chain's start "
                           f"(its prev_hash is not {expected_prev[:16]}…)")
        return Finding(seq - 1, "changed", f"its hash is not the one entry {seq} holds as prev_hash "
                       "(it was changed and its hash made again)")
    return None


def _renumbered(row):
    """When an entry's hash matches its content under another seq, entries before it were removed or inserted
    and the later ones renumbered: the Finding that says so, or None."""
    seq = row["seq"]
    for delta in (1, -1, 2, -2, 3, -3):
        if audit.entry_hash({**row, "seq": seq + delta}) == row["hash"]:
            if delta > 0:
                return Finding(seq, "removed", f"entry {seq} was numbered {seq + delta}: {delta} entr"
                               f"{'y' if delta == 1 else 'ies'} before it removed, the later ones renumbered")
            return Finding(seq + delta, "inserted", f"entry {seq} was numbered {seq + delta}: {-delta} "
                           f"entr{'y' if delta == -1 else 'ies'} inserted before it, the later ones renumbered")
    return None


def _check_head(last_seq, last_hash, chain):
    if last_seq < chain.head_seq:
        return Finding(last_seq + 1, "removed", f"the log ends at seq {last_seq}, its head is seq {chain.head_seq}")
    if last_hash != chain.head_hash:
        return Finding(last_seq, "changed", "its hash is not the head's (it was changed and its hash made again)")
    return None


def _check_expected(expect, kept, chain):
    seq, hash_ = expect
    if seq <= chain.start_seq:
        return None  # pruned since: nothing to compare
    if seq > chain.head_seq:
        return Finding(seq, "removed", f"the head kept elsewhere is seq {seq}, the log's is seq {chain.head_seq}")
    if kept.get(seq) != hash_:
        return Finding(seq, "changed", "its hash is not the one kept elsewhere: the log was rewritten from there on")
    return None
