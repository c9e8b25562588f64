"""Curation and the change feed on real gunicorn, under concurrent clients.

On SQLite one node with several workers shares the file; on PostgreSQL two nodes share the server.
"""

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from tests.common.live import LiveServer, start_all

WRITERS = 6
CREATES_PER_WRITER = 25
# Pollers with a small and a larger limit: the larger keeps up with the writers, at the head of the
# feed, where an entry committed before an earlier one would be seen first and the earlier one skipped.
POLL_LIMITS = (5, 50)
ROUNDS = 12
# Out-of-order commits are a race: the scenario runs a few times to give it every chance to show.
FEED_ROUNDS = 3


@pytest.fixture
def nodes(database_url, admin_key, backend):
    count, workers = (1, 4) if backend == "sqlite" else (2, 2)
    servers = start_all([LiveServer(database_url, workers) for _ in range(count)])
    yield servers
    for server in servers:
        server.stop()


def test_two_conditional_patches_from_one_etag_exactly_one_succeeds(nodes, admin_key, report):
    headers = {"x-api-key": admin_key}
    first, last = nodes[0].url, nodes[-1].url
    created = requests.post(f"{first}/identity", json={"display_name": "Raced"}, headers=headers, timeout=30)
    assert created.status_code == 201
    path = f"/identity/{created.json()['identity_id']}"
    outcomes = []
    for round_number in range(ROUNDS):
        etag = requests.get(first + path, headers=headers, timeout=30).headers["ETag"]
        barrier = threading.Barrier(2)
        bodies = [{"num_positions": 2 * round_number + 1}, {"num_positions": 2 * round_number + 2}]

        def send(base, body, etag=etag, barrier=barrier):
            with requests.Session() as session:
                request = session.prepare_request(
                    requests.Request("PATCH", base + path, json=body, headers={**headers, "If-Match": etag})
                )
                barrier.wait()
                return session.send(request, timeout=30)

        with ThreadPoolExecutor(max_workers=2) as pool:
            responses = list(pool.map(send, [first, last], bodies))
        statuses = sorted(response.status_code for response in responses)
        outcomes.append(statuses)
        assert statuses == [200, 412], statuses
        winner = next(response for response in responses if response.status_code == 200)
        now = requests.get(last + path, headers=headers, timeout=30)
        # A read writes nothing: the identity as the winning PATCH left it, byte for byte, and its ETag.
        assert now.json() == winner.json()
        assert now.headers["ETag"] == winner.headers["ETag"]
    changes = requests.get(first + path + "/changes", headers=headers, timeout=30).json()["data"]
    assert [entry["kind"] for entry in changes] == ["created"] + ["changed"] * ROUNDS
    report(f"conditional PATCH race: {ROUNDS} rounds of 2 PATCHes from one ETag, each exactly one 200 and one 412")


def poll(nodes, headers, after, limit, done, seen):
    """Poll the feed from `after` until `done` is set and a poll finds nothing; returns (next after, polls)."""
    polls = 0
    with requests.Session() as session:
        while True:
            finished = done.is_set()  # asked before the poll: a poll after the last write sees it
            node = nodes[polls % len(nodes)]
            page = session.get(f"{node.url}/changes", params={"after": after, "limit": limit},
                               headers=headers, timeout=60).json()
            polls += 1
            seen.extend(page["data"])
            after = page["next_after"]
            if finished and not page["data"]:
                return after, polls


def test_pollers_see_every_entry_exactly_once_while_writers_create(nodes, admin_key, backend, report):
    headers = {"x-api-key": admin_key}
    seen = {limit: [] for limit in POLL_LIMITS}
    after = dict.fromkeys(POLL_LIMITS, 0)
    polls = dict.fromkeys(POLL_LIMITS, 0)
    started = time.monotonic()
    for feed_round in range(FEED_ROUNDS):
        done = threading.Event()
        failures = []

        def write(writer, feed_round=feed_round, failures=failures):
            with requests.Session() as session:
                for n in range(CREATES_PER_WRITER):
                    body = {"display_name": f"feed {feed_round}-{writer}-{n}"}
                    response = session.post(nodes[(writer + n) % len(nodes)].url + "/identity", json=body,
                                            headers=headers, timeout=60)
                    if response.status_code != 201:
                        failures.append((response.status_code, response.text))

        def write_all(done=done, write=write):
            try:
                with ThreadPoolExecutor(max_workers=WRITERS) as writers:
                    list(writers.map(write, range(WRITERS)))
            finally:
                done.set()

        with ThreadPoolExecutor(max_workers=1 + len(POLL_LIMITS)) as pool:
            writing = pool.submit(write_all)
            pollers = {
                limit: pool.submit(poll, nodes, headers, after[limit], limit, done, seen[limit])
                for limit in POLL_LIMITS
            }
            writing.result()
            for limit, poller in pollers.items():
                after[limit], count = poller.result()
                polls[limit] += count
        assert failures == []
    elapsed = time.monotonic() - started
    everything = requests.get(f"{nodes[0].url}/changes", params={"limit": 1000}, headers=headers, timeout=60).json()
    assert len(everything["data"]) == FEED_ROUNDS * WRITERS * CREATES_PER_WRITER
    for limit in POLL_LIMITS:
        assert [entry["seq"] for entry in seen[limit]] == [entry["seq"] for entry in everything["data"]], limit
        assert seen[limit] == everything["data"]
    report(
        f"feed under load ({backend}): {FEED_ROUNDS} rounds of {WRITERS} writers x {CREATES_PER_WRITER} creates "
        f"on {len(nodes)} node(s) in {elapsed:.1f} s; "
        + "; ".join(f"{polls[limit]} polls of limit {limit} saw all {len(seen[limit])} once" for limit in POLL_LIMITS)
    )
