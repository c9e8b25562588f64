"""Live changes: what the long polls and event streams of GET /changes wait on, one hub per process.

A waiting client holds no database connection and makes no query. Each process has one watcher
(a greenlet under gunicorn's gevent worker, a thread under `flask run`), started with the first long
poll or stream. When the change log grows, the watcher fetches the new entries once, keeps the latest
BUFFER of them, and wakes every waiting client of the process, which takes its entries from there.

How the watcher learns of a commit, pushed rather than polled per client:
- in this process: history's append marks the session, and the commit wakes the watcher at once;
- PostgreSQL, any node: the append sends pg_notify in its transaction, so PostgreSQL delivers it at
  the commit to the one connection per process that LISTENs (a lost one is opened again, and what
  committed meanwhile is fetched);
- SQLite, another process: SQLite has no notifications. The watcher asks `PRAGMA data_version` on
  one connection of its own every WATCH_SECONDS: the number changes when another connection commits.
  It is answered from shared memory, without reading the database, and costs one query per interval
  per process, however many clients wait. (inotify on the -wal file was the other way: it needs a
  C extension, sees checkpoints and writes to other tables alike, and works only on local disks.)
"""

import bisect
import logging
import sqlite3
import threading
import time
import weakref

from flask import current_app, has_app_context
from sqlalchemy.exc import SQLAlchemyError

from ..core import history
from ..storage.database import committed, db

log = logging.getLogger(__name__)

EXTENSION = "identity_live"
# SQLite: how often the watcher asks whether another process committed.
WATCH_SECONDS = 0.05
# Entries kept for the waiting clients; a client further behind reads the database.
BUFFER = 1000
# Entries fetched by one query.
BATCH = 500
# PostgreSQL: how long a LISTEN waits before it looks whether the hub was stopped.
LISTEN_SECONDS = 1.0
# After a failure, the watcher tries again after this long, doubled up to the second figure.
RETRY_SECONDS = (0.5, 10.0)
# How often the keys of the open streams and long polls are checked again (through auth's key cache):
# the clients of a key revoked or expired, or whose user's role or whose scope changed, are let go within
# IDENTITY_KEY_CACHE_SECONDS and this.
KEY_CHECK_SECONDS = 1.0

# Every hub of this process, for end_streams.
_hubs = weakref.WeakSet()


class Entry:
    """An entry of the log as the hub keeps it: whole, with its encodings cached for every client."""

    __slots__ = ("seq", "identity_id", "whole", "encoded")

    def __init__(self, whole):
        self.seq = whole["seq"]
        self.identity_id = whole["identity_id"]
        self.whole = whole
        self.encoded = {}


