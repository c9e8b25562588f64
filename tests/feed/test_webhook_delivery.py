"""The webhook deliverer, run in this process (and by `flask webhooks deliver` and `flask run`),
against a real receiver on 127.0.0.1 that verifies each signature with the standardwebhooks library.
The same on real gunicorn: test_webhooks_live.py."""

import os
import subprocess
import time

import pytest

from identity.feed import delivery
from tests.common.apps import ADMIN_WALLET, make_app
from tests.common.live import BIN, ROOT, free_port
from tests.common.receiver import Receiver, check_every_entry_in_order

pytestmark = pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning")

FAST = {
    "IDENTITY_WEBHOOK_RETRY_MIN_SECONDS": 0.05,
    "IDENTITY_WEBHOOK_RETRY_MAX_SECONDS": 0.2,
    "IDENTITY_WEBHOOK_POLL_SECONDS": 0.05,
    "IDENTITY_WEBHOOK_LEASE_SECONDS": 3.0,
}
PRIVATE_OK = {**FAST, "IDENTITY_WEBHOOKS_ALLOW_PRIVATE": True}


@pytest.fixture
def private_app(database_url):
    """An app on the same database that allows receivers on loopback, with quick retries."""
    app = make_app(database_url, **PRIVATE_OK)
    yield app
    delivery.stop(app)
    from identity.storage.database import db

    with app.app_context():
        db.engine.dispose()


def register(app, key, url, **body):
    response = app.test_client().post("/webhooks", json={"url": url, **body}, headers={"x-api-key": key})
    assert response.status_code == 201, response.json
    return response.json


def create_identities(app, count, start=0):
    """Create `count` identities through the service; returns their identity_ids."""
    ids = []
    client = app.test_client()
    for number in range(start, start + count):
        response = client.post("/identity", json={"display_name": f"Hooked {number}"}, headers={"x-api-key": app.key})
        assert response.status_code == 201, response.json
        ids.append(response.json["identity_id"])
    return ids


def seqs_of(app, key):
    feed = app.test_client().get("/changes?after=0&limit=1000", headers={"x-api-key": key}).json
    return [entry["seq"] for entry in feed["data"]]


def test_the_setting_allows_private_addresses(private_app, admin_key):
    assert register(private_app, admin_key, "http://127.0.0.1:9/hook")["url"] == "http://127.0.0.1:9/hook"



@pytest.fixture
def keyed(private_app, admin_key):
    private_app.key = admin_key
    return private_app


def test_every_entry_arrives_in_order_signed(keyed, admin_key):
    with Receiver() as receiver:
        receiver.secret = register(keyed, admin_key, receiver.url, after=0)["secret"]
        create_identities(keyed, 20)
        delivery.start(keyed)
        seqs = seqs_of(keyed, admin_key)
        assert receiver.wait_for(lambda r: len(r.delivered()) >= len(seqs))
        check_every_entry_in_order(receiver.deliveries, seqs)
        first = receiver.deliveries[0]
        assert first["entry"]["kind"] == "created" and first["entry"]["wallet"] == ADMIN_WALLET


def test_failures_are_retried_with_the_same_webhook_id_then_delivered(keyed, admin_key):
    def answer(number):
        return (500, {}) if number <= 4 else (200, {})

    with Receiver(answer) as receiver:
        webhook = register(keyed, admin_key, receiver.url)
        receiver.secret = webhook["secret"]
        delivery.start(keyed)
        create_identities(keyed, 3)
        seqs = seqs_of(keyed, admin_key)
        assert receiver.wait_for(lambda r: len(r.delivered()) >= 3)
        check_every_entry_in_order(receiver.deliveries, seqs)
        assert [d["status"] for d in receiver.deliveries[:5]] == [500, 500, 500, 500, 200]
        assert len({d["id"] for d in receiver.deliveries[:5]}) == 1
        log = keyed.test_client().get(f"/webhooks/{webhook['id']}/deliveries", headers={"x-api-key": admin_key})
        assert receiver.wait_for(lambda r: _position(keyed, admin_key, webhook["id"]) == seqs[-1])
        attempts = log.json["data"]
        assert attempts[-1]["status"] == 500 and attempts[-1]["attempt"] == 1 and attempts[-1]["error"]


def _position(app, key, webhook_id):
    return app.test_client().get(f"/webhooks/{webhook_id}", headers={"x-api-key": key}).json["position"]


def _deliveries(app, key, webhook_id):
    return app.test_client().get(f"/webhooks/{webhook_id}/deliveries", headers={"x-api-key": key}).json["data"]


