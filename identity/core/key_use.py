"""When each key was last used (api_keys.last_used_at): noted in memory as requests authenticate, and
written off their path.

A request made with a key writes nothing: it notes its key's id and the moment in this process's memory
(note), at most once an interval per key. A writer beside the requests (a thread, a greenlet under gevent:
identity.background starts it) writes the uses noted, every IDENTITY_KEY_USE_INTERVAL seconds, in one
short transaction of its own, and once more as the process stops. The UPDATE writes a key only when its
stored last_used_at is at least an interval older, so that the processes of a server and the nodes that
share a database write each key at most about once an interval between them.

Best effort: the transaction never waits for the write lock. When the database is locked, read-only or
full, the write is skipped with a WARNING and the uses stay noted for the next try; a process notes at
most MAX_NOTED keys between two writes (the least recently used go first), so memory stays bounded.
"""

import logging
import threading
from datetime import timedelta

from cachetools import LRUCache
from flask import current_app
from sqlalchemy import bindparam, or_, select, update
from sqlalchemy.exc import DBAPIError

from ..storage.database import write_transaction
from ..storage.faults import cause
from ..storage.models import ApiKey, utcnow

EXTENSION = "identity_key_use"
MAX_NOTED = 10_000
# A key's use, noted at `at`, is written only over a last_used_at at or before `before` (`at` less the interval).
# The table's (Core) UPDATE, run once for each key (executemany).
_KEYS = ApiKey.__table__
_WRITE = update(_KEYS).where(
    _KEYS.c.id.in_(
        select(_KEYS.c.id)
        .where(_KEYS.c.id == bindparam("key_id"), or_(_KEYS.c.last_used_at.is_(None), _KEYS.c.last_used_at <= bindparam("before")))
        # A row another transaction holds is left for the next write, not waited for (PostgreSQL's SKIP LOCKED).
        .with_for_update(skip_locked=True)
        .scalar_subquery()
    )
).values(last_used_at=bindparam("at"))
log = logging.getLogger(__name__)


class KeyUses:
    """The uses a process has noted and not yet written: {key id: when}, at most MAX_NOTED, and the writer
    that writes them."""

    def __init__(self, app):
        self.app = app
        self.interval = app.config["IDENTITY_KEY_USE_INTERVAL"]
        self.noted = LRUCache(MAX_NOTED)
        self.lock = threading.Lock()  # cachetools' caches are not thread-safe; it is never held across a wait
        self.stopping = self.thread = None

    def note(self, key_id):
        with self.lock:
            self.noted[key_id] = utcnow()

    def write(self):
        """Write the uses noted so far in one transaction that does not wait for the write lock; True when
        written (or none were noted), False when the database refused (they stay noted)."""
        with self.lock:
            taken = dict(self.noted)
            self.noted.clear()
        if not taken:
            return True
        interval = timedelta(seconds=self.interval)
        rows = [{"key_id": key_id, "at": at, "before": at - interval} for key_id, at in taken.items()]
        try:
            with write_transaction(wait=False) as session:
                session.execute(_WRITE, rows)
        except DBAPIError as error:
            log.warning("last_used_at of %d key(s) not recorded: database %s; trying again in %g s",
                        len(taken), cause(error), self.interval)
            with self.lock:
                for key_id, at in taken.items():  # a use noted meanwhile is the later one
                    self.noted.setdefault(key_id, at)
            return False
        return True

    def run(self):
        with self.app.app_context():
            while not self.stopping.wait(self.interval):
                self.write_quietly()
            self.write_quietly()

    def write_quietly(self):
        try:
            self.write()
        except Exception:  # noqa: BLE001 - the writer outlives any one failure; it writes again later
            log.exception("last_used_at not recorded; trying again in %g s", self.interval)

    def start(self):
        # Made here, in the process that serves: under gevent's worker, a greenlet and gevent's Event.
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.run, name="identity-key-use", daemon=True)
        self.thread.start()

    def stop(self, timeout):
        """Stop the writer, which writes what is noted once more first (or write it here, when no writer runs)."""
        if self.thread is None:
            with self.app.app_context():
                self.write_quietly()
            return
        self.stopping.set()
        self.thread.join(timeout)
        self.stopping = self.thread = None


def init_app(app):
    app.extensions[EXTENSION] = KeyUses(app)


def note(key_id):
    """Note that key `key_id` authenticated a request now (memory only; the writer records it)."""
    current_app.extensions[EXTENSION].note(key_id)


def write_noted():
    """Write the uses this process has noted, now (the writer does it every interval); False when the
    database refused."""
    return current_app.extensions[EXTENSION].write()


def start(app):
    """Start `app`'s writer in this process (identity.background); idempotent."""
    uses = app.extensions[EXTENSION]
    if uses.thread is None:
        uses.start()


def stop(app, timeout=2.0):
    """Stop `app`'s writer, after it has written what this process noted."""
    app.extensions[EXTENSION].stop(timeout)
