"""`flask backup` to a real S3 store (SeaweedFS), `backups list`, `backups verify` and `flask restore NAME`, on
SQLite and PostgreSQL: what comes back is what was backed up, and the feed never reuses a number."""

import json

import pytest

from tests.common.backups import cli, create_identities, feed_end, take
from tests.common.seaweed import BUCKET


def test_backup_lists_verifies_and_restores_in_place_without_reusing_a_number(backup_apps, database_url, seaweed,
                                                                              prefix, backend):
    app = backup_apps(database_url)
    with app.app_context():
        key = create_identities(app, 3)
        end = feed_end(app, key)
    name = take(app)
    assert name.startswith("identity-") and name.endswith(".sqlite.zst" if backend == "sqlite" else ".pgdump")
    assert seaweed.keys(prefix) == [f"{prefix}{name}", f"{prefix}{name}.json"]
    manifest = json.loads(seaweed.client().get_object(Bucket=BUCKET, Key=f"{prefix}{name}.json")["Body"].read())
    assert manifest["identities"] == 3 and manifest["issued_up_to"] == end and manifest["database"] == backend
    assert manifest["verified"] is True and len(manifest["sha256"]) == 64
    with app.app_context():
        from identity.core import audit_log
        logged = list(audit_log.entries())
    # The manifest names the audit log's head as the backup began; the backup's own entry follows it.
    at_start = {entry["seq"]: entry["hash"] for entry in logged}
    assert at_start[manifest["audit_head"]["seq"]] == manifest["audit_head"]["hash"]
    [backed_up] = [entry for entry in logged if entry["action"] == "database.backup"]
    assert backed_up["target_id"] == name and backed_up["seq"] > manifest["audit_head"]["seq"]
    assert backed_up["via"] == "cli" and backed_up["outcome"] == "ok"

    listed = cli(app, "backups", "list")
    assert listed.exit_code == 0, listed.output
    header, row = listed.stdout.strip().splitlines()
    fields = dict(zip(header.split("\t"), row.split("\t"), strict=True))
    assert fields["name"] == name and fields["kind"] == "manual" and fields["identities"] == "3"
    assert fields["issued_up_to"] == str(end) and fields["verified"] == "yes" and int(fields["size"]) > 0

    from tests.common.backups import metric, status_page

    page = status_page(app, key)
    assert name in page and f"{int(fields['size']):,} bytes" in page and "Last error" not in page
    assert metric(app, "identity_backup_last_success_timestamp_seconds") > 0
    assert metric(app, "identity_backup_failures_total") == 0

    verified = cli(app, "backups", "verify", name)
    assert verified.exit_code == 0, verified.output
    assert "verified" in verified.stdout

    with app.app_context():
        create_identities(app, 2, key)  # after the backup: gone after the restore, their numbers never reused
        later_end = feed_end(app, key)
    assert later_end > end
    from identity.storage.database import db
    with app.app_context():
        db.engine.dispose()
    restored = cli(app, "restore", name)
    assert restored.exit_code == 0, restored.output
    with app.app_context():
        db.engine.dispose()
        response = app.test_client().get("/identities", headers={"x-api-key": key})
        assert response.status_code == 200
        assert feed_end(app, key) == end  # the later entries are gone
        create_identities(app, 1, key)
        assert feed_end(app, key) > later_end  # numbered above every number issued before the restore


def test_restore_into_a_fresh_database_brings_the_identities_back(backup_apps, database_url, instance_databases,
                                                                 target):
    source = backup_apps(database_url)
    with source.app_context():
        key = create_identities(source, 4)
        end = feed_end(source, key)
    name = take(source)
    (fresh_url,) = instance_databases(1)
    fresh = backup_apps(fresh_url)
    restored = cli(fresh, "restore", f"{target}{name}")  # by its s3:// URL
    assert restored.exit_code == 0, restored.output
    from identity.storage.database import db
    with fresh.app_context():
        db.engine.dispose()
        assert feed_end(fresh, key) == end
        create_identities(fresh, 1, key)
        assert feed_end(fresh, key) == end + 1


@pytest.mark.parametrize("path_style", ["plain", "file"])
def test_a_folder_target_round_trips(database_url, tmp_path, path_style, backend):
    from tests.common.apps import make_app

    folder = tmp_path / "offsite"
    folder.mkdir()
    url = str(folder) if path_style == "plain" else f"file://{folder}"
    app = make_app(database_url, IDENTITY_BACKUP_URL=url)
    with app.app_context():
        key = create_identities(app, 2)
        end = feed_end(app, key)
    name = take(app)
    assert sorted(path.name for path in folder.iterdir()) == [name, f"{name}.json"]
    assert cli(app, "backups", "verify", name).exit_code == 0
    restored = cli(app, "restore", str(folder / name))
    assert restored.exit_code == 0, restored.output
    from identity.storage.database import db
    with app.app_context():
        db.engine.dispose()
        assert feed_end(app, key) == end
