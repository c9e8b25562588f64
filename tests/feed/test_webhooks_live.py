"""Webhooks on real gunicorn (gevent workers) with real receivers on 127.0.0.1: nothing is lost when
the receiver fails for a while, when the serving processes are killed, or when a node goes away;
a receiver that never answers holds back only its own webhook."""

import os
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
from sqlalchemy import create_engine, text

from tests.common.live import LiveServer, start_all
from tests.common.receiver import WEBHOOK_ENV as RECEIVER_ENV
from tests.common.receiver import Receiver, check_every_entry_in_order

# Short, so that a takeover after a kill is quick to test; the default is 15 s.
WEBHOOK_ENV = {**RECEIVER_ENV, "IDENTITY_WEBHOOK_LEASE_SECONDS": "3"}


def register(server, key, url):
    response = requests.post(f"{server.url}/webhooks", json={"url": url}, headers={"x-api-key": key}, timeout=30)
    assert response.status_code == 201, response.text
    return response.json()


def create_concurrently(servers, key, count, writers=4, tag="Live"):
    """`writers` clients create `count` identities in all, spread over `servers`."""

    def write(writer):
        with requests.Session() as session:
            for number in range(writer, count, writers):
                server = servers[number % len(servers)]
                response = session.post(f"{server.url}/identity", json={"display_name": f"{tag} {number}"},
                                        headers={"x-api-key": key}, timeout=30)
                assert response.status_code == 201, response.text

    with ThreadPoolExecutor(max_workers=writers) as pool:
        list(pool.map(write, range(writers)))


def all_seqs(server, key):
    seqs, after = [], 0
    while True:
        page = requests.get(f"{server.url}/changes", params={"after": after, "limit": 1000},
                            headers={"x-api-key": key}, timeout=30).json()
        if not page["data"]:
            return seqs
        seqs.extend(entry["seq"] for entry in page["data"])
        after = page["next_after"]


def wait_for_all(receiver, seqs, timeout=90):
    assert receiver.wait_for(lambda r: set(seqs) <= set(r.delivered()), timeout), (
        f"{len(set(seqs) - set(receiver.delivered()))} of {len(seqs)} entries never delivered"
    )


def test_a_receiver_failing_for_a_while_then_answering_gets_every_entry_in_order(database_url, admin_key, report):
    failing = threading.Event()
    failing.set()

    def answer(number):
        return (500, {}) if failing.is_set() else (200, {})

    with Receiver(answer) as receiver, _server(database_url) as server:
        receiver.secret = register(server, admin_key, receiver.url)["secret"]
        with ThreadPoolExecutor(max_workers=1) as pool:
            writing = pool.submit(create_concurrently, [server], admin_key, 120)
            # While the clients write: 500 until a few attempts have failed, then 200.
            assert receiver.wait_for(lambda r: len(r.deliveries) >= 4)
            failing.clear()
            writing.result()
        seqs = all_seqs(server, admin_key)
        wait_for_all(receiver, seqs)
        check_every_entry_in_order(receiver.deliveries, seqs)
        failed = sum(1 for d in receiver.deliveries if d["status"] == 500)
        assert failed >= 4
        report(f"webhook under failures: {len(seqs)} entries, {failed} attempts answered 500, all delivered in order")


class _server:
    """A LiveServer with the webhook settings, stopped on exit."""

    def __init__(self, database_url, workers=2, env=None):
        self.server = LiveServer(database_url, workers=workers, env={**WEBHOOK_ENV, **(env or {})})

    def __enter__(self):
        return self.server.start()

    def __exit__(self, *exc):
        self.server.stop()


