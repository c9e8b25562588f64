"""The mirrors' follower: each active mirror's upstream feed read (identity.data.upstream) and applied here
in its order, a batch per transaction with the mirror's position (identity.data.mirror_batches).

One follower works at a time across every process and node: the holder of the lease "mirrors"
(identity.storage.lease). Serving processes each run one (identity.background starts it;
IDENTITY_MIRRORS_FOLLOW=0 keeps a node out), and `flask --app app mirrors run` runs one on its own.
Whichever holds the lease starts a run per active mirror, and each run has two loops (threads, greenlets
under gevent): a reader that follows the upstream's event stream, or its long polls where a proxy cuts
streams, and puts what arrives on a bounded queue; and an applier that takes all that is waiting, up to
a batch, and applies it. So the upstream makes the next entries while the last are written here, and
memory stays flat.

A run that fails is retried with back-off, its last error on the mirror's row. An upstream that refuses
the mirror's request in a way that retrying will not change (a 4xx other than 401, 403, 408, 429) pauses
the mirror, with the reason in last_error, until an operator resumes it.
"""

import logging
import queue
import random
import threading
import time

from sqlalchemy import bindparam, select, update

from ..storage import lease
from ..storage.database import one_statement, write_transaction
from ..storage.models import Mirror, utcnow
from . import mirror_batches
from .upstream import Upstream, UpstreamError

log = logging.getLogger(__name__)

LEASE = "mirrors"
EXTENSION = "identity_mirror_follower"
# How often the lease holder looks for mirrors to follow, and an idle run at its mirror's row.
LOOK_SECONDS = 1.0
# Reads (a long poll's page, what one read of a stream brought, at most 256 KiB) queued ahead of the applier:
# about a batch.
QUEUED_READS = 16
# The most entries applied in one transaction: when far behind, large batches spread each transaction's
# costs (SQLite's full-text index flush, the commit) thin; caught up, a batch is what has just arrived.
BATCH = 5000
# Streams that end or go silent before they bring anything, in a row, before long polls take over for a while.
CUT_STREAMS = 2
LONGPOLL_SECONDS = 600.0
RETRY_MIN_SECONDS = 1.0

_jitter = random.SystemRandom()
_MIRRORS = Mirror.__table__
_MIRROR_TO_RUN = select(
    _MIRRORS.c.id, _MIRRORS.c.name, _MIRRORS.c.url, _MIRRORS.c.api_key, _MIRRORS.c.position, _MIRRORS.c.upstream_head,
    _MIRRORS.c.active,
).where(_MIRRORS.c.id == bindparam("id"))


def backoff(delay, longest):
    """The next pause after one of `delay` seconds: doubled up to `longest`, its upper half drawn at random."""
    ceiling = min(longest, delay * 2)
    return max(min(RETRY_MIN_SECONDS, longest), _jitter.uniform(ceiling / 2, ceiling))


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
        self.reads = queue.Queue(maxsize=QUEUED_READS)
        self.upstream = Upstream(row.url, row.api_key)
        self.key = row.api_key
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
                entries, head, error = self.take()
                if entries or (head is not None and head != self.head):
                    if not self.apply(entries, head):
                        return
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
            self.upstream.close()
            reader.join(2.0)

    def take(self):
        """What the reader found: wait up to LOOK_SECONDS for it, then take all that waits, up to a batch.
        Returns (entries, the upstream's head if it told, an UpstreamError if the reading failed)."""
        entries, head, error = [], None, None
        try:
            item = self.reads.get(timeout=LOOK_SECONDS)
        except queue.Empty:
            return entries, head, error
        while True:
            found, told, error = item
            entries.extend(found)
            head = told if head is None or (told is not None and told > head) else head
            if error is not None or len(entries) >= BATCH:
                return entries, head, error
            try:
                item = self.reads.get_nowait()
            except queue.Empty:
                return entries, head, error

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
        values = {"active": False, "last_error": message, "last_error_at": utcnow(), "updated_at": utcnow()}
        if error.beyond_end:
            values.update(position=0, position_at=None)
        with write_transaction() as session:
            session.execute(update(_MIRRORS).where(_MIRRORS.c.id == self.id).values(**values))

    def record_error(self, message):
        with write_transaction() as session:
            session.execute(update(_MIRRORS).where(_MIRRORS.c.id == self.id).values(
                last_error=message, last_error_at=utcnow()))

    def still_active(self):
        """Whether the mirror is still there and active (read afresh); a new key is taken up for the next request."""
        with one_statement() as session:
            row = session.execute(_MIRROR_TO_RUN, {"id": self.id}).first()
        if row is None or not row.active:
            return False
        self.key = row.api_key
        return True

    # --- the reader -------------------------------------------------------------------------------

    def read(self):
        """Follow the upstream after the position, putting what arrives on the queue, until stopped."""
        after, delay, cuts, longpoll_until = self.position, RETRY_MIN_SECONDS, 0, 0.0
        longest = self.app.config["IDENTITY_MIRROR_RETRY_MAX_SECONDS"]
        while not self.stopped.is_set():
            if self.key != self.upstream.headers["x-api-key"]:  # given anew (PATCH /mirrors/<id>)
                self.upstream.close()
                self.upstream = Upstream(self.url, self.key)
            started = alive = False
            error = None
            try:
                if time.monotonic() < longpoll_until:
                    asked = time.monotonic()
                    entries, head = self.upstream.longpoll(after)
                    after, alive = self.put(entries, head, after), True
                    if not entries and time.monotonic() - asked < RETRY_MIN_SECONDS:
                        self.stopped.wait(RETRY_MIN_SECONDS)  # an upstream that does not wait: not asked at once again
                else:
                    for entries, head, beats in self.upstream.events(after):
                        started = True
                        after = self.put(entries, head, after)
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
                delay = RETRY_MIN_SECONDS
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
            self.hand(([], None, error))
            if error.refused:
                return
            self.stopped.wait(max(delay, error.retry_after or 0.0))
            delay = backoff(delay, longest)

    def put(self, entries, head, after):
        """Queue what a read brought; returns the last seq queued."""
        fresh = [entry for entry in entries if entry["seq"] > after]
        if fresh or head is not None:
            self.hand((fresh, head, None))
        return fresh[-1]["seq"] if fresh else after

    def hand(self, item):
        """Put `item` on the queue, waiting while it is full, unless the run stops meanwhile."""
        while not self.stopped.is_set():
            try:
                self.reads.put(item, timeout=LOOK_SECONDS)
                return
            except queue.Full:
                continue


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
