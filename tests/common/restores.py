"""A service stopped and restored under its clients: identities made and the feed read over HTTP, a long poll
that waits across the restore, a webhook's state."""

import threading
import time

import requests

from identity.storage.database import db


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
