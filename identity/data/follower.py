"""The mirrors' follower: each active mirror's upstream feed read (identity.data.upstream) and applied here
in its order, a batch per transaction with the mirror's position (identity.data.mirror_batches).

One follower works at a time across every process and node: the holder of the lease "mirrors"
(identity.storage.lease). Serving processes each run one (identity.background starts it;
IDENTITY_MIRRORS_FOLLOW=0 keeps a node out), and `flask --app app mirrors run` runs one on its own.
Whichever holds the lease starts a run per active mirror, and each run has two loops (threads, greenlets
under gevent): a reader that follows the upstream's event stream, or its long polls where a proxy cuts
streams, and puts what arrives on a queue bounded by bytes (the reader waits while it is full); and an
applier that takes all that is waiting, up to a batch, and applies it. So the upstream makes the next
entries while the last are written here, and memory stays bounded whatever the upstream sends: an
entry travels as the upstream's bytes (at most MAX_EVENT_BYTES each), QUEUED_BYTES of them wait, and
the applier reads one at a time (identity.data.upstream bounds what a read holds).

A read that fails is retried with back-off (storage.lease.backoff, as webhooks are), its last error on
the mirror's row; so is a batch that cannot be written for the database's sake, at the same position.
A new key or any other change of the mirror's row (PATCH, the CLI) cuts a back-off short. An upstream
that refuses the mirror's request in a way that retrying will not change (a 4xx other than 401, 403,
408, 429) pauses the mirror, with the reason in last_error, until an operator resumes it. A mirror
whose follower succeeded (read an answer, wrote a batch) since its last error shows it as past
(identity.data.mirrors.failing).
"""

import collections
import logging
import threading
import time

from sqlalchemy import bindparam, select, update
from sqlalchemy.exc import DBAPIError

from ..storage import lease
from ..storage.database import one_statement, write_transaction
from ..storage.faults import cause
from ..storage.models import Mirror, utcnow
from . import mirror_batches
from .upstream import Upstream, UpstreamError, printable

log = logging.getLogger(__name__)

LEASE = "mirrors"
EXTENSION = "identity_mirror_follower"
# How often the lease holder looks for mirrors to follow, and an idle run at its mirror's row.
LOOK_SECONDS = 1.0
# The upstream's bytes queued ahead of the applier (each entry, and each read, counted with what Python holds
# for it besides, ENTRY_BYTES): a few batches of identities, whatever their number.
QUEUED_BYTES = 8 * 1024 * 1024
ENTRY_BYTES = 200
# The most entries applied in one transaction: when far behind, large batches spread each transaction's
# costs (SQLite's full-text index flush, the commit) thin; caught up, a batch is what has just arrived.
BATCH = 5000
# Streams that end or go silent before they bring anything, in a row, before long polls take over for a while.
CUT_STREAMS = 2
LONGPOLL_SECONDS = 600.0
RETRY_MIN_SECONDS = 1.0

_MIRRORS = Mirror.__table__
_MIRROR_TO_RUN = select(
    _MIRRORS.c.id, _MIRRORS.c.name, _MIRRORS.c.url, _MIRRORS.c.api_key, _MIRRORS.c.position, _MIRRORS.c.upstream_head,
    _MIRRORS.c.active, _MIRRORS.c.updated_at,
).where(_MIRRORS.c.id == bindparam("id"))


def retry_wait(attempt, longest):
    """Seconds to wait after the `attempt`th failure in a row: 1, 2, 4 ... up to `longest`, as webhooks wait."""
    return lease.backoff(attempt, min(RETRY_MIN_SECONDS, longest), longest)


