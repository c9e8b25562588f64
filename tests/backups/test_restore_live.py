"""A restore from the store under a live service: gunicorn, a long poll waiting across the restore, and a real
webhook receiver. The backup goes to the S3 store with `flask backup`, later writes follow, the service stops,
`flask restore NAME` brings the backup back from the store, and the feed never gives one seq to two entries."""

import os
import subprocess
import time

import requests

from tests.common.live import BIN, ROOT, LiveServer, free_port
from tests.common.receiver import WEBHOOK_ENV, Receiver
from tests.common.restores import LongPoller, create, entries, let_go, webhook_state
from tests.common.seaweed import BUCKET


def flask(env, *args):
    result = subprocess.run([str(BIN / "flask"), "--app", "app", *args], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().splitlines()[-1]


def test_a_restore_from_the_store_keeps_the_feed_long_polls_and_webhooks_right(app, database_url, admin_key, target,
                                                                              seaweed, prefix):
    settings = {**WEBHOOK_ENV, "IDENTITY_BACKUP_URL": target, **seaweed.env()}
    env = {**os.environ, **settings, "DATABASE_URL": database_url}
    server = LiveServer(database_url, workers=1, env=settings, port=free_port())
    with Receiver() as receiver:
        server.start()
        try:
            webhook = requests.post(f"{server.url}/webhooks", json={"url": receiver.url},
                                    headers={"x-api-key": admin_key}, timeout=30).json()
            receiver.secret = webhook["secret"]
            kept = [create(server, admin_key, f"In the backup {n}") for n in range(3)]
            backup_end = entries(server, admin_key)[-1]["seq"]
            assert receiver.wait_for(lambda r: webhook_state(server, admin_key, webhook["id"])["position"] == backup_end)
            name = flask(env, "backup")  # to the store, while the service serves
            assert f"{prefix}{name}" in seaweed.keys(prefix)
            lost = [create(server, admin_key, f"After the backup {n}") for n in range(3)]
            end = entries(server, admin_key)[-1]["seq"]
            assert receiver.wait_for(lambda r: end in r.delivered())
            poller = LongPoller(server, admin_key, end)
            poller.start()
            time.sleep(0.5)
        finally:
            server.stop()
        assert poller.answer is None
        let_go(app)
        flask(env, "restore", name)  # from the store, by its name in `backups list`
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

    assert [entry["identity_id"] for entry in feed] == [*kept, later]
    assert feed[-1]["seq"] == end + 1
    assert missing == [404, 404, 404]
    assert poller.answer is not None and poller.answer.status_code == 200, poller.answer and poller.answer.text
    assert [entry["identity_id"] for entry in poller.answer.json()["data"]] == [later]
    by_id = {}
    for delivery in receiver.deliveries:
        assert delivery["verified"]
        assert by_id.setdefault(delivery["id"], delivery["entry"]) == delivery["entry"], delivery["id"]
    assert by_id[f"{webhook['id']}_{end + 1}"]["identity_id"] == later
    assert BUCKET in target
