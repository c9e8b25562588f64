"""How the requests of one gevent worker take the CPU: one at a time, in the order they were read.

A greenlet yields only when it would block, and gevent resumes the greenlets that became ready in
one turn of its loop in an order of its own, not the order their requests came in. A keep-alive
client whose request landed first can be served last of a batch, then wait for the whole next batch:
with 4 busy clients on a worker, some requests waited for 6 or 7 others where each should wait for 3
(p99 2.1 to 2.7 times the p50, one worker alone). Worse, without any turn, a connection whose next
request is already there is served again and again while the others wait (p99 170 to 290 ms).

Turns.take(), called once a request has been read (gunicorn.conf.py's pre_request), queues the
request behind those read before it. At the head of the queue, it waits one turn of gevent's loop,
so that a connection whose next request is already there goes behind the requests that came
meanwhile; then it goes, and the next in the queue gets ready. Each request then waits for those
ahead of it only: with 4 busy clients on one worker, p99 1.5 to 1.7 times the p50. A request that
waits for something (a stream for the next change, a writer for SQLite's lock) lets the next one
go; nothing is held across a wait.
"""

from collections import deque

import gevent
from gevent.event import Event


class Turns:
    """The queue of one worker's requests that have been read and wait for the CPU."""

    def __init__(self):
        self.waiting = deque()  # one Event per request; the head's is set when its turn comes

    def take(self):
        """Wait until every request read before this one has had its turn, and the loop has read what
        arrived since; then return, the turn taken."""
        turn = Event()
        self.waiting.append(turn)
        try:
            if self.waiting[0] is not turn:
                turn.wait()
            # One turn of the loop, its poll not blocking: at the highest priority the idle watcher is
            # not put off by the io that arrives meanwhile (new connections, other requests), so this
            # request goes next, and a worker does not go on accepting every new client while it waits.
            gevent.idle(gevent.get_hub().loop.MAXPRI)
        finally:  # also when killed while waiting (the worker stops): the queue goes on without it
            was_head = self.waiting[0] is turn
            self.waiting.remove(turn)
            if was_head and self.waiting:
                self.waiting[0].set()