def test_a_redirect_is_not_followed_and_counts_as_a_failure(keyed, admin_key):
    with Receiver(lambda number: (302, {"Location": "http://127.0.0.1:9/elsewhere"})) as receiver:
        webhook = register(keyed, admin_key, receiver.url)
        receiver.secret = webhook["secret"]
        create_identities(keyed, 1)
        delivery.start(keyed)
        assert receiver.wait_for(lambda r: len(_deliveries(keyed, admin_key, webhook["id"])) >= 2)
        attempts = _deliveries(keyed, admin_key, webhook["id"])
        assert all(a["status"] == 302 and "redirect" in a["error"] for a in attempts)
        assert _position(keyed, admin_key, webhook["id"]) == webhook["position"]


def test_after_give_up_it_turns_inactive_and_patch_active_resumes_where_it_stopped(database_url, admin_key):
    failing = {"on": True}
    app = make_app(database_url, **PRIVATE_OK, IDENTITY_WEBHOOK_GIVE_UP=0.5)
    app.key = admin_key
    try:
        with Receiver(lambda number: (503, {}) if failing["on"] else (204, {})) as receiver:
            webhook = register(app, admin_key, receiver.url)
            receiver.secret = webhook["secret"]
            create_identities(app, 2)
            delivery.start(app)
            assert receiver.wait_for(lambda r: _get(app, admin_key, webhook["id"])["active"] is False)
            stopped = _get(app, admin_key, webhook["id"])
            assert stopped["failing_since"] is not None and stopped["position"] == webhook["position"]
            failing["on"] = False
            resumed = app.test_client().patch(f"/webhooks/{webhook['id']}", json={"active": True},
                                              headers={"x-api-key": admin_key}).json
            assert resumed["active"] is True and resumed["failing_since"] is None
            seqs = seqs_of(app, admin_key)
            assert receiver.wait_for(lambda r: len(r.delivered()) >= 2)
            check_every_entry_in_order(receiver.deliveries, seqs)
    finally:
        delivery.stop(app)


def _get(app, key, webhook_id):
    return app.test_client().get(f"/webhooks/{webhook_id}", headers={"x-api-key": key}).json


def test_a_private_address_is_refused_again_before_each_delivery(database_url, admin_key, keyed):
    with Receiver() as receiver:
        webhook = register(keyed, admin_key, receiver.url)  # allowed when it was registered
        create_identities(keyed, 1)
        strict = make_app(database_url, **FAST)
        try:
            delivery.start(strict)
            assert receiver.wait_for(lambda r: len(_deliveries(keyed, admin_key, webhook["id"])) >= 1)
            attempt = _deliveries(keyed, admin_key, webhook["id"])[0]
            assert attempt["status"] is None and "public addresses only" in attempt["error"]
            assert receiver.deliveries == []  # refused before connecting
        finally:
            delivery.stop(strict)


