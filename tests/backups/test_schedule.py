"""IDENTITY_BACKUP_SCHEDULE: one backup per scheduled time across every worker and node, a missed time made up
once at start-up, IDENTITY_BACKUP_KEEP scheduled backups kept (manual ones never deleted), and a failure
retried with back-off while the service serves."""

import os
import signal
import subprocess
import time

from sqlalchemy import select

from identity.data.backups import runs, schedule
from identity.storage.database import db
from identity.storage.models import BackupRun
from tests.common.backups import WRONG_SECRET, cli, create_identities, metric, take
from tests.common.live import BIN, ROOT, LiveServer
from tests.common.seaweed import SECRET_KEY

EVERY_SECOND = "* * * * * *"  # six fields: the sixth is seconds
EVERY_TWO_SECONDS = "* * * * * */2"


def wait_until(condition, timeout=60, every=0.2):
    deadline = time.monotonic() + timeout
    while not (found := condition()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(every)
    return found


def listed(app):
    with app.app_context():
        return runs.listing()


def rows(app):
    with app.app_context():
        found = db.session.execute(select(BackupRun).order_by(BackupRun.id)).scalars().all()
        db.session.remove()
        return found


def test_two_workers_and_a_second_node_take_one_backup_per_scheduled_time(database_url, target, seaweed, prefix):
    env = {"IDENTITY_BACKUP_URL": target, "IDENTITY_BACKUP_SCHEDULE": EVERY_TWO_SECONDS,
           "IDENTITY_BACKUP_POLL_SECONDS": "0.2", "IDENTITY_BACKUP_LEASE_SECONDS": "2", "IDENTITY_BACKUP_KEEP": "100",
           **seaweed.env()}
    server = LiveServer(database_url, workers=2, env=env).start()
    node = subprocess.Popen([str(BIN / "flask"), "--app", "app", "backups", "schedule"], cwd=ROOT,
                            env={**os.environ, **env, "DATABASE_URL": database_url}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: len(seaweed.keys(prefix)) >= 8, timeout=90)
    finally:
        node.send_signal(signal.SIGTERM)
        node.wait(20)
        server.stop()
    from tests.common.apps import make_app

    app = make_app(database_url, IDENTITY_BACKUP_URL=target)
    backups = listed(app)
    times = [backup["scheduled_for"] for backup in backups]
    assert len(backups) >= 4 and len(set(times)) == len(times)  # one backup per scheduled time
    assert all(backup["kind"] == "scheduled" and backup["verified"] for backup in backups)
    assert {run.scheduled_for.isoformat() for run in rows(app) if run.status == "ok"} >= set(times)
    with app.app_context():
        db.engine.dispose()


def test_scheduled_backups_beyond_keep_are_deleted_and_manual_ones_kept(backup_apps, database_url, seaweed):
    app = backup_apps(database_url, IDENTITY_BACKUP_SCHEDULE=EVERY_SECOND, IDENTITY_BACKUP_KEEP=2)
    manual = take(app)
    scheduler = schedule.start(app)
    try:
        wait_until(lambda: sum(run.status == "ok" and run.kind == "scheduled" for run in rows(app)) >= 4)
    finally:
        schedule.stop(app)
    assert scheduler.stopping.is_set()
    backups = listed(app)
    scheduled = [backup["name"] for backup in backups if backup["kind"] == "scheduled"]
    newest = [run.name for run in rows(app) if run.kind == "scheduled" and run.status == "ok"][-2:]
    assert sorted(scheduled) == sorted(newest)
    assert manual in [backup["name"] for backup in backups]


def test_a_missed_time_is_made_up_once_at_start_up(backup_apps, database_url):
    app = backup_apps(database_url, IDENTITY_BACKUP_SCHEDULE="0 3 * * *")  # long past when the test runs, or not
    schedule.start(app)
    try:
        wait_until(lambda: any(run.status == "ok" for run in rows(app)))
    finally:
        schedule.stop(app)
    # A restart finds that time taken: nothing more until the next one.
    schedule.start(app)
    time.sleep(1.5)
    schedule.stop(app)
    assert [run.kind for run in rows(app)] == ["scheduled"]
    assert len(listed(app)) == 1


def test_no_time_is_made_up_when_a_backup_succeeded_since(backup_apps, database_url):
    app = backup_apps(database_url, IDENTITY_BACKUP_SCHEDULE="0 3 * * *")
    take(app)
    schedule.start(app)
    time.sleep(1.5)
    schedule.stop(app)
    assert [run.kind for run in rows(app)] == ["manual"]


def test_a_failing_backup_is_retried_with_back_off_while_the_service_serves(backup_apps, database_url, monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", WRONG_SECRET)
    app = backup_apps(database_url, IDENTITY_BACKUP_SCHEDULE="0 3 * * *", IDENTITY_BACKUP_RETRY_MIN_SECONDS=0.3,
                      IDENTITY_BACKUP_RETRY_MAX_SECONDS=0.6)
    with app.app_context():
        key = create_identities(app, 1)
    schedule.start(app)
    try:
        failing = wait_until(lambda: [run for run in rows(app) if run.failures >= 3])
        assert "refused the credentials" in failing[0].last_error and WRONG_SECRET not in failing[0].last_error
        assert failing[0].next_attempt_at > failing[0].last_error_at  # a pause before the next attempt
        assert app.test_client().get("/readyz").status_code == 200
        with app.app_context():
            create_identities(app, 1, key)
        assert metric(app, "identity_backup_failures_total") >= 3
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)  # the operator fixes the credentials
        wait_until(lambda: [run for run in rows(app) if run.status == "ok"])
    finally:
        schedule.stop(app)
    (run,) = rows(app)  # the same time's row, retried until it went through
    assert run.status == "ok" and run.failures >= 3
    assert metric(app, "identity_backup_last_success_timestamp_seconds") == run.finished_at.timestamp()
    assert cli(app, "backups", "list").stdout.count("\tscheduled\t") == 1
