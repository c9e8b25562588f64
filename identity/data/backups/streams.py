"""A backup's bytes on their way to the store, kept off a gevent worker's loop: the work that is C code over a
file (SQLite's copy, Zstandard, age, SHA-256) runs on a thread, and the bytes reach the upload through a pipe,
a part at a time, so that nothing but the database's copy is ever written to the temporary folder.
"""

import hashlib
import os
from concurrent.futures import ThreadPoolExecutor

import gevent
from gevent import monkey

BLOCK = 1024 * 1024


def off_the_loop(function, *args):
    """function(*args), where it cannot hold up the process's requests. In a gevent worker (the default server) it
    runs on a thread of gevent's threadpool: SQLite's backup, Zstandard, age and SHA-256 are C code that releases
    the GIL over a file, so the worker's greenlets go on answering meanwhile. Elsewhere it runs here."""
    if monkey.is_module_patched("threading"):
        return gevent.get_hub().threadpool.apply(function, args)
    return function(*args)


def in_background(function, *args):
    """Start function(*args) on a thread (gevent's threadpool in a gevent worker); returns a callable that waits
    for it and returns its result or raises its exception."""
    if monkey.is_module_patched("threading"):
        return gevent.get_hub().threadpool.spawn(function, *args).get
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="identity-backup")
    future = executor.submit(function, *args)
    executor.shutdown(wait=False)
    return future.result


class Tally:
    """A writable that counts and hashes (SHA-256) the bytes it passes on to `sink`."""

    def __init__(self, sink):
        self.sink, self.size, self.sha = sink, 0, hashlib.sha256()

    def write(self, data):
        self.sha.update(data)
        self.size += len(data)
        self.sink.write(data)
        return len(data)

    def flush(self):
        self.sink.flush()


class Tolerant:
    """A writable over a process's standard input that, once the process stops reading (pg_restore --list, having
    read the table of contents), drops what follows: the download is still read to its end, so that its SHA-256 is
    checked, and a damaged backup is named as such rather than by the process's complaint about it."""

    def __init__(self, sink):
        self.sink, self.closed = sink, False

    def write(self, data):
        if not self.closed:
            try:
                self.sink.write(data)
            except BrokenPipeError:
                self.closed = True
        return len(data)

    def flush(self):
        if not self.closed:
            try:
                self.sink.flush()
            except BrokenPipeError:
                self.closed = True


class Piped:
    """`pour(sink)` run on a thread, writing into a pipe; this object is the pipe's other end, a readable file that
    boto3 reads a part at a time (it cannot seek, so boto3 holds only the parts it is sending). At the end of the
    bytes, `finish()` runs before the end is reported: an exception from the thread or from `finish` reaches the
    reader then, so a stream that broke off never completes an upload."""

    def __init__(self, pour, finish=None):
        read, write = os.pipe()
        self.file = os.fdopen(read, "rb", buffering=BLOCK)
        self.finish, self.ended = finish, False
        self.wait = in_background(_pour_into, pour, write)

    def readable(self):
        return True

    def seekable(self):
        return False

    def read(self, size=-1):
        data = off_the_loop(self.file.read, size)
        if not self.ended and (size is None or size < 0 or len(data) < size):
            self.ended = True
            self.wait()
            if self.finish is not None:
                self.finish()
        return data

    def close(self):
        """Close the reading end, and wait for the thread: one still writing meets a closed pipe and stops."""
        self.file.close()
        try:
            self.wait()
        except Exception:  # noqa: BLE001 - the reader's own failure (the upload's) is the one reported
            pass


def _pour_into(pour, fd):
    with os.fdopen(fd, "wb", buffering=BLOCK) as sink:
        pour(sink)
