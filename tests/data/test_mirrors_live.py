"""Mirrors on real gunicorn servers, each on its own database (contract, "Mirroring another instance"): a new
mirror copies while its upstream takes creates and survives kill -9 with no entry lost or applied twice; it
backs off while its upstream is down and catches up; chains and circles converge; a take-down travels."""

import io
import threading
import time

import requests

from bench.portable import export_lines
from identity.core import keys
from identity.data import exports, imports, mirrors
from identity.storage.database import db
from tests.common.apps import ADMIN_WALLET, make_app
from tests.common.live import LiveServer

MIRROR_ENV = {
    # A killed follower's lease is taken over within seconds, and a retry comes within a second.
    "IDENTITY_MIRROR_LEASE_SECONDS": "3",
    "IDENTITY_MIRROR_RETRY_MAX_SECONDS": "1",
    "IDENTITY_WEBHOOKS_DELIVER": "0",
}


class Instance:
    """A gunicorn node on its own database, with an Admin key and a read-only Admin key (for its mirrors)."""

    def __init__(self, database_url, workers=1):
        self.database_url = database_url
        # The test's own way into the database (keys, exports, a mirror's row while its server is down).
        self.app = make_app(database_url)
        with self.app.app_context():
            self.key = keys.issue_key(ADMIN_WALLET, "Admin")[0]
            self.read_key = keys.issue_key(ADMIN_WALLET, "Admin", scope="read")[0]
        self.server = LiveServer(database_url, workers=workers, env=MIRROR_ENV).start()

    @property
    def url(self):
        return self.server.url

    def call(self, method, path, **kwargs):
        answer = requests.request(method, self.url + path, headers={"x-api-key": self.key}, timeout=30, **kwargs)
        assert answer.status_code < 300, (answer.status_code, answer.text)
        return answer.json() if answer.content else None

    def follow(self, upstream, key=None):
        """Register `upstream` as a mirror here; returns the mirror's id."""
        return self.call("POST", "/mirrors", json={"url": upstream.url, "key": key or upstream.read_key})["id"]

    def mirror(self, mirror_id):
        return self.call("GET", f"/mirrors/{mirror_id}")

    def head(self):
        return int(requests.get(self.url + "/changes", headers={"x-api-key": self.key}, timeout=30).headers["Feed-Head"])

    def feed(self):
        """Every entry of the feed, in order."""
        entries, after = [], 0
        while page := self.call("GET", "/changes", params={"after": after, "limit": 1000})["data"]:
            entries += page
            after = page[-1]["seq"]
        return entries

    def create(self, names):
        with requests.Session() as session:
            for name in names:
                answer = session.post(self.url + "/identity", json={"display_name": name}, headers={"x-api-key": self.key},
                                      timeout=30)
                assert answer.status_code == 201, answer.text

    def export(self):
        """What `identities export` writes for this instance."""
        stream = io.BytesIO()
        with self.app.app_context():
            exports.export_identities(stream)
        return stream.getvalue()

    def import_lines(self, count):
        """`identities import` of `count` generated identities, written straight to the database."""
        with self.app.app_context():
            assert imports.import_identities(export_lines(count), "cli").imported == count

    def position(self, mirror_id):
        """The mirror's position as committed in the database (its server may be down)."""
        with self.app.app_context():
            return mirrors.get(mirror_id).position

    def stop(self):
        self.server.stop()
        with self.app.app_context():
            db.engine.dispose()


def wait_until(condition, what, timeout=90):
    deadline = time.monotonic() + timeout
    while not (found := condition()):
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.1)
    return found


def caught_up(mirror, mirror_id, upstream):
    """The mirror's state once its position is the upstream's head (and it knows that head)."""
    def check():
        state = mirror.mirror(mirror_id)
        return state if state["position"] == upstream.head() == state["upstream_head"] else None
    return wait_until(check, f"{mirror.url} catches up with {upstream.url}")


def started(*databases, workers=1):
    # One after the other: CPython 3.11.7's compiler is not safe across threads (a SystemError, "AST constructor
    # recursion depth mismatch", when two threads build apps at once).
    return [Instance(url, workers) for url in databases]