class Reads:
    """The queue between a run's reader and its applier, bounded by the bytes it holds: put waits while
    QUEUED_BYTES are queued (an item larger than that waits for the queue to be empty)."""

    def __init__(self, limit=QUEUED_BYTES):
        self.limit = limit
        self.items = collections.deque()
        self.held = 0
        self.changed = threading.Condition()

    def put(self, item, size, timeout):
        """Queue `item` of `size` bytes; False when it did not fit within `timeout` seconds."""
        with self.changed:
            if not self.changed.wait_for(lambda: not self.items or self.held + size <= self.limit, timeout):
                return False
            self.items.append((item, size))
            self.held += size
            self.changed.notify_all()
            return True

    def get(self, timeout):
        """The oldest (item, size), waiting up to `timeout` seconds for one (None if none came)."""
        with self.changed:
            if timeout and not self.changed.wait_for(lambda: self.items, timeout) or not self.items:
                return None
            item, size = self.items.popleft()
            self.held -= size
            self.changed.notify_all()
            return item, size


class MirrorRun:
    """Follow one mirror's upstream until the mirror is paused or removed, the lease is lost, or the
    follower stops."""

    def __init__(self, follower, row):
        self.follower = follower
        self.app = follower.app
        self.id, self.name, self.url = row.id, row.name, row.url
        self.position = row.position
        self.head = row.upstream_head
        self.stopped = threading.Event()
        self.wake = threading.Event()  # set by a change of the mirror's row, or the end of the run: no more back-off
        self.reads = Reads()
        self.upstream = Upstream(row.url, row.api_key)
        self.key = row.api_key
        self.seen = row.updated_at  # the row's updated_at as last read; None after this run wrote it
        self.longest = self.app.config["IDENTITY_MIRROR_RETRY_MAX_SECONDS"]
        self.failing = True  # until an answer or a batch has shown otherwise, and after each error
        self.warned_end = False

    def wanted(self):
        return not self.stopped.is_set() and self.follower.holding()

    # --- the applier ------------------------------------------------------------------------------

    def run(self):
        reader = threading.Thread(target=self.read, name=f"mirror-reader-{self.name}", daemon=True)
        reader.start()
        looked = time.monotonic()
        try:
            while self.wanted():
                entries, head, error, alive = self.take()
                if entries or (head is not None and head != self.head):
                    if not self.apply_until_done(entries, head):
                        return
                elif alive and error is None and self.failing:
                    self.recovered()
                if error is not None:
                    self.failed(error)
                    if error.refused:
                        return
                if not entries and time.monotonic() - looked >= LOOK_SECONDS:
                    looked = time.monotonic()
                    if not self.still_active():
                        return
        finally:
            self.stopped.set()
            self.wake.set()
            self.upstream.close()
            reader.join(2.0)

    def take(self):
        """What the reader found: wait up to LOOK_SECONDS for it, then take all that waits, up to a batch (BATCH
        entries, or QUEUED_BYTES). Returns (entries, the upstream's head if it told, an UpstreamError if the
        reading failed, whether the upstream showed itself alive: entries, a heartbeat, a whole page)."""
        entries, head, error, alive, taken = [], None, None, False, 0
        item = self.reads.get(LOOK_SECONDS)
        if item is None:
            return entries, head, error, alive
        while True:
            (found, told, error, lively), size = item
            entries.extend(found)
            taken += size
            alive = alive or lively
            head = told if head is None or (told is not None and told > head) else head
            if error is not None or len(entries) >= BATCH or taken >= QUEUED_BYTES:
                return entries, head, error, alive
            item = self.reads.get(0)
            if item is None:
                return entries, head, error, alive

    def apply_until_done(self, entries, head):
        """Apply a batch, again and again with back-off while the database's state makes it fail (the
        error on the mirror's row); False when this run must stop."""
        attempt = 0
        while self.wanted():
            try:
                return self.apply(entries, head)
            except Exception as error:  # noqa: BLE001 - any failure at this position is shown, and retried
                attempt += 1
                why = cause(error) if isinstance(error, DBAPIError) else printable(f"{type(error).__name__}: {error}")
                wait = retry_wait(attempt, self.longest)
                message = (f"Storing the upstream's entries after position {self.position} failed: {why}. Trying "
                           f"again in {wait:.0f} s; if it goes on, see this service's log and its database.")
                log.warning("mirror %s: %s", self.name, message, extra={"mirror": self.name, "position": self.position})
                self.record_error(message)
                self.wake.clear()
                self.wake.wait(wait)
        return False

    def apply(self, entries, head):
        """Apply a batch; False when this run must stop (the mirror is paused, removed, or moved on by another)."""
        head = self.head if head is None else head
        if head < self.position and not self.warned_end:
            self.warned_end = True
            self.record_error(
                f"The upstream's feed ends at {head}, before this mirror's position {self.position}, as when it was "
                f"restored from an older backup. Waiting for its entries above {self.position}: an upstream that keeps "
                "the contract numbers its later entries above every earlier one.")
        done = mirror_batches.apply(self.id, self.name, entries, self.position, head)
        if done is None:
            return False
        if done.position != self.position:  # entries handled: updated_at is this run's, no change to wake for
            self.seen, self.failing = None, False
        self.position, self.head = done.position, max(head, done.position)
        if done.rejected or entries:
            log.debug("mirror %s: at %s of %s", self.name, self.position, self.head,
                      extra={"mirror": self.name, "applied": done.applied, "already_present": done.already_present,
                             "rejected": done.rejected})
        return True

    def failed(self, error):
        """Record what went wrong; pause the mirror when retrying will not help."""
        message = str(error)
        if not error.refused:
            log.warning("mirror %s: %s", self.name, message, extra={"mirror": self.name})
            self.record_error(message)
            return
        log.error("mirror %s paused: %s", self.name, message, extra={"mirror": self.name})
        now = utcnow()
        values = {"active": False, "last_error": message, "last_error_at": now, "updated_at": now}
        if error.beyond_end:
            values.update(position=0, position_at=None)
        with write_transaction() as session:
            session.execute(update(_MIRRORS).where(_MIRRORS.c.id == self.id).values(**values))

    def record_error(self, message):
        """The mirror's last_error, now; a database that cannot take it is logged, not raised."""
        self.failing = True
        try:
            with write_transaction() as session:
                session.execute(update(_MIRRORS).where(_MIRRORS.c.id == self.id).values(
                    last_error=message, last_error_at=utcnow()))
        except DBAPIError as error:
            log.warning("mirror %s: its last error not recorded (database %s)", self.name, cause(error),
                        extra={"mirror": self.name})

    def recovered(self):
        """The upstream is alive again after an error: the last error is past (updated_at after it)."""
        try:
            with write_transaction() as session:
                session.execute(update(_MIRRORS).where(_MIRRORS.c.id == self.id, _MIRRORS.c.last_error_at.is_not(None))
                                .values(updated_at=utcnow()))
        except DBAPIError as error:
            log.warning("mirror %s: its recovery not recorded (database %s)", self.name, cause(error),
                        extra={"mirror": self.name})
            return
        self.seen, self.failing = None, False

    def still_active(self):
        """Whether the mirror is still there and active (read afresh). A new key is taken up for the next
        request, and a change of the row (a new key, a resume) wakes the reader from its back-off."""
        with one_statement() as session:
            row = session.execute(_MIRROR_TO_RUN, {"id": self.id}).first()
        if row is None or not row.active:
            return False
        changed = row.api_key != self.key or (self.seen is not None and row.updated_at != self.seen)
        self.key, self.seen = row.api_key, row.updated_at
        if changed:
            self.wake.set()
        return True

    # --- the reader -------------------------------------------------------------------------------

    def read(self):
        """Follow the upstream after the position, putting what arrives on the queue, until stopped."""
        after, attempt, cuts, longpoll_until = self.position, 0, 0, 0.0
        while not self.stopped.is_set():
            if self.key != self.upstream.headers["x-api-key"]:  # given anew (PATCH /mirrors/<id>)
                self.upstream.close()
                self.upstream = Upstream(self.url, self.key)
            started = alive = False
            error = None
            try:
                if time.monotonic() < longpoll_until:
                    asked, brought = time.monotonic(), False
                    for entries, head in self.upstream.longpoll(after):
                        after = self.put(entries, head, after, bool(entries))
                        brought = brought or bool(entries)
                    alive = True
                    self.hand(([], None, None, True), ENTRY_BYTES)  # a whole page: the upstream answers
                    if not brought and time.monotonic() - asked < RETRY_MIN_SECONDS:
                        self.stopped.wait(RETRY_MIN_SECONDS)  # an upstream that does not wait: not asked at once again
                else:
                    for entries, head, beats in self.upstream.events(after):
                        started = True
                        after = self.put(entries, head, after, bool(entries) or beats > 0)
                        alive = alive or bool(entries) or beats > 0
                        if self.stopped.is_set():
                            return
            except UpstreamError as failure:
                error = failure
            except Exception:  # noqa: BLE001 - the reader must not end silently: the applier waits on it
                log.exception("mirror %s: reading the upstream failed", self.name, extra={"mirror": self.name})
                error = UpstreamError("Reading the upstream failed unexpectedly (see this service's log); trying again.")
            if self.stopped.is_set():
                return
            if alive:
                attempt = 0
            if error is not None and error.no_stream or cuts + (started and not alive) >= CUT_STREAMS:
                # A stream answered by something else, or cut before it brought anything, CUT_STREAMS times in a row.
                log.info("mirror %s: the upstream's event streams do not get through (%s); following it by long "
                         "polls for %d s", self.name, error or "cut", LONGPOLL_SECONDS, extra={"mirror": self.name})
                longpoll_until, cuts = time.monotonic() + LONGPOLL_SECONDS, 0
                continue
            cuts = (cuts + 1 if not alive else 0) if started else cuts
            if error is None:
                if not alive:  # ended before it brought anything: not at once again
                    self.stopped.wait(RETRY_MIN_SECONDS)
                continue
            self.hand(([], None, error, False), ENTRY_BYTES)
            if error.refused:
                return
            attempt += 1
            self.wake.clear()
            if self.wake.wait(max(retry_wait(attempt, self.longest), error.retry_after or 0.0)):
                attempt = 0  # the mirror was changed (a new key, resumed): tried again at once

    def put(self, entries, head, after, alive):
        """Queue what a read brought (an answer's start, with the head, counts too; `alive` when it shows the
        upstream alive); returns the largest seq seen. Entries out of order are queued as they came: the
        applier rejects and counts them."""
        self.hand((entries, head, None, alive), ENTRY_BYTES + sum(len(data) + ENTRY_BYTES for _, data in entries))
        return max([after, *(seq for seq, _ in entries)])

    def hand(self, item, size):
        """Put `item` on the queue, waiting while it is full, unless the run stops meanwhile."""
        while not self.stopped.is_set():
            if self.reads.put(item, size, LOOK_SECONDS):
                return


