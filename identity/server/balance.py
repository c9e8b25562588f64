"""Keep-alive clients spread evenly over a server's gevent workers.

The workers share one listening socket, and whichever accepts a connection keeps it for as long as
the client keeps it alive. Clients that connect at once are split among the workers at random: 8
busy clients on 2 workers landed 4+4, 3+5, 2+6, even 0+8, and each client of the busier worker waits
for all the others there (GET p99 10 ms at 4+4, 14 at 2+6, 21 at 0+8). gunicorn has no setting that
moves a connection, and a hard cap per worker (worker_connections) would make a client wait for a slot.

So each worker counts its busy clients (the connections that sent a request in the last WINDOW
seconds, and more than one since they were first seen) and publishes the count in a file the
server's workers share (made by gunicorn.conf.py before they fork, a slot per worker). A worker
with at least two busy clients more than the least busy worker asks one of them to reconnect: its
answer says `Connection: close` (gunicorn's own Request.force_close, which gthread uses for the
same end), an ordinary end of a keep-alive connection that every HTTP client handles. The client's
next connection goes to whichever worker accepts it, and the worker sheds again, at most once every
SHED_PAUSE, until the counts differ by one at most. Balanced workers never close a connection.
"""

import fcntl
import mmap
import os
import struct
import time

# pid, busy clients, when counted (time.monotonic(), the same clock in every process of a machine)
SLOT = struct.Struct("=qqd")
SLOTS = 256
WINDOW = 1.0  # seconds: a connection without a request for this long is not a busy client
RECOUNT = 0.05  # seconds between two looks of a worker at the others' counts
SHED_PAUSE = 0.15  # seconds between two connections a worker asks to reconnect
FILE_VARIABLE = "IDENTITY_WORKER_LOADS_FILE"


def create_loads_file(path):
    """The shared file of SLOTS empty slots (in gunicorn's master, before the workers fork)."""
    with open(path, "wb") as file:
        file.write(bytes(SLOT.size * SLOTS))


class WorkerLoads:
    """One worker's view of the busy clients of every worker of its server."""

    def __init__(self, path, pid=None):
        self.pid = pid or os.getpid()
        self.file = open(path, "r+b")  # noqa: SIM115 - open for the worker's life
        self.map = mmap.mmap(self.file.fileno(), SLOT.size * SLOTS)
        self.slot = self._claim()
        self.seen = {}  # connection -> [time.monotonic() of its last request, its requests since]
        self.decide_at = 0.0
        self.shed_at = 0.0
        self.busy = 0

    def _claim(self):
        """A slot of its own: a free one, or one whose worker has died."""
        fcntl.flock(self.file, fcntl.LOCK_EX)
        try:
            for slot in range(SLOTS):
                pid, _, _ = SLOT.unpack_from(self.map, slot * SLOT.size)
                if pid == 0 or pid == self.pid or not _alive(pid):
                    SLOT.pack_into(self.map, slot * SLOT.size, self.pid, 0, time.monotonic())
                    return slot
        finally:
            fcntl.flock(self.file, fcntl.LOCK_UN)
        raise RuntimeError(f"more than {SLOTS} workers share {self.file.name}")

    def should_reconnect(self, connection):
        """Count a request of `connection` (any key that names it while it lives, its client's address for
        one); True when its answer should ask the client to reconnect, to a less busy worker."""
        now = time.monotonic()
        seen = self.seen.get(connection)
        if seen is None:
            self.seen[connection] = [now, 1]
        else:
            seen[0] = now
            seen[1] += 1
            if seen[1] == 2:  # a client that keeps its connection: the others see it at once
                self._count(now)
        if now < self.decide_at:
            return False
        self.decide_at = now + RECOUNT
        self.seen = {key: seen for key, seen in self.seen.items() if seen[0] >= now - WINDOW}
        self._count(now)
        if now < self.shed_at or self.seen[connection][1] < 2 or self.busy - self.least_busy_other(now) < 2:
            return False  # (a connection on its first request is no kept-alive client to move)
        self.shed_at = now + SHED_PAUSE
        del self.seen[connection]
        self._count(now)
        return True

    def _count(self, now):
        # Busy: a connection with a second request in the window. One that carried a single request (a
        # client that does not keep its connections, a health check) has most likely gone, and its next
        # connection is the accepting worker's to take.
        self.busy = sum(1 for _, requests in self.seen.values() if requests > 1)
        self._publish(now)

    def _publish(self, now):
        SLOT.pack_into(self.map, self.slot * SLOT.size, self.pid, self.busy, now)

    def least_busy_other(self, now):
        """The fewest busy clients of any other live worker (one whose count is older than WINDOW has had no
        request since: none); this worker's own count when it is alone."""
        least = self.busy
        for slot in range(SLOTS):
            pid, busy, counted = SLOT.unpack_from(self.map, slot * SLOT.size)
            if pid == 0 or slot == self.slot:
                continue
            if counted >= now - WINDOW:
                least = min(least, busy)
            elif _alive(pid):  # idle, not dead (a worker killed outright leaves its slot behind)
                least = 0
        return least

    def close(self):
        """Give the slot up (the worker exits)."""
        SLOT.pack_into(self.map, self.slot * SLOT.size, 0, 0, 0.0)
        self.map.close()
        self.file.close()


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