class Hub:
    """One app's live feed in this process: the watcher, the latest entries, and the waiting clients."""

    def __init__(self, app):
        self.app = app
        self.condition = threading.Condition()
        self.wake = threading.Event()
        self.closed = False
        self.head = None  # the last entry's seq fetched; None until started
        self.floor = 0  # the buffer holds every entry above this seq
        self.entries = []  # Entry, by seq
        self.seqs = []
        self.status = {}  # identity_id -> its current status, for the buffered entries' identities
        self.holders = {}  # holder (a key's id, a console session's) -> its streams and long polls waiting here
        self.checks = {}  # holder -> whether it may still follow the feed, asked every KEY_CHECK_SECONDS
        self.revoked = set()  # holders that stopped being valid while their clients waited
        self.stopping = threading.Event()
        self.threads = []

    # --- what the feeds use -------------------------------------------------------------------

    def start(self):
        """Start watching, once; the first long poll or stream does it."""
        if self.head is not None or self.closed:
            return self
        with self.app.app_context():  # outside the lock: clients of a started hub never wait for this
            head = history.head()
            # The engine's URL: Flask-SQLAlchemy resolved a relative SQLite path into the instance folder.
            url = db.engine.url
        with self.condition:
            if self.head is not None or self.closed:
                return self
            self.head = self.floor = head
            if url.get_backend_name() == "postgresql":
                target = self._listen_postgresql
                args = (url.set(drivername="postgresql").render_as_string(hide_password=False),)
            elif url.database not in (None, "", ":memory:"):
                target, args = self._watch_sqlite, (url.database,)
            else:
                target, args = self._watch_process, ()  # a database in memory has no other process
            self._spawn("identity-live", target, *args)
            self._spawn("identity-live-keys", self._check_keys)
        return self

    def _spawn(self, name, target, *args):
        # A greenlet under gevent's monkey patching (gunicorn's default worker), else a thread.
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        thread.start()
        self.threads.append(thread)

    def follow(self, holder, still_valid):
        """Note a stream or long poll of `holder` (an API key's id, or a console session's), for which
        `still_valid()` is asked again (in an app context) every KEY_CHECK_SECONDS while it waits: False
        lets its clients go. Returns its release."""
        with self.condition:
            self.holders[holder] = self.holders.get(holder, 0) + 1
            self.checks[holder] = still_valid
        released = []

        def release():
            if not released:
                released.append(True)
                with self.condition:
                    left = self.holders.pop(holder) - 1
                    if left:
                        self.holders[holder] = left
                    else:
                        del self.checks[holder]
                        self.revoked.discard(holder)

        return release

    def read(self, after, limit):
        """Up to `limit` (Entry, status) pairs above `after` from the buffer, or None when it does not
        reach back that far (then the caller reads the database)."""
        with self.condition:
            if self.head is None or after < self.floor:
                return None
            start = bisect.bisect_right(self.seqs, after)
            return [(entry, self.status[entry.identity_id]) for entry in self.entries[start:start + limit]]

    def wait(self, after, seconds, holder=None):
        """Wait until an entry above `after` is known, the hub closes, `holder` is no longer valid, or
        `seconds` pass; True if an entry is."""
        deadline = time.monotonic() + seconds
        with self.condition:
            while not self.closed and self.head <= after and holder not in self.revoked:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self.condition.wait(remaining)
            return self.head is not None and self.head > after

    def close(self):
        """Wake every waiting client for good: streams end, long polls answer."""
        with self.condition:
            self.closed = True
            self.condition.notify_all()
        self.wake.set()
        self.stopping.set()

    def stop(self, timeout=5):
        """Close, and wait for the watcher to finish."""
        self.close()
        for thread in self.threads:
            thread.join(timeout)

    # --- the watcher ----------------------------------------------------------------------------

    def _fetch(self):
        """Fetch the entries above head, keep them, and wake the clients; False if the database failed."""
        try:
            with self.app.app_context():
                while not self.closed:
                    rows = history.entries_after(self.head, BATCH)
                    if rows:
                        self._keep(rows)
                    if len(rows) < BATCH:
                        return True
        except SQLAlchemyError as error:
            log.warning("live feed: new entries not fetched (%s); trying again", type(error).__name__)
            return False
        return True

    def _keep(self, rows):
        with self.condition:
            for whole, status in rows:
                entry = Entry(whole)
                self.entries.append(entry)
                self.seqs.append(entry.seq)
                self.status[entry.identity_id] = status  # an older entry of it is shown as the poll shows it
            self.head = self.seqs[-1]
            excess = len(self.entries) - BUFFER
            if excess > 0:
                self.floor = self.seqs[excess - 1]
                del self.entries[:excess], self.seqs[:excess]
                self.status = {entry.identity_id: self.status[entry.identity_id] for entry in self.entries}
            self.condition.notify_all()

    def _check_keys(self):
        """Every KEY_CHECK_SECONDS, check each holder of clients, once, however many it holds."""
        while not self.stopping.wait(KEY_CHECK_SECONDS):
            with self.condition:
                checks = dict(self.checks)
            if not checks:
                continue
            try:
                with self.app.app_context():
                    gone = {holder for holder, still_valid in checks.items() if not still_valid()}
            except SQLAlchemyError as error:
                log.warning("live feed: keys not checked (%s); trying again", type(error).__name__)
                continue
            if gone:
                with self.condition:
                    self.revoked |= gone & self.checks.keys()
                    self.condition.notify_all()

    def _pause(self, delay):
        """Sleep after a failure (interrupted by close); returns the next delay."""
        self.wake.wait(delay)
        return min(delay * 2, RETRY_SECONDS[1])

    def _watch_process(self):
        """Only this process writes: its commits wake the watcher."""
        while not self.closed:
            self.wake.wait()
            self.wake.clear()
            if not self.closed:
                self._fetch()

    def _watch_sqlite(self, path):
        connection, version, delay = None, None, RETRY_SECONDS[0]
        while not self.closed:
            woken = self.wake.wait(WATCH_SECONDS)
            self.wake.clear()
            if self.closed:
                break
            try:
                if connection is None:
                    connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
                now = connection.execute("PRAGMA data_version").fetchone()[0]
            except sqlite3.Error as error:
                log.warning("live feed: cannot watch the SQLite file (%s); trying again", error)
                if connection is not None:
                    connection.close()
                connection, version = None, None
                delay = self._pause(delay)
                continue
            if woken or now != version:
                if self._fetch():
                    version, delay = now, RETRY_SECONDS[0]
                else:
                    delay = self._pause(delay)
        if connection is not None:
            connection.close()

    def _listen_postgresql(self, conninfo):
        import psycopg
        from psycopg import sql

        listen = sql.SQL("LISTEN {}").format(sql.Identifier(history.CHANNEL))
        delay = RETRY_SECONDS[0]
        while not self.closed:
            try:
                connect_timeout = self.app.config["IDENTITY_DB_CONNECT_TIMEOUT"]
                with psycopg.connect(conninfo, autocommit=True, connect_timeout=connect_timeout) as connection:
                    connection.execute(listen)
                    # What committed while nobody listened (at start, or while the connection was lost).
                    while not self._fetch() and not self.closed:
                        delay = self._pause(delay)
                    delay = RETRY_SECONDS[0]
                    while not self.closed:
                        if any(True for _ in connection.notifies(timeout=LISTEN_SECONDS, stop_after=1)):
                            self._fetch()
            except psycopg.Error as error:
                if self.closed:
                    break
                log.warning("live feed: the PostgreSQL notifications were lost (%s); listening again",
                            type(error).__name__)
                delay = self._pause(delay)


def init_app(app):
    app.extensions[EXTENSION] = hub = Hub(app)
    _hubs.add(hub)


def hub_of(app):
    """`app`'s hub in this process, started."""
    return app.extensions[EXTENSION].start()


def stop(app):
    """Stop `app`'s hub in this process (tests, and any embedding that builds apps and drops them)."""
    app.extensions[EXTENSION].stop()


def end_streams():
    """End every open stream and long poll of this process at once (SIGTERM: see gunicorn.conf.py)."""
    for hub in list(_hubs):
        hub.close()


def wake():
    """Tell the live feeds of this process that entries of the change log have just been committed
    here: they read them at once, before their next look at the database."""
    if has_app_context():
        hub = current_app.extensions.get(EXTENSION)
        if hub is not None:
            hub.wake.set()


@committed.connect
def _wake_after_commit(session, notes):
    if history.APPENDED in notes:
        wake()