class Follower(lease.LeaseHolder):
    """Holds the mirrors' lease; while it holds it, runs each active mirror (storage.lease.LeaseHolder). It
    asks for the lease only when some mirror is active, so that an instance without mirrors writes nothing."""

    def __init__(self, app):
        super().__init__(app, LEASE, "mirror follower", app.config["IDENTITY_MIRROR_LEASE_SECONDS"], LOOK_SECONDS)

    def wanted(self):
        return bool(self.due())

    def due(self):
        """The ids of the active mirrors."""
        with one_statement() as connection:
            return connection.execute(select(Mirror.id).where(Mirror.active)).scalars().all()

    def work(self, mirror_id):
        """Run the mirror from its row as it is when the run starts."""
        with one_statement() as session:
            row = session.execute(_MIRROR_TO_RUN, {"id": mirror_id}).first()
        if row is not None and row.active:
            MirrorRun(self, row).run()


def start(app):
    """Start the app's follower in this process, unless IDENTITY_MIRRORS_FOLLOW is off; idempotent."""
    if not app.config["IDENTITY_MIRRORS_FOLLOW"] or EXTENSION in app.extensions:
        return None
    app.extensions[EXTENSION] = follower = Follower(app).start()
    return follower


def stop(app, timeout=5.0):
    """Stop the app's follower, if it runs, and give its lease up."""
    follower = app.extensions.pop(EXTENSION, None)
    if follower is not None:
        follower.stop(timeout)
