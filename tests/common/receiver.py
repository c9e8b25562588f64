"""A real webhook receiver for tests: an HTTP server on 127.0.0.1 that verifies each delivery's
signature with the standardwebhooks library, records it, and answers as the test tells it."""

import bisect
import json
import threading
import time

from standardwebhooks import Webhook, WebhookVerificationError

from tests.common.loopback import Loopback

# A live server's settings for delivering to a receiver on loopback promptly: private addresses allowed, polls
# and retries short.
WEBHOOK_ENV = {
    "IDENTITY_WEBHOOKS_ALLOW_PRIVATE": "1",
    "IDENTITY_WEBHOOK_POLL_SECONDS": "0.05",
    "IDENTITY_WEBHOOK_RETRY_MIN_SECONDS": "0.05",
    "IDENTITY_WEBHOOK_RETRY_MAX_SECONDS": "0.5",
}


class Receiver(Loopback):
    """`answer(delivery_number)` -> (status, headers) for each POST; by default 204.

    `deliveries` lists what arrived: {"id", "seq", "entry", "verified", "status"}. `secret` must be
    set (from the 201) before deliveries are verified; a delivery that fails verification is recorded
    with verified False and answered 400.
    """

    def __init__(self, answer=None, delay=0.0):
        self.answer = answer or (lambda number: (204, {}))
        self.delay = delay
        self.secret = None
        self.deliveries = []
        self.lock = threading.Lock()
        super().__init__(POST=self.receive)

    @property
    def url(self):
        return f"{super().url}/hook"

    def receive(self, handler):
        body = handler.rfile.read(int(handler.headers.get("Content-Length") or 0))
        if self.delay:
            time.sleep(self.delay)
        try:
            entry = Webhook(self.secret).verify(body, dict(handler.headers))
            verified = True
        except (WebhookVerificationError, TypeError, ValueError):
            entry, verified = json.loads(body), False
        with self.lock:
            number = len(self.deliveries) + 1
            status, headers = self.answer(number) if verified else (400, {})
            self.deliveries.append({"id": handler.headers["webhook-id"], "seq": entry["seq"], "entry": entry,
                                    "verified": verified, "status": status})
        handler.send_response(status)
        for name, value in {"Content-Length": "0", **headers}.items():
            handler.send_header(name, value)
        handler.end_headers()

    def delivered(self):
        """The seqs answered 2xx, in the order they arrived."""
        with self.lock:
            return [d["seq"] for d in self.deliveries if 200 <= d["status"] < 300]

    def wait_for(self, condition, timeout=60):
        """Wait until condition(self) holds; False if it did not within `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if condition(self):
                return True
            time.sleep(0.05)
        return condition(self)


def check_every_entry_in_order(deliveries, seqs):
    """Every seq of `seqs` was delivered (a 2xx), first deliveries in order, and no entry was even
    attempted before every earlier one had been delivered; a repeat carries the webhook-id of the
    first delivery of its seq; every delivery verified."""
    assert all(d["verified"] for d in deliveries)
    expected, done = sorted(seqs), set()
    for delivery in deliveries:
        earlier = expected[:bisect.bisect_left(expected, delivery["seq"])]
        assert set(earlier) <= done, f"entry {delivery['seq']} was sent before an earlier one was delivered"
        if 200 <= delivery["status"] < 300:
            done.add(delivery["seq"])
    first = {}
    for delivery in deliveries:
        if 200 <= delivery["status"] < 300:
            first.setdefault(delivery["seq"], delivery["id"])
    assert list(first) == sorted(first), "entries were delivered out of order"
    assert sorted(first) == sorted(seqs), f"missing {sorted(set(seqs) - set(first))[:10]}"
    ids = {}
    for delivery in deliveries:
        assert ids.setdefault(delivery["seq"], delivery["id"]) == delivery["id"], "a repeat with another webhook-id"