def test_a_new_mirror_copies_while_the_upstream_takes_creates_and_loses_nothing_to_kill_9(instance_databases, report):
    upstream, mirror = started(*instance_databases(2), workers=2)
    try:
        upstream.import_lines(10_000)
        mirror_id = mirror.follow(upstream)
        writing = threading.Thread(target=upstream.create, args=([f"Created during the copy {n}" for n in range(100)],))
        writing.start()
        wait_until(lambda: mirror.mirror(mirror_id)["position"] > 0, "a first batch")
        mirror.server.kill()  # the master and every worker at once, mid-copy
        killed_at = mirror.position(mirror_id)
        assert 0 < killed_at < upstream.head(), "the copy was over before the kill: the test proved nothing"
        mirror.server.start()
        writing.join()
        state = caught_up(mirror, mirror_id, upstream)
        created = [entry["identity_id"] for entry in upstream.feed()]
        assert (state["applied"], state["already_present"], state["rejected"]) == (len(created), 0, 0)
        # Every entry once, in the upstream's order, in the mirror's own feed; the two exports are the same.
        assert [entry["identity_id"] for entry in mirror.feed()] == created
        assert mirror.export() == upstream.export()
        report(f"mirror across kill -9: {len(created)} identities, killed with {killed_at} applied, none lost or twice")
    finally:
        upstream.stop()
        mirror.stop()


def test_the_mirror_backs_off_while_its_upstream_is_down_and_catches_up_when_it_is_back(instance_databases):
    upstream, mirror = started(*instance_databases(2))
    try:
        upstream.create([f"Before the outage {n}" for n in range(20)])
        mirror_id = mirror.follow(upstream)
        caught_up(mirror, mirror_id, upstream)
        upstream.server.stop()
        upstream.import_lines(500)  # written while nobody serves it
        down = wait_until(lambda: (found := mirror.mirror(mirror_id))["last_error"] and found, "an error noted")
        assert "did not answer" in down["last_error"] and down["active"]
        first_error_at = down["last_error_at"]
        wait_until(lambda: mirror.mirror(mirror_id)["last_error_at"] != first_error_at, "a retry")
        upstream.server.start(same_port=True)
        state = caught_up(mirror, mirror_id, upstream)
        assert (state["applied"], state["rejected"]) == (520, 0)
        assert mirror.export() == upstream.export()
    finally:
        upstream.stop()
        mirror.stop()


def test_a_chain_copies_end_to_end_and_a_take_down_travels_it(instance_databases):
    a, b, c = started(*instance_databases(3))
    try:
        # C first asks with a key B never issued: refused, and last_error says so; a new key fixes it.
        c_of_b = c.follow(b, key="idsk_a-key-b-never-issued")
        refused = wait_until(lambda: (found := c.mirror(c_of_b))["last_error"] and found, "the refusal noted")
        assert "refuses this mirror's key" in refused["last_error"] and "idsk_a-key-b-never-issued" not in refused["last_error"]
        c.call("PATCH", f"/mirrors/{c_of_b}", json={"key": b.read_key})
        b_of_a = b.follow(a)
        a.create([f"Chained {n}" for n in range(30)])
        caught_up(b, b_of_a, a)
        caught_up(c, c_of_b, b)
        taken_down = a.feed()[7]["identity_id"]
        a.call("PATCH", f"/identity/{taken_down}", json={"status": "removed"})
        for mirror in (b, c):
            wait_until(lambda mirror=mirror: requests.get(f"{mirror.url}/identity/{taken_down}", timeout=30,
                                                          headers={"x-api-key": mirror.key}).status_code == 410,
                       f"the take-down reaches {mirror.url}")
        assert a.export() == b.export() == c.export()
    finally:
        for instance in (a, b, c):
            instance.stop()


def test_two_instances_mirroring_each_other_converge_without_a_loop(instance_databases):
    a, b = started(*instance_databases(2))
    try:
        a_of_b, b_of_a = a.follow(b), b.follow(a)
        a.create([f"Made on A {n}" for n in range(20)])
        b.create([f"Made on B {n}" for n in range(20)])
        caught_up(a, a_of_b, b)
        caught_up(b, b_of_a, a)
        heads = (a.head(), b.head())
        time.sleep(3)  # a loop would keep both feeds growing
        assert (a.head(), b.head()) == heads
        for instance, mirror_id in ((a, a_of_b), (b, b_of_a)):
            assert len(instance.feed()) == 40
            state = instance.mirror(mirror_id)
            assert (state["applied"], state["already_present"], state["rejected"]) == (20, 20, 0)
        assert a.export() == b.export()
    finally:
        a.stop()
        b.stop()
