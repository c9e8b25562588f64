"""Faults kept in their place: wrong credentials, a missing bucket, a store stopped in the middle of an upload,
too little temporary space. The command says what went wrong in words, no secret shows anywhere, the service
keeps serving (/readyz 200), and /metrics and the Status page count and show the failure."""

import os

import pytest
from sqlalchemy import text

from identity.data.backups import archive
from identity.storage.database import db
from tests.common.backups import WRONG_SECRET, cli, create_identities, metric, status_page
from tests.common.cutoff import CutOff
from tests.common.seaweed import BUCKET, SECRET_KEY, Seaweed


def test_wrong_credentials_are_named_without_the_secret_and_the_service_keeps_serving(backup_apps, database_url,
                                                                                    monkeypatch, seaweed, prefix):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", WRONG_SECRET)
    app = backup_apps(database_url)
    with app.app_context():
        key = create_identities(app, 1)
    result = cli(app, "backup")
    assert result.exit_code == 1
    assert "refused the credentials" in result.output and "AWS_SECRET_ACCESS_KEY" in result.output
    assert WRONG_SECRET not in result.output and SECRET_KEY not in result.output
    assert seaweed.keys(prefix) == []
    assert app.test_client().get("/readyz").status_code == 200
    assert metric(app, "identity_backup_failures_total") == 1.0
    assert metric(app, "identity_backup_last_success_timestamp_seconds") is None
    page = status_page(app, key)
    assert "refused the credentials" in page and WRONG_SECRET not in page and "none yet" in page
    with app.app_context():
        create_identities(app, 1, key)  # still serving writes


def test_a_missing_bucket_is_reported_and_never_created(backup_apps, database_url, seaweed, s3_env):
    app = backup_apps(database_url, IDENTITY_BACKUP_URL="s3://identity-no-such-bucket/backups")
    result = cli(app, "backup")
    assert result.exit_code == 1
    assert "bucket identity-no-such-bucket does not exist" in result.output and "never creates" in result.output
    assert "identity-no-such-bucket" not in [bucket["Name"] for bucket in seaweed.client().list_buckets()["Buckets"]]
    listed = cli(app, "backups", "list")
    assert listed.exit_code == 1 and "does not exist" in listed.output


def test_a_store_down_is_named_and_the_service_keeps_serving(backup_apps, database_url, monkeypatch, s3_env):
    from tests.common.live import free_port

    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{free_port()}")  # nothing listens there
    app = backup_apps(database_url)
    result = cli(app, "backup")
    assert result.exit_code == 1 and "could not be reached" in result.output
    assert app.test_client().get("/readyz").status_code == 200


def test_a_store_stopped_mid_upload_leaves_no_backup_and_its_upload_is_aborted_at_the_next_contact(
        backup_apps, database_url, junk, tmp_path, monkeypatch, s3_env):
    store = Seaweed(tmp_path / "store").start()
    try:
        store.client().create_bucket(Bucket=BUCKET)
        # Past the first 5 MiB part: the multipart upload is under way when the store stops.
        relay = CutOff(store.ports["s3.port"], after=8 * 1024 * 1024, on_cut=store.stop)
        monkeypatch.setenv("AWS_ENDPOINT_URL", relay.endpoint)
        app = backup_apps(database_url, IDENTITY_BACKUP_URL=f"s3://{BUCKET}/cut/", IDENTITY_BACKUP_PART_MB=5)
        result = cli(app, "backup")
        assert relay.cut.is_set()
        assert result.exit_code == 1 and "could not be reached" in result.output, result.output
        assert app.test_client().get("/readyz").status_code == 200

        store.start()
        # The abort could not reach the store: the upload is still in progress there.
        assert [upload["Key"] for upload in store.uploads("cut/")] == [f"cut/{name}" for name in running_names(app)]
        assert store.keys("cut/") == []  # nothing partial is an object, let alone a listed backup
        listed = cli(app, "backups", "list")
        assert listed.exit_code == 0 and "No backups" in listed.output
        # The next contact aborts what the cut left in progress, and the next backup goes through whole.
        taken = cli(app, "backup")
        assert taken.exit_code == 0, taken.output
        assert store.uploads("cut/") == []
        name = taken.stdout.strip().splitlines()[-1]
        assert store.keys("cut/") == [f"cut/{name}", f"cut/{name}.json"]
        assert cli(app, "backups", "verify", name).exit_code == 0
        relay.close()
    finally:
        store.stop()
    with app.app_context():
        db.engine.dispose()


def running_names(app):
    """The names of the failed runs' backups (what an interrupted upload was named)."""
    with app.app_context():
        return [row.name for row in db.session.execute(text("SELECT name FROM backup_runs WHERE status = 'failed'"))]


def test_too_little_temporary_space_is_named_before_starting(tmp_path):
    with pytest.raises(archive.BackupFailed, match=f"The temporary folder {tmp_path} has .* MiB free; .* needs up"):
        archive.check_space(tmp_path, 10**18)


@pytest.mark.postgresql_only
def test_pg_dump_missing_or_older_than_the_server_is_said_clearly(backup_apps, database_url, tmp_path, monkeypatch):
    app = backup_apps(database_url)
    monkeypatch.setenv("PATH", str(tmp_path))  # no pg_dump on it
    result = cli(app, "backup")
    assert result.exit_code == 1 and "pg_dump is not installed here" in result.output
    old = tmp_path / "pg_dump"
    old.write_text("#!/bin/sh\necho 'pg_dump (PostgreSQL) 9.6.24'\n")
    old.chmod(0o755)
    result = cli(app, "backup")
    assert result.exit_code == 1 and "pg_dump here is version 9, older than the server's" in result.output


def test_a_missing_folder_target_is_reported_and_not_created(database_url, tmp_path):
    from tests.common.apps import make_app

    app = make_app(database_url, IDENTITY_BACKUP_URL=str(tmp_path / "not-mounted"))
    result = cli(app, "backup")
    assert result.exit_code == 1 and "does not exist: create it (the service does not)" in result.output
    assert not (tmp_path / "not-mounted").exists()


@pytest.mark.postgresql_only
@pytest.mark.parametrize("where", ["s3", "folder"])
def test_a_pg_dump_that_fails_midway_leaves_no_object_and_no_upload(backup_apps, database_url, tmp_path, monkeypatch,
                                                                  seaweed, prefix, where):
    """pg_dump's archive streams into the upload: one that breaks off after 12 MiB (past two 5 MiB parts) must not
    complete the upload, and its message names the cause."""
    import shutil

    real = shutil.which("pg_dump")
    fake = tmp_path / "bin" / "pg_dump"
    fake.parent.mkdir()
    fake.write_text(f'#!/bin/sh\nif [ "$1" = --version ]; then exec {real} --version; fi\n'
                    "head -c 12582912 /dev/urandom\necho 'pg_dump: error: connection to server was lost' >&2\n"
                    "exit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    config = {"IDENTITY_BACKUP_PART_MB": 5}
    if where == "folder":
        (tmp_path / "offsite").mkdir()
        config["IDENTITY_BACKUP_URL"] = str(tmp_path / "offsite")
    app = backup_apps(database_url, **config)
    result = cli(app, "backup")
    assert result.exit_code == 1
    assert "pg_dump failed: pg_dump: error: connection to server was lost" in result.output, result.output
    if where == "s3":
        assert seaweed.keys(prefix) == [] and seaweed.uploads(prefix) == []
    else:
        assert list((tmp_path / "offsite").iterdir()) == []
    assert metric(app, "identity_backup_failures_total") == 1.0
    assert app.test_client().get("/readyz").status_code == 200
