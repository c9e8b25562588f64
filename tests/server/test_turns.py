"""A gevent worker's requests take the CPU one at a time, in the order they were read (identity/server/fairness.py).

Each greenlet here stands for a connection's greenlet in gunicorn's gevent worker, which calls
Turns.take() from gunicorn.conf.py's pre_request once it has read a request; a real gevent loop
runs them.
"""

import gevent
import pytest
from gevent.event import Event

from identity.server.fairness import Turns


@pytest.fixture
def turns():
    return Turns()


@pytest.mark.parametrize("method", ["GET", "POST"])
def test_a_connection_with_its_next_request_ready_goes_behind_those_waiting(turns, method):
    served = []

    def connection(name, requests):
        for _ in range(requests):
            turns.take(method)
            served.append(name)  # answered without yielding, as a GET on SQLite is

    busy = gevent.spawn(connection, "busy", 3)
    others = [gevent.spawn(connection, name, 1) for name in ("a", "b")]
    gevent.joinall([busy, *others], timeout=5, raise_error=True)

    assert served == ["busy", "a", "b", "busy", "busy"]
    assert not turns.waiting


def _second_request_after_a_poll(turns, method):
    """A connection's two requests, the loop polling while it waits for the second; what was served, in order."""
    served = []

    def connection():
        turns.take(method)  # its first request: one turn of the loop
        served.append("first")
        gevent.sleep(0.01)  # waits for its next request, and the loop polls
        other = gevent.spawn(served.append, "ready meanwhile")  # runs at the loop's next turn
        turns.take(method)
        served.append("second")
        other.join()

    gevent.spawn(connection).join(timeout=5)
    return served


@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_a_read_that_came_while_its_connection_waited_goes_without_another_turn_of_the_loop(turns, method):
    """Its connection let the loop poll since its last turn: nothing that arrived before it is left unread."""
    assert _second_request_after_a_poll(turns, method) == ["first", "second", "ready meanwhile"]


@pytest.mark.parametrize("method", ["POST", "PATCH", "DELETE"])
def test_a_request_that_may_write_takes_its_turn_of_the_loop_even_so(turns, method):
    """A writer woken by the release of the writers' lock runs before a request that may ask for it."""
    assert _second_request_after_a_poll(turns, method) == ["first", "ready meanwhile", "second"]


def test_a_woken_writer_gets_the_writers_lock_before_a_write_that_came_after_it(turns):
    """gevent's lock goes to whoever asks first after a release; the turn lets the writer it woke ask first."""
    from gevent.lock import RLock

    writers, order = RLock(), []

    def write(name):
        turns.take("POST")
        with writers:
            order.append(name)
            gevent.sleep(0.001)  # a write that waits (for SQLite's lock): the loop polls, others queue

    def connection():
        write("first")
        write("second")  # its next request was there already

    gevent.joinall([gevent.spawn(connection), gevent.spawn(write, "queued")], timeout=5, raise_error=True)

    assert order == ["first", "queued", "second"]


def test_a_request_that_waits_lets_the_next_one_go(turns):
    change = Event()
    served = []

    def stream():  # an event stream: it takes its turn, then waits for the next change
        turns.take()
        served.append("stream starts")
        change.wait()
        served.append("stream sends")

    def get():
        turns.take()
        served.append("get")
        change.set()

    greenlets = [gevent.spawn(stream), gevent.spawn(get)]
    gevent.joinall(greenlets, timeout=5, raise_error=True)

    assert served == ["stream starts", "get", "stream sends"]


@pytest.mark.parametrize("killed", ["first", "second"])
def test_a_request_killed_while_waiting_leaves_the_queue_to_the_others(turns, killed):
    served = []

    def connection(name):
        turns.take()
        served.append(name)

    greenlets = {name: gevent.spawn(connection, name) for name in ("first", "second", "third")}
    gevent.sleep(0)  # each has read its request and waits: the first for the loop, the others behind it
    assert len(turns.waiting) == 3

    greenlets[killed].kill()
    gevent.joinall(greenlets.values(), timeout=5)

    assert served == [name for name in ("first", "second", "third") if name != killed]
    assert all(greenlet.dead for greenlet in greenlets.values())
    assert not turns.waiting