def test_the_deliveries_log_says_a_closed_port_refused_the_connection(keyed, admin_key):
    """Not "no answer within 10 s" after a millisecond: what happened (test_receiver.py tests every cause)."""
    webhook = register(keyed, admin_key, f"http://127.0.0.1:{free_port()}/hook")
    create_identities(keyed, 1)
    delivery.start(keyed)
    deadline = time.monotonic() + 30
    while not _deliveries(keyed, admin_key, webhook["id"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    attempt = _deliveries(keyed, admin_key, webhook["id"])[-1]
    assert attempt["status"] is None
    assert attempt["error"] == "refused: nothing accepts connections at the receiver's address and port"


def test_the_deliveries_log_keeps_the_latest_attempts(database_url, admin_key):
    app = make_app(database_url, **PRIVATE_OK, IDENTITY_WEBHOOK_DELIVERIES_KEPT=5)
    app.key = admin_key
    try:
        with Receiver() as receiver:
            webhook = register(app, admin_key, receiver.url)
            receiver.secret = webhook["secret"]
            create_identities(app, 12)
            delivery.start(app)
            seqs = seqs_of(app, admin_key)
            assert receiver.wait_for(lambda r: _position(app, admin_key, webhook["id"]) == seqs[-1])
            attempts = _deliveries(app, admin_key, webhook["id"])
            assert [a["seq"] for a in attempts] == seqs[::-1][:5]
            assert all(a["status"] == 204 and a["error"] is None for a in attempts)
    finally:
        delivery.stop(app)


def test_a_node_with_delivery_off_delivers_nothing(database_url, admin_key, keyed):
    off = make_app(database_url, **PRIVATE_OK, IDENTITY_WEBHOOKS_DELIVER=False)
    assert delivery.start(off) is None


def test_deleted_webhook_gets_nothing_more(keyed, admin_key):
    with Receiver() as receiver:
        webhook = register(keyed, admin_key, receiver.url)
        receiver.secret = webhook["secret"]
        delivery.start(keyed)
        create_identities(keyed, 2)
        assert receiver.wait_for(lambda r: len(r.delivered()) >= 2)
        assert keyed.test_client().delete(f"/webhooks/{webhook['id']}", headers={"x-api-key": admin_key}).status_code == 204
        create_identities(keyed, 2, start=2)
        time.sleep(0.5)  # several polls: nothing may arrive for the removed webhook
        assert len(receiver.deliveries) == 2


def test_a_run_started_after_its_entries_were_delivered_sends_nothing_again(keyed, admin_key):
    """A poll reads the webhooks with entries due, then starts a run for each that has none running.
    A run that ended between the two has recorded its position since: the next run must start from
    that position, not from what the poll read, or it sends the same entries again."""
    with Receiver() as receiver:
        webhook = register(keyed, admin_key, receiver.url)
        receiver.secret = webhook["secret"]
        create_identities(keyed, 2)
        deliverer = delivery.start(keyed)
        try:
            head = seqs_of(keyed, admin_key)[-1]
            assert receiver.wait_for(lambda r: _position(keyed, admin_key, webhook["id"]) == head)
            with keyed.app_context():
                deliverer.work(webhook["id"])  # the run of a poll that read the webhook before the deliveries
        finally:
            delivery.stop(keyed)
        assert receiver.delivered() == seqs_of(keyed, admin_key)[-2:]


def changing_the_webhook_during_the_first_delivery(app, key, change):
    """A receiver's answer that, while the first delivery waits for it, sends `change` (method, body)
    to the webhook, which is set as `answer.webhook_id`; every delivery is answered 204."""
    def answer(number):
        if number == 1:
            method, body = change
            response = app.test_client().open(f"/webhooks/{answer.webhook_id}", method=method, json=body,
                                              headers={"x-api-key": key})
            assert response.status_code in (200, 204), response.json
        return 204, {}
    return answer


def webhook_with_three_entries_due(app, key, receiver):
    """A webhook for `receiver` with three entries to deliver once the deliverer starts; their seqs."""
    webhook = register(app, key, receiver.url)
    receiver.secret = webhook["secret"]
    receiver.answer.webhook_id = webhook["id"]
    create_identities(app, 3)
    return webhook, seqs_of(app, key)[-3:]


def test_no_attempt_starts_after_a_delete_is_answered(keyed, admin_key):
    with Receiver(changing_the_webhook_during_the_first_delivery(keyed, admin_key, ("DELETE", None))) as receiver:
        webhook_with_three_entries_due(keyed, admin_key, receiver)
        delivery.start(keyed)
        assert receiver.wait_for(lambda r: len(r.deliveries) >= 1)
        time.sleep(0.5)  # several polls and batches: the entries still due must not be sent
        assert len(receiver.deliveries) == 1


def test_an_inactive_webhook_gets_no_further_attempt_and_resumes_at_the_next_entry(keyed, admin_key):
    pause = changing_the_webhook_during_the_first_delivery(keyed, admin_key, ("PATCH", {"active": False}))
    with Receiver(pause) as receiver:
        webhook, seqs = webhook_with_three_entries_due(keyed, admin_key, receiver)
        delivery.start(keyed)
        assert receiver.wait_for(lambda r: len(r.deliveries) >= 1)
        time.sleep(0.5)
        assert receiver.delivered() == seqs[:1]
        response = keyed.test_client().patch(f"/webhooks/{webhook['id']}", json={"active": True},
                                             headers={"x-api-key": admin_key})
        assert response.status_code == 200
        assert receiver.wait_for(lambda r: len(r.deliveries) >= 3)
        assert receiver.delivered() == seqs


def test_after_a_new_url_is_answered_the_next_entry_goes_there(keyed, admin_key):
    with Receiver() as moved:
        move = changing_the_webhook_during_the_first_delivery(keyed, admin_key, ("PATCH", {"url": moved.url}))
        with Receiver(move) as receiver:
            webhook, seqs = webhook_with_three_entries_due(keyed, admin_key, receiver)
            moved.secret = webhook["secret"]
            delivery.start(keyed)
            assert moved.wait_for(lambda r: len(r.deliveries) >= 2)
            assert receiver.delivered() == seqs[:1]
            assert moved.delivered() == seqs[1:]
            assert all(d["verified"] for d in moved.deliveries)


def test_flask_webhooks_deliver_runs_a_deliverer_on_its_own(database_url, admin_key, keyed):
    with Receiver() as receiver:
        webhook = register(keyed, admin_key, receiver.url)
        receiver.secret = webhook["secret"]
        create_identities(keyed, 3)
        env = {"DATABASE_URL": database_url, "IDENTITY_WEBHOOKS_ALLOW_PRIVATE": "1", "IDENTITY_WEBHOOK_POLL_SECONDS": "0.05"}
        process = subprocess.Popen([str(BIN / "flask"), "--app", "app", "webhooks", "deliver"], cwd=ROOT,
                                   env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            assert receiver.wait_for(lambda r: len(r.delivered()) >= 3), process.stderr.read1().decode()
        finally:
            process.terminate()
            _, stderr = process.communicate(timeout=30)
        assert process.returncode == 0, stderr.decode()
        check_every_entry_in_order(receiver.deliveries, seqs_of(keyed, admin_key))
        assert webhook["secret"] not in stderr.decode()


def test_backoff_doubles_from_the_shortest_wait_to_the_longest_with_jitter():
    for attempt in range(1, 40):
        ceiling = min(600, 2 ** (attempt - 1))
        waits = [delivery.backoff(attempt, 1.0, 600.0) for _ in range(50)]
        assert all(max(1.0, ceiling / 2) <= wait <= ceiling for wait in waits), attempt
    assert len({delivery.backoff(12, 1.0, 600.0) for _ in range(20)}) > 1  # jitter: not all equal


def test_flask_run_delivers_in_its_own_process(database_url, admin_key, keyed):
    with Receiver() as receiver:
        webhook = register(keyed, admin_key, receiver.url)
        receiver.secret = webhook["secret"]
        create_identities(keyed, 2)
        env = {**os.environ, "DATABASE_URL": database_url, "IDENTITY_WEBHOOKS_ALLOW_PRIVATE": "1",
               "IDENTITY_WEBHOOK_POLL_SECONDS": "0.05"}
        process = subprocess.Popen(
            [str(BIN / "flask"), "--app", "app", "run", "--port", str(free_port()), "--no-reload"],
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        try:
            assert receiver.wait_for(lambda r: len(r.delivered()) >= 2)
        finally:
            process.terminate()
            process.wait(timeout=30)
        check_every_entry_in_order(receiver.deliveries, seqs_of(keyed, admin_key))


def test_the_lease_has_one_holder_until_it_expires_or_is_released(app):
    from identity.storage import lease

    with app.app_context():
        # A term of 2 s: a pause of the machine under a parallel test run must not end it before the next line.
        assert lease.take("test", "first", 2.0)
        assert not lease.take("test", "second", 2.0)
        assert lease.take("test", "first", 2.0)  # a renewal
        time.sleep(2.1)  # longer than the term: the first holder has stopped renewing
        assert lease.take("test", "second", 60)
        assert not lease.take("test", "first", 60)
        lease.release("test", "second")
        assert lease.take("test", "first", 60)


@pytest.mark.postgresql_only
@pytest.mark.serial
@pytest.mark.skipif(not os.environ.get("IDENTITY_TEST_POSTGRES_CTL"), reason="set IDENTITY_TEST_POSTGRES_CTL to the test server's pg_ctl -D ... command")
def test_deliveries_resume_after_the_database_went_away_and_came_back(keyed, admin_key):
    from tests.common import postgres

    with Receiver(delay=0.02) as receiver:
        webhook = register(keyed, admin_key, receiver.url)
        receiver.secret = webhook["secret"]
        create_identities(keyed, 30)
        delivery.start(keyed)
        assert receiver.wait_for(lambda r: len(r.delivered()) >= 5)
        postgres.pg_ctl("stop", "-m", "fast", "-w")
        try:
            time.sleep(1)  # several polls and flushes fail meanwhile
        finally:
            postgres.pg_ctl("start", "-w")
        seqs = seqs_of(keyed, admin_key)
        assert len(receiver.delivered()) < len(seqs), "all delivered before the outage: the test proved nothing"
        assert receiver.wait_for(lambda r: set(seqs) <= set(r.delivered()))
        check_every_entry_in_order(receiver.deliveries, seqs)
