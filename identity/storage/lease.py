"""Leases in the database: a named right to do something that one process at a time may do.

A holder takes the lease for `ttl` seconds and renews it before they pass; when it stops renewing
(it crashed, or its node went away), another takes it once it has expired. A holder counts its own
term from before it asked, so it stops before anyone else may start. Clocks of the nodes are assumed
to agree to well under a second (NTP).
"""

import logging
import os
import random
import socket
import threading
import time
import uuid
from datetime import timedelta

from sqlalchemy import delete, insert, or_, update
from sqlalchemy.exc import DBAPIError, IntegrityError

from .database import db, write_transaction
from .faults import cause
from .models import Lease, utcnow

log = logging.getLogger(__name__)

_LEASES = Lease.__table__
_jitter = random.SystemRandom()


def backoff(attempt, shortest, longest):
    """Seconds to wait after the `attempt`th failure in a row: doubling from `shortest` up to `longest`, the
    upper half of it drawn at random so that peers coming back are not all retried at once. The webhooks'
    deliveries and the mirrors' reads both wait by it."""
    ceiling = min(longest, shortest * 2 ** min(attempt - 1, 64))
    return max(shortest, _jitter.uniform(ceiling / 2, ceiling))


def take(name, holder, ttl):
    """Take or renew the lease `name` for `ttl` seconds; True when `holder` now holds it.

    Never waits for SQLite's write lock (a busy database makes it fail at once with OperationalError;
    ask again later), so a serving process is never held up by it.
    """
    now = utcnow()
    values = {"holder": holder, "expires_at": now + timedelta(seconds=ttl)}
    try:
        with write_transaction(wait=False) as session:
            taken = session.execute(
                update(_LEASES)
                .where(_LEASES.c.name == name, or_(_LEASES.c.holder == holder, _LEASES.c.expires_at < now))
                .values(**values)
            ).rowcount
            if not taken and session.get(Lease, name) is None:
                session.execute(insert(_LEASES).values(name=name, **values))
                taken = 1
    except IntegrityError:
        return False  # another process inserted it first: it holds it
    return bool(taken)


def release(name, holder):
    """Give the lease up at once, if `holder` holds it, so that another need not wait for it to expire.

    It waits for the write lock as any writer does: when a server stops, its workers give their leases
    up at the same moment, and one that did not wait found the lock taken by its sibling's release.
    """
    with write_transaction() as session:
        session.execute(delete(_LEASES).where(_LEASES.c.name == name, _LEASES.c.holder == holder))


class LeaseHolder:
    """Background work that one process at a time does: a thread that takes the lease `name` and renews it,
    and while it holds it, looks every `interval` seconds for the jobs due (`due()`, ids) and runs each in a
    thread of its own (`work(job_id)`, in an app context), one thread a job at a time. The webhooks'
    deliverer and the mirrors' follower are two; `what` names one in its log lines and threads.

    A job's thread checks `holding()` as it goes, and stops when the lease is lost or `stop()` is called.
    `run()` is the loop: `start()` runs it in a thread, the command line runs it in its own.
    """

    def __init__(self, app, name, what, ttl, interval):
        self.app, self.name, self.what = app, name, what
        self.ttl, self.interval = ttl, interval
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"[:128]
        self.stopping = threading.Event()
        self.holding_until = 0.0  # time.monotonic() when this holder's term ends
        self.jobs = {}  # job id -> the thread running it
        self.lock = threading.Lock()
        self.thread = None
        self.failing = None  # the cause of the database error last logged, until the database answers

    def wanted(self):
        """Whether to ask for the lease at all (while not holding it): True unless a subclass knows better."""
        return True

    def due(self):
        """The ids of the jobs to run now (those running already are left to run); a read of one statement
        (storage.database.one_statement), so that no transaction stays open between looks."""
        raise NotImplementedError

    def work(self, job_id):
        """Run the job `job_id` until it is done or holding() turns False."""
        raise NotImplementedError

    def holding(self):
        return not self.stopping.is_set() and time.monotonic() < self.holding_until

    def start(self):
        self.thread = threading.Thread(target=self.run, name=self.what.replace(" ", "-"), daemon=True)
        self.thread.start()
        return self

    def stop(self, timeout=5.0):
        """Stop, wait up to `timeout` seconds for the jobs' threads, and give the lease up."""
        self.stopping.set()
        deadline = time.monotonic() + timeout
        with self.lock:
            threads = [self.thread, *self.jobs.values()]
        for thread in threads:
            if thread is not None and thread is not threading.current_thread():
                thread.join(max(0.0, deadline - time.monotonic()))

    def run(self):
        renew_at = 0.0
        with self.app.app_context():
            try:
                while not self.stopping.is_set():
                    try:
                        renew_at = self.tick(renew_at)
                    except Exception:  # noqa: BLE001 - the holder outlives any one failure; it looks again
                        log.exception("%s: a look failed; trying again", self.what)
                        db.session.remove()
                    self.stopping.wait(self.interval)
            finally:
                self.holding_until = 0.0
                self._release()

    def tick(self, renew_at):
        """Renew the lease when due, then start a thread for each job due; returns when to renew next."""
        now = time.monotonic()
        try:
            if not self.holding() and not self.wanted():
                return 0.0  # nothing to do: no lease asked for, no write
            if now >= renew_at:
                held = take(self.name, self.holder, self.ttl)
                if held and not self.holding():
                    log.info("%s holds the lease", self.what, extra={"holder": self.holder})
                # Its term is counted from before it asked, and ends a little before the lease expires.
                self.holding_until = now + self.ttl * 0.9 if held else 0.0
                renew_at = now + self.ttl / 3
            if self.holding():
                self.dispatch()
        except DBAPIError as error:
            db.session.remove()  # a fresh session for the next look, whatever state this one is in
            why = cause(error)
            # The lease is asked for without waiting for SQLite's write lock: another writer holding it is
            # no fault. Anything else is logged once, not at every look, until the database answers again.
            quiet = why.startswith("locked") or why == self.failing
            log.log(logging.DEBUG if quiet else logging.WARNING, "%s: database %s; trying again", self.what, why)
            self.failing = self.failing if why.startswith("locked") else why
            return min(renew_at, now + self.interval)
        self.failing = None
        return renew_at

    def dispatch(self):
        due = self.due()
        with self.lock:
            for job_id in due:
                if job_id not in self.jobs:
                    thread = threading.Thread(target=self._job, args=(job_id,), name=self.name, daemon=True)
                    self.jobs[job_id] = thread
                    thread.start()

    def _job(self, job_id):
        try:
            with self.app.app_context():
                self.work(job_id)
        except DBAPIError as error:
            log.warning("%s, %s: database %s; it resumes at the next look", self.what, job_id, cause(error))
        except Exception:  # noqa: BLE001 - a job must not die silently; the next look starts it again
            log.exception("%s, %s: failed; it resumes at the next look", self.what, job_id)
        finally:
            with self.lock:
                self.jobs.pop(job_id, None)

    def _release(self):
        try:
            release(self.name, self.holder)
        except DBAPIError as error:
            log.warning("%s: lease not released (database %s); it expires by itself", self.what, cause(error))
