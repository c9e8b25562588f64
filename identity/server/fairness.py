"""How the requests of one gevent worker take the CPU: one at a time, in the order they were read.

A greenlet yields only when it would block, and gevent resumes the greenlets that became ready in one
turn of its loop in an order of its own, not the order their requests came in: a connection whose next
request is already there can be served again and again while the others wait. Turns.take(), called once
a request has been read (the server's pre_request hook), queues the request behind those read before
it; at the head of the queue it waits one turn of gevent's loop, so that a connection whose next request
was already there goes behind the requests that came meanwhile. Each request then waits for those ahead
of it only. A request that waits for something (a stream for the next change, a writer for SQLite's
lock) lets the next one go; nothing is held across a wait.

It earns its place: what the tail is without it, straight at gunicorn and behind deploy/nginx.conf, is
measured in docs/performance.md, "The default server's tail". nginx does not shield the workers: it opens
as many upstream connections as there are requests in flight.

For a read, the turn of the loop is needed only by a connection that has not let the loop poll since its
last turn: its next request was there already when it had answered one. Under load, most connections
wait for their next request, and the loop polls meanwhile (a check watcher counts its polls). A request
that may write takes the turn every time: the writers of a process queue on a lock
(storage.database.wait_for_writes_in_turn), and gevent's lock goes to whoever asks first after a release,
before the writer it wakes has run; the turn lets the woken writer run first.
"""

import weakref
from collections import deque

import gevent
from gevent.event import Event

# Methods that do not write (RFC 9110's safe methods): their requests may skip the turn.
READS = frozenset({"GET", "HEAD", "OPTIONS"})


class Turns:
    """The queue of one worker's requests that have been read and wait for the CPU."""

    def __init__(self):
        self.waiting = deque()  # one Event per request; the head's is set when its turn comes
        self.loop = gevent.get_hub().loop
        # The loop's polls so far: a check watcher runs after each (ref=False: it keeps no loop alive).
        self.polls = 0
        self.poll_counter = self.loop.check(ref=False)
        self.poll_counter.start(self._count_poll)
        # {a connection's greenlet: the polls counted when its last turn ended}: weakly, so that a closed
        # connection takes its entry along.
        self.turn_ended = weakref.WeakKeyDictionary()

    def _count_poll(self):
        self.polls += 1

    def take(self, method=None):
        """Wait until every request read before this one has had its turn, and the loop has read what
        arrived since; then return, the turn taken. `method` is the request's: without one, the request
        may write, and takes the turn of the loop every time."""
        turn = Event()
        self.waiting.append(turn)
        connection = gevent.getcurrent()
        try:
            if self.waiting[0] is not turn:
                turn.wait()
            if method not in READS or self.turn_ended.get(connection, self.polls) == self.polls:
                # A request that may write, or no poll since this connection's last turn (or this is its
                # first): one turn of the loop, its poll not blocking. At the highest priority the idle
                # watcher is not put off by the io that arrives meanwhile (new connections, other
                # requests), so this request goes next, and a worker does not go on accepting every new
                # client while it waits.
                gevent.idle(self.loop.MAXPRI)
        finally:  # also when killed while waiting (the worker stops): the queue goes on without it
            self.turn_ended[connection] = self.polls
            was_head = self.waiting[0] is turn
            self.waiting.remove(turn)
            if was_head and self.waiting:
                self.waiting[0].set()
