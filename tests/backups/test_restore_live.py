"""A restore from the store under a live service: gunicorn, a long poll waiting across the restore, and a real
webhook receiver. The backup goes to the S3 store with `flask backup`, later writes follow, the service stops,
`flask restore NAME` brings the backup back from the store, and the feed never gives one seq to two entries."""

import os
import subprocess

from tests.common.live import BIN, ROOT
from tests.common.restores import assert_no_seq_names_two_entries, restore_under_clients
from tests.common.seaweed import BUCKET


def flask(env, *args):
    result = subprocess.run([str(BIN / "flask"), "--app", "app", *args], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().splitlines()[-1]


def test_a_restore_from_the_store_keeps_the_feed_long_polls_and_webhooks_right(app, database_url, admin_key, target,
                                                                              seaweed, prefix):
    settings = {"IDENTITY_BACKUP_URL": target, **seaweed.env()}
    env = {**os.environ, **settings, "DATABASE_URL": database_url}
    taken = []

    def backup():
        taken.append(flask(env, "backup"))  # to the store, while the service serves
        assert f"{prefix}{taken[0]}" in seaweed.keys(prefix)

    seen = restore_under_clients(app, database_url, admin_key, backup, lambda: flask(env, "restore", taken[0]),
                                 env=settings)  # from the store, by its name in `backups list`
    assert_no_seq_names_two_entries(seen)
    assert BUCKET in target
