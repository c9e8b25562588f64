"""Real gunicorn nodes under concurrent clients, kill -9, and a database that goes away.

On SQLite one node with four workers shares the database file; on PostgreSQL two nodes on different
ports share the server, and the load is split between them.
"""

import sqlite3
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
from sqlalchemy.engine import make_url

from tests.common import postgres
from tests.common.apps import without_last_login
from tests.common.live import LiveServer, start_all

CLIENTS = 16
DISTINCT = 1200  # plus one repeat for every four: 1500 creates, a fifth of which repeat earlier content
WALLETS_EVERY = 8  # consecutive contents name the same unseen creator wallet, so its user is created in a race


@pytest.fixture
def topology(backend):
    """(nodes, workers per node): one machine's file on SQLite; stateless nodes sharing PostgreSQL."""
    return (1, 4) if backend == "sqlite" else (2, 2)


def start_nodes(database_url, topology):
    count, workers = topology
    return start_all([LiveServer(database_url, workers) for _ in range(count)])


@pytest.fixture
def nodes(database_url, admin_key, topology):
    servers = start_nodes(database_url, topology)
    yield servers
    for server in servers:
        server.stop()


def wallet(n):
    return "0x" + format(n + 1, "040x")


def body(i):
    return {"display_name": f"load {i}", "creator": wallet(i // WALLETS_EVERY)}


def the_load():
    """1500 create bodies; each repeat follows its original closely, so the two are often in flight together."""
    bodies = []
    for i in range(DISTINCT):
        bodies.append(body(i))
        if i % 4 == 3:
            bodies.append(body(i - 1))
    return bodies


class Clients:
    """CLIENTS threads, each with its own HTTP session; request k goes to node k modulo the node count."""

    def __init__(self, nodes, key):
        self.nodes = nodes
        self.headers = {"x-api-key": key}
        self._local = threading.local()

    def session(self):
        if not hasattr(self._local, "session"):
            self._local.session = requests.Session()
        return self._local.session

    def post(self, k, body):
        """(status, JSON body); status None when the connection failed or was dropped."""
        try:
            response = self.session().post(self.nodes[k % len(self.nodes)].url + "/identity", json=body,
                                           headers=self.headers, timeout=60)
        except requests.RequestException as error:
            return None, repr(error)
        return answer(response)

    def get(self, node, identity_id):
        try:
            response = self.session().get(f"{node.url}/identity/{identity_id}", headers=self.headers, timeout=60)
        except requests.RequestException as error:
            return None, repr(error)
        return answer(response)

    def run(self, function, jobs):
        with ThreadPoolExecutor(max_workers=CLIENTS) as pool:
            return list(pool.map(lambda job: function(*job), jobs))


def answer(response):
    """(status, JSON body), or the text of a body that is not JSON (a proxy's or gunicorn's own error page)."""
    is_json = response.headers.get("Content-Type", "").split(";")[0].endswith("json")
    return response.status_code, response.json() if is_json else response.text


def read_back(clients, nodes, acknowledged):
    """GET each acknowledged identity from every node; returns what did not come back as created."""
    jobs = [(node, identity["identity_id"]) for node in nodes for identity in acknowledged]
    results = clients.run(clients.get, jobs)
    expected = [identity for _ in nodes for identity in acknowledged]
    return [
        (job[0].url, job[1], status, got)
        for job, (status, got), created in zip(jobs, results, expected, strict=True)
        if status != 200 or without_last_login(got) != without_last_login(created)
    ]


def test_concurrent_creates_are_acknowledged_once_per_content_and_read_back_everywhere(
    nodes, admin_key, backend, topology, report
):
    clients = Clients(nodes, admin_key)
    bodies = the_load()
    started = time.monotonic()
    results = clients.run(clients.post, enumerate(bodies))
    seconds = time.monotonic() - started

    statuses = Counter(status for status, _ in results)
    failures = [(body["display_name"], status, got) for body, (status, got) in zip(bodies, results, strict=True) if status not in (201, 409)]
    assert failures == [], f"{len(failures)} of {len(bodies)} creates failed, e.g. {failures[:3]}"

    created = {}
    for body_sent, (status, got) in zip(bodies, results, strict=True):
        if status == 201:
            assert body_sent["display_name"] not in created, "two 201s for one content"
            created[body_sent["display_name"]] = got
    assert len(created) == DISTINCT == statuses[201]
    for body_sent, (status, got) in zip(bodies, results, strict=True):
        if status == 409:
            assert got["identity_id"] == created[body_sent["display_name"]]["identity_id"]

    started_reading = time.monotonic()
    assert read_back(clients, nodes, list(created.values())) == []
    reading = time.monotonic() - started_reading

    count, workers = topology
    report(
        f"{backend}: {count} node(s) x {workers} workers, {CLIENTS} clients: {len(bodies)} creates in {seconds:.1f} s "
        f"({len(bodies) / seconds:.0f}/s): {statuses[201]} x 201, {statuses[409]} x 409, nothing else; "
        f"{len(created) * count} reads back in {reading:.1f} s ({len(created) * count / reading:.0f}/s)"
    )


def test_acknowledged_creates_survive_kill_9_of_every_node(database_url, admin_key, backend, topology, report):
    servers = start_nodes(database_url, topology)
    clients = Clients(servers, admin_key)
    acknowledged = []
    crashed = threading.Event()

    def keep_creating(client):
        n = 0
        while not crashed.is_set():
            n += 1
            status, got = clients.post(client, {"display_name": f"crash {client}-{n}"})
            if status == 201:
                acknowledged.append(got)
            else:
                # Before the crash every create is new content; after it, a dropped connection is expected.
                assert status is None and crashed.is_set(), (status, got)

    with ThreadPoolExecutor(max_workers=CLIENTS // 2) as pool:
        futures = [pool.submit(keep_creating, client) for client in range(CLIENTS // 2)]
        deadline = time.monotonic() + 60
        while len(acknowledged) < 200 and time.monotonic() < deadline and not any(f.done() for f in futures):
            time.sleep(0.02)
        crashed.set()
        for server in servers:  # while creates are in flight
            server.kill()
        for future in futures:
            future.result()
    for server in servers:
        server.stop()
    assert len(acknowledged) >= 200

    restarted = start_nodes(database_url, topology)
    try:
        clients = Clients(restarted, admin_key)
        assert read_back(clients, restarted, acknowledged) == []
        assert clients.post(0, {"display_name": "after the crash"})[0] == 201
    finally:
        for server in restarted:
            server.stop()
    if backend == "sqlite":
        with sqlite3.connect(make_url(database_url).database) as connection:
            assert connection.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    report(f"{backend}: kill -9 of every node after {len(acknowledged)} acknowledged creates: all read back")


@pytest.mark.postgresql_only
@pytest.mark.serial
@pytest.mark.skipif(not postgres.CTL, reason="set IDENTITY_TEST_POSTGRES_CTL to the test server's pg_ctl -D ... command")
def test_a_database_outage_is_a_prompt_503_and_the_service_recovers_by_itself(nodes, admin_key):
    clients = Clients(nodes, admin_key)
    status, identity = clients.post(0, {"display_name": "before the outage"})
    assert status == 201
    paths = ["/readyz", f"/identity/{identity['identity_id']}"]

    def every_worker_answers(expected):
        for node in nodes:
            for _ in range(8):  # enough to reach every worker
                for path in paths:
                    started = time.monotonic()
                    response = requests.get(node.url + path, headers=clients.headers, timeout=30)
                    assert time.monotonic() - started < 3, f"{path} took {time.monotonic() - started:.1f} s"
                    assert response.status_code == expected, (path, response.status_code, response.text)
                    if expected == 503:
                        assert response.headers["Content-Type"] == "application/problem+json"
                        assert response.headers["Retry-After"]

    # A restart between requests goes unnoticed: pooled connections to the old server are replaced before use.
    every_worker_answers(200)
    postgres.pg_ctl("restart", "-m", "fast", "-w")
    every_worker_answers(200)

    postgres.pg_ctl("stop", "-m", "fast", "-w")
    try:
        every_worker_answers(503)
        for index in range(len(nodes)):
            status, problem = clients.post(index, {"display_name": "during the outage"})
            assert (status, problem["status"]) == (503, 503)
    finally:
        postgres.pg_ctl("start", "-w")

    # The same processes, not restarted, answer again on their own.
    every_worker_answers(200)
    assert clients.post(1, {"display_name": "after the outage"})[0] == 201