def test_sigkill_during_deliveries_loses_nothing(database_url, admin_key, report):
    with Receiver(delay=0.005) as receiver:
        first = LiveServer(database_url, workers=2, env=WEBHOOK_ENV).start()
        try:
            receiver.secret = register(first, admin_key, receiver.url)["secret"]
            create_concurrently([first], admin_key, 200)
            assert receiver.wait_for(lambda r: len(r.delivered()) >= 30)
        finally:
            first.kill()  # the master and every worker at once, mid-delivery
        delivered_before = len(receiver.delivered())
        with _server(database_url) as second:
            seqs = all_seqs(second, admin_key)
            assert delivered_before < len(seqs), "everything was delivered before the kill: the test proved nothing"
            wait_for_all(receiver, seqs)
            check_every_entry_in_order(receiver.deliveries, seqs)
        repeats = len(receiver.delivered()) - len(seqs)
        report(f"webhook across SIGKILL: {len(seqs)} entries, {delivered_before} before the kill, {repeats} sent twice")


def _lease_holder_pid(database_url):
    engine = create_engine(database_url)
    try:
        with engine.connect() as connection:
            holder = connection.execute(text("SELECT holder FROM leases WHERE name = 'webhooks'")).scalar()
    finally:
        engine.dispose()
    return int(holder.split(":")[1]) if holder else None


@pytest.mark.postgresql_only
def test_two_nodes_one_killed_the_other_takes_over_within_30_seconds(database_url, admin_key, report):
    with Receiver(delay=0.01) as receiver:
        nodes = start_all([LiveServer(database_url, workers=1, env=WEBHOOK_ENV) for _ in range(2)])
        try:
            receiver.secret = register(nodes[0], admin_key, receiver.url)["secret"]
            create_concurrently(nodes, admin_key, 300)
            assert receiver.wait_for(lambda r: len(r.delivered()) >= 30)
            pid = _lease_holder_pid(database_url)
            holder = next(node for node in nodes if os.getpgid(pid) == node.process.pid)
            survivor = next(node for node in nodes if node is not holder)
            holder.kill()
            killed_at = time.monotonic()
            count = len(receiver.deliveries)
            assert receiver.wait_for(lambda r: len(r.deliveries) > count + 1, timeout=60)
            takeover = time.monotonic() - killed_at
            seqs = all_seqs(survivor, admin_key)
            wait_for_all(receiver, seqs)
            check_every_entry_in_order(receiver.deliveries, seqs)
        finally:
            for node in nodes:
                node.stop()
    assert takeover < 30
    report(f"webhook node killed: the other took over in {takeover:.1f} s (lease 3 s); {len(seqs)} entries in order")


def test_a_receiver_that_never_answers_holds_back_only_its_own_webhook(database_url, admin_key, report):
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(64)  # connections complete in the kernel's queue and are never answered
    try:
        with Receiver() as prompt, _server(database_url) as server:
            register(server, admin_key, f"http://127.0.0.1:{silent.getsockname()[1]}/never")
            prompt.secret = register(server, admin_key, prompt.url)["secret"]
            create_concurrently([server], admin_key, 40)
            seqs = all_seqs(server, admin_key)
            began = time.monotonic()
            wait_for_all(prompt, seqs, timeout=60)
            check_every_entry_in_order(prompt.deliveries, seqs)
            report(f"webhook beside a silent receiver: {len(seqs)} entries delivered in {time.monotonic() - began:.1f} s")
    finally:
        silent.close()


def test_the_secret_is_in_no_log_line(database_url, admin_key, tmp_path):
    with Receiver(lambda number: (500, {}) if number < 3 else (200, {})) as receiver:
        server = LiveServer(database_url, workers=1, env=WEBHOOK_ENV, output_dir=tmp_path).start()
        try:
            webhook = register(server, admin_key, receiver.url)
            receiver.secret = webhook["secret"]
            requests.patch(f"{server.url}/webhooks/{webhook['id']}", json={"description": "x"},
                           headers={"x-api-key": admin_key}, timeout=30)
            create_concurrently([server], admin_key, 3, writers=1)
            assert receiver.wait_for(lambda r: len(r.delivered()) >= 3)
        finally:
            server.stop()
        logs = server.stdout() + server.stderr()
        assert "webhook registered" in logs and "webhook delivery failed" in logs
        assert webhook["secret"] not in logs
        assert webhook["secret"].removeprefix("whsec_") not in logs
