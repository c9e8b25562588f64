"""Keep-alive clients spread evenly over the server's gevent workers (identity/balance.py)."""

import os
import signal
import subprocess
import sys
import threading
import time
from http.client import HTTPConnection

import pytest

from bench.run import clients_per_worker, worker_pids
from identity.server import balance
from identity.server.balance import RECOUNT, WorkerLoads, create_loads_file
from tests.live import LiveServer


@pytest.fixture
def loads_file(tmp_path):
    path = tmp_path / "loads"
    create_loads_file(path)
    return path


@pytest.fixture
def workers(loads_file):
    """Two workers' views of one file: this process and its parent stand for two live workers."""
    views = [WorkerLoads(loads_file, pid=os.getpid()), WorkerLoads(loads_file, pid=os.getppid())]
    yield views
    for view in views:
        view.close()


def requests(worker, clients, rounds=1):
    """What `worker` answers to a request of each of its `clients`, `rounds` times, a look at the others
    due before each round."""
    answers = []
    for _ in range(rounds):
        time.sleep(RECOUNT)
        answers += [worker.should_reconnect((id(worker), client)) for client in range(clients)]
    return answers


def test_a_worker_with_two_busy_clients_more_than_another_asks_one_to_reconnect(workers):
    busier, other = workers
    requests(other, 3, rounds=2)  # a client is busy from its second request on its connection
    requests(busier, 5, rounds=2)

    assert requests(busier, 5).count(True) == 1
    assert not any(requests(other, 3))
    assert (busier.busy, other.busy) == (4, 3)  # the one asked is no longer counted


@pytest.mark.parametrize(("first", "second"), [(4, 4), (4, 5), (1, 0)])
def test_workers_within_one_client_of_each_other_ask_nobody(workers, first, second):
    requests(workers[0], first, rounds=2)
    requests(workers[1], second, rounds=2)

    assert not any(requests(workers[0], first, rounds=3) + requests(workers[1], second, rounds=3))


def test_clients_that_send_one_request_per_connection_are_not_busy_clients(workers):
    busier, other = workers
    requests(other, 1, rounds=3)
    for _ in range(3):  # a health check every round, each on a connection of its own
        time.sleep(RECOUNT)
        answers = [busier.should_reconnect(("check", time.monotonic(), number)) for number in range(5)]
        assert not any(answers)
    assert (busier.busy, other.busy) == (0, 1)


def test_the_client_asked_to_reconnect_is_one_that_keeps_its_connection(workers):
    busier, other = workers
    requests(other, 1, rounds=2)
    requests(busier, 4, rounds=2)

    time.sleep(RECOUNT)
    assert not busier.should_reconnect(("new", 1))  # a first request: nothing kept to move
    time.sleep(RECOUNT)
    assert busier.should_reconnect((id(busier), 0))


def test_a_worker_alone_asks_nobody(loads_file):
    alone = WorkerLoads(loads_file)
    try:
        assert not any(requests(alone, 8, rounds=3))
    finally:
        alone.close()


def test_a_worker_that_has_had_no_request_for_a_while_counts_as_having_no_client(workers, monkeypatch):
    busier, idle = workers
    monkeypatch.setattr(balance, "WINDOW", 4 * RECOUNT)
    time.sleep(4 * RECOUNT)  # idle's count, taken when it started, is older than that

    assert requests(busier, 2, rounds=3).count(True) == 1


def test_the_slot_of_a_worker_that_died_is_nobody_s_and_goes_to_the_next_worker(loads_file, monkeypatch):
    alive = WorkerLoads(loads_file)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True).stdout.strip()
    left_behind = WorkerLoads(loads_file, pid=int(dead))  # killed outright: close() never ran
    monkeypatch.setattr(balance, "WINDOW", 4 * RECOUNT)
    time.sleep(4 * RECOUNT)  # its count is old: as if it had had no request since
    try:
        assert not any(requests(alive, 3, rounds=3))  # a dead worker is not an idle one
        replacement = WorkerLoads(loads_file, pid=os.getppid())
        assert replacement.slot == left_behind.slot
        time.sleep(4 * RECOUNT)  # the replacement, alive with no client, is an idle worker
        assert requests(alive, 3, rounds=3).count(True) == 1
        replacement.close()
    finally:
        alive.close()


def both_workers(server, timeout=20):
    """The pids of `server`'s two workers, once both have booted (the first answers before the second)."""
    deadline = time.monotonic() + timeout
    while len(pids := worker_pids(server.process)) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    return pids


def test_the_default_server_spreads_busy_keep_alive_clients_over_its_workers(database_path):
    """8 clients connect at once to 2 workers and keep their connections busy: however the connections
    were first split, within seconds each worker holds 4, and no client meets an error."""
    server = LiveServer(f"sqlite:///{database_path}", workers=2).start()
    stop = threading.Event()
    failures, closes = [], []
    try:
        port = server.port
        both_workers(server)
        barrier = threading.Barrier(8)

        def client():
            connection = HTTPConnection("127.0.0.1", port, timeout=10)
            barrier.wait()
            connection.connect()  # all at once, as wrk does
            try:
                while not stop.is_set():
                    connection.request("GET", "/healthz")
                    response = connection.getresponse()
                    response.read()
                    if response.status != 200:
                        failures.append(response.status)
                    if response.getheader("Connection") == "close":
                        closes.append(1)  # http.client connects again for the next request
            except OSError as error:
                failures.append(error)
            finally:
                connection.close()

        threads = [threading.Thread(target=client, daemon=True) for _ in range(8)]
        for thread in threads:
            thread.start()
        splits = []
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and not (len(splits) >= 4 and splits[-1] == [4, 4]):
            time.sleep(0.5)
            splits.append(clients_per_worker(port, worker_pids(server.process)))
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=10)
        server.stop()
    assert splits[-1] == [4, 4], f"clients per worker, every half second: {splits}"
    assert not failures


def test_a_worker_that_cannot_open_the_file_of_counts_serves_unbalanced_and_says_so(database_path, tmp_path):
    loads = tmp_path / "loads"  # given, so the master makes it there (and leaves it when it exits)
    (tmp_path / "out").mkdir()
    server = LiveServer(f"sqlite:///{database_path}", workers=2, env={balance.FILE_VARIABLE: str(loads)},
                        output_dir=tmp_path / "out").start()
    try:
        pids = both_workers(server)
        loads.unlink()
        os.kill(pids[0], signal.SIGKILL)  # its replacement finds no file
        deadline = time.monotonic() + 30
        while "Keep-alive clients are not spread" not in server.stderr() and time.monotonic() < deadline:
            time.sleep(0.2)
        answers = [HTTPConnection("127.0.0.1", server.port, timeout=10) for _ in range(6)]
        statuses = []
        for connection in answers:
            connection.request("GET", "/healthz")
            statuses.append(connection.getresponse().status)
            connection.close()
    finally:
        server.stop()
    assert "Keep-alive clients are not spread over the workers" in server.stderr()
    assert "Traceback" not in server.stderr()
    assert statuses == [200] * 6
