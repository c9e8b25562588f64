"""A service stopped and restored under its clients: identities made and the feed read over HTTP, a long poll
that waits across the restore, a webhook's state, and the whole of it (`restore_under_clients`) with what a restore
must keep (`assert_no_seq_names_two_entries`)."""

import threading
import time
from types import SimpleNamespace

import requests

from identity.storage.database import db
from tests.common.live import LiveServer, free_port
from tests.common.receiver import WEBHOOK_ENV, Receiver


def create(server, key, name):
    response = requests.post(f"{server.url}/identity", json={"display_name": name}, headers={"x-api-key": key}, timeout=30)
    assert response.status_code == 201, response.text
    return response.json()["identity_id"]


def entries(server, key, after=0):
    response = requests.get(f"{server.url}/changes", params={"after": after, "limit": 1000},
                            headers={"x-api-key": key}, timeout=30)
    assert response.status_code == 200, response.text
    return response.json()["data"]


def webhook_state(server, key, webhook_id):
    return requests.get(f"{server.url}/webhooks/{webhook_id}", headers={"x-api-key": key}, timeout=30).json()


class LongPoller(threading.Thread):
    """A client that long-polls the feed from `after` until it gets entries, polling again whenever an answer is
    empty and reconnecting while the server is away, as a follower does."""

    def __init__(self, server, key, after):
        super().__init__(daemon=True)
        self.server, self.key, self.after = server, key, after
        self.polls = 0
        self.answer = None

    def run(self):
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                self.polls += 1
                response = requests.get(f"{self.server.url}/changes", headers={"x-api-key": self.key}, timeout=40,
                                        params={"feed": "longpoll", "after": self.after, "timeout": 30_000})
            except requests.ConnectionError:
                time.sleep(0.1)
                continue
            if response.status_code != 200 or response.json()["data"]:
                self.answer = response
                return
            self.after = response.json()["next_after"]


def let_go(app):
    """This test process's connections to the database closed, as a stopped service's are."""
    with app.app_context():
        db.engine.dispose()


def restore_under_clients(app, database_url, admin_key, backup, restore, env=None):
    """A live service (gunicorn, one worker) with a real webhook receiver: 3 identities, `backup()` (while it
    serves), 3 more, a long poll waiting at the feed's end, the service stopped, `restore()`, the service
    started again, one more identity. What each client saw, for assert_no_seq_names_two_entries."""
    server = LiveServer(database_url, workers=1, env={**WEBHOOK_ENV, **(env or {})}, port=free_port())
    with Receiver() as receiver:
        server.start()
        try:
            webhook = requests.post(f"{server.url}/webhooks", json={"url": receiver.url},
                                    headers={"x-api-key": admin_key}, timeout=30).json()
            receiver.secret = webhook["secret"]
            kept = [create(server, admin_key, f"In the backup {n}") for n in range(3)]
            backup_end = entries(server, admin_key)[-1]["seq"]
            # The webhook's position is in the backup: delivered up to its end.
            assert receiver.wait_for(lambda r: webhook_state(server, admin_key, webhook["id"])["position"] == backup_end)
            backup()
            lost = [create(server, admin_key, f"After the backup {n}") for n in range(3)]
            end = entries(server, admin_key)[-1]["seq"]
            assert receiver.wait_for(lambda r: end in r.delivered())
            poller = LongPoller(server, admin_key, end)
            poller.start()
            time.sleep(0.5)  # waiting on an empty page at the feed's end
        finally:
            server.stop()
        assert poller.answer is None
        let_go(app)
        restore()
        server.start()
        try:
            later = create(server, admin_key, "After the restore")
            poller.join(60)
            feed = entries(server, admin_key)
            receiver.wait_for(lambda r: feed[-1]["seq"] in r.delivered(), timeout=30)
            missing = [requests.get(f"{server.url}/identity/{identity_id}", headers={"x-api-key": admin_key},
                                    timeout=30).status_code for identity_id in lost]
        finally:
            server.stop()
    return SimpleNamespace(webhook=webhook, kept=kept, end=end, later=later, feed=feed, missing=missing,
                           poller=poller, deliveries=receiver.deliveries)


def assert_no_seq_names_two_entries(seen):
    """What restore_under_clients saw: the restored feed, the long poll and the webhook's deliveries."""
    # The feed: the backup's entries, then the new one numbered above every number issued before.
    assert [entry["identity_id"] for entry in seen.feed] == [*seen.kept, seen.later]
    assert seen.feed[-1]["seq"] == seen.end + 1
    assert seen.missing == [404, 404, 404]
    # The long poll that waited at the old end across the restore got the new entry, not a page of nothing.
    answer = seen.poller.answer
    assert answer is not None and answer.status_code == 200, answer and answer.text
    assert [entry["identity_id"] for entry in answer.json()["data"]] == [seen.later]
    # The receiver never got two entries under one webhook-id.
    by_id = {}
    for delivery in seen.deliveries:
        assert delivery["verified"]
        assert by_id.setdefault(delivery["id"], delivery["entry"]) == delivery["entry"], delivery["id"]
    assert by_id[f"{seen.webhook['id']}_{seen.end + 1}"]["identity_id"] == seen.later
