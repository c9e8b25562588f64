"""Fixed-window rate-limit counts that every worker process of one server shares, in a mapped file.

The server makes the file in the master, before any worker forks (identity.server.prepare), and hands
its path to each worker's app (budgets.share_counts); each worker maps it (mmap, MAP_SHARED), so a count
one worker adds is the count every other worker reads. No server, no thread, nothing to install: the
standard library's mmap, struct, fcntl and hashlib.

The file is a fixed table of slots, each (16-byte blake2b digest of the counter's name, expiry as
Unix time, count). A name's slots are a short run (PROBE of them) that starts where its digest
points; a count lives in the run's slot holding its digest, else in the run's first free slot (never
used, or its window over). When every slot of a run holds a live window, the one that expires first
is taken, and that window's count starts over: a bound on memory that a small team never meets (16,384
slots hold thousands of keys' budgets in one window; beyond that, use redis://).

Each read-modify-write holds a lock that excludes the other processes (a POSIX lock on the bytes of
the name's run, so that counts of names whose runs do not overlap never wait for each other) and
this process's other threads (a POSIX lock is the process's, so a threading.Lock too): held for the
microseconds of one struct unpack and pack.
"""

import fcntl
import hashlib
import mmap
import os
import struct
import threading
import time

from limits.storage import Storage

SLOT = struct.Struct("<16sdq")  # name's digest, expiry (Unix time), count: 32 bytes
SLOTS = 16_384  # 512 KiB
PROBE = 8  # slots a name may use: 256 bytes, read and written under the lock in one go
RUN = struct.Struct("<" + "16sdq" * PROBE)
EMPTY = SLOT.pack(bytes(16), 0.0, 0)
FRESH = 0.001  # seconds: how long get and get_expiry may answer from the window incr or get just saw
UNSEEN = object()


def create_counts_file(path, slots=SLOTS):
    """Make `path`, which must not exist, a table of `slots` empty slots (readable by its owner only)."""
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.ftruncate(descriptor, slots * SLOT.size)  # zeros: every slot empty
    finally:
        os.close(descriptor)


class SharedWindowCounts(Storage):
    """limits' documented custom storage interface over the table in the file at `path`."""

    STORAGE_SCHEME = []  # built directly (identity.web.budgets), never from a URI

    def __init__(self, path, wrap_exceptions=False, **options):
        super().__init__(None, wrap_exceptions=wrap_exceptions, **options)
        self.path = path
        self.descriptor = os.open(path, os.O_RDWR)
        size = os.fstat(self.descriptor).st_size
        if size % SLOT.size or size < PROBE * SLOT.size:
            os.close(self.descriptor)
            raise ValueError(f"{path} is not a table of rate-limit counts ({size} bytes)")
        self.table = mmap.mmap(self.descriptor, size, flags=mmap.MAP_SHARED)
        # A run never wraps around the table's end: it starts at most PROBE slots before it.
        self.starts = size // SLOT.size - PROBE + 1
        self.thread_lock = threading.Lock()
        self.digests = {}  # name -> (digest, byte offset of its run): the names are few and repeat
        # limits counts a request as incr(name), then reads its window as get(name), get_expiry(name):
        # the window incr has just written answers get, and the window get read (under one lock, a
        # moment before) answers get_expiry. Each thread's (greenlet's) own, within FRESH seconds, and
        # until get_expiry has used it: a lock of the run, two system calls, saved by each answer.
        self.last_read = threading.local()

    @property
    def base_exceptions(self):
        return (OSError, ValueError, struct.error)

    def locate(self, key):
        found = self.digests.get(key)
        if found is None:
            if len(self.digests) >= SLOTS:
                self.digests.clear()
            digest = hashlib.blake2b(key.encode(), digest_size=16).digest()
            found = self.digests[key] = (digest, int.from_bytes(digest[:8], "little") % self.starts * SLOT.size)
        return found

    def lock(self, offset=0, length=0):
        """Hold the bytes from `offset`, `length` of them (0: to the end of the file and beyond)."""
        self.thread_lock.acquire()
        try:
            fcntl.lockf(self.descriptor, fcntl.LOCK_EX, length, offset)
        except BaseException:
            self.thread_lock.release()
            raise

    def unlock(self, offset=0, length=0):
        try:
            fcntl.lockf(self.descriptor, fcntl.LOCK_UN, length, offset)
        finally:
            self.thread_lock.release()

    def incr(self, key, expiry, amount=1):
        self.last_read.window = None
        digest, offset = self.locate(key)
        now = time.time()
        self.lock(offset, RUN.size)
        try:
            index, window = _counted(RUN.unpack_from(self.table, offset), digest, now, expiry, amount)
            SLOT.pack_into(self.table, offset + index * SLOT.size, digest, *window)
        finally:
            self.unlock(offset, RUN.size)
        self.last_read.window = (key, window, time.monotonic())
        return window[1]

    def recent(self, key):
        """(expiry, count) of `key`'s window as this thread saw it within FRESH seconds, or UNSEEN."""
        last = getattr(self.last_read, "window", None)
        if last is not None and last[0] == key and time.monotonic() - last[2] < FRESH:
            return last[1]
        return UNSEEN

    def find(self, key):
        """(expiry, count) of `key`'s window, live or over, or None."""
        digest, offset = self.locate(key)
        self.lock(offset, RUN.size)
        try:
            run = RUN.unpack_from(self.table, offset)
        finally:
            self.unlock(offset, RUN.size)
        for index in range(PROBE):
            if run[3 * index] == digest:
                return run[3 * index + 1], run[3 * index + 2]
        return None

    def get(self, key):
        found = self.recent(key)
        if found is UNSEEN:
            found = self.find(key)
            self.last_read.window = (key, found, time.monotonic())
        return found[1] if found is not None and found[0] > time.time() else 0

    def get_expiry(self, key):
        found = self.recent(key)
        self.last_read.window = None
        if found is UNSEEN:
            found = self.find(key)
        return found[0] if found is not None else time.time()

    def check(self):
        return not self.table.closed

    def reset(self):
        self.last_read.window = None
        now = time.time()
        self.lock()
        try:
            cleared = sum(
                1 for offset in range(0, len(self.table), SLOT.size) if SLOT.unpack_from(self.table, offset)[1] > now
            )
            self.table[:] = bytes(len(self.table))
        finally:
            self.unlock()
        return cleared

    def clear(self, key):
        self.last_read.window = None
        digest, offset = self.locate(key)
        self.lock(offset, RUN.size)
        try:
            for index in range(PROBE):
                if self.table[offset + index * SLOT.size: offset + index * SLOT.size + 16] == digest:
                    self.table[offset + index * SLOT.size: offset + (index + 1) * SLOT.size] = EMPTY
        finally:
            self.unlock(offset, RUN.size)

    def close(self):
        self.table.close()
        os.close(self.descriptor)


def _counted(run, digest, now, expiry, amount):
    """Where in `run` (a name's slots, unpacked) the count of `digest` goes once `amount` is added, and
    its window then: (index, (expiry, count))."""
    chosen = None
    for index in range(PROBE):
        slot_digest, slot_expiry, count = run[3 * index: 3 * index + 3]
        if slot_digest == digest:
            if slot_expiry > now:
                return index, (slot_expiry, count + amount)
            chosen = index  # its window is over: it starts again here
            break
        if chosen is None or (run[3 * chosen + 1] > now and slot_expiry < run[3 * chosen + 1]):
            chosen = index  # the first free slot, else the live one that expires first
    return chosen, (now + expiry, amount)
