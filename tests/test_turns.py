"""A gevent worker's requests take the CPU one at a time, in the order they were read (identity/turns.py).

Each greenlet here stands for a connection's greenlet in gunicorn's gevent worker, which calls
Turns.take() from gunicorn.conf.py's pre_request once it has read a request; a real gevent loop
runs them.
"""

import gevent
import pytest
from gevent.event import Event

from identity.turns import Turns


@pytest.fixture
def turns():
    return Turns()


def test_a_connection_with_its_next_request_ready_goes_behind_those_waiting(turns):
    served = []

    def connection(name, requests):
        for _ in range(requests):
            turns.take()
            served.append(name)  # answered without yielding, as a GET on SQLite is

    busy = gevent.spawn(connection, "busy", 3)
    others = [gevent.spawn(connection, name, 1) for name in ("a", "b")]
    gevent.joinall([busy, *others], timeout=5, raise_error=True)

    assert served == ["busy", "a", "b", "busy", "busy"]
    assert not turns.waiting


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
