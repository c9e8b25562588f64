"""IDENTITY_BACKUP_ENCRYPTION_KEY: a backup is encrypted (age) before it leaves the machine; a restore without
the key, or with another, says which and changes nothing."""

import pyrage
import pytest

from identity.config import settings_from_env
from identity.storage.database import db
from tests.common.backups import backed_up_then_written, cli, create_identities, feed_end, take
from tests.common.seaweed import BUCKET

KEY = str(pyrage.x25519.Identity.generate())
OTHER_KEY = str(pyrage.x25519.Identity.generate())


def test_the_store_holds_only_age_ciphertext_and_the_right_key_restores(backup_apps, database_url, seaweed, prefix,
                                                                        backend):
    app = backup_apps(database_url, IDENTITY_BACKUP_ENCRYPTION_KEY=KEY)
    with app.app_context():
        key = create_identities(app, 2)
        end = feed_end(app, key)
    name = take(app)
    assert name.endswith(".age")
    stored = seaweed.client().get_object(Bucket=BUCKET, Key=f"{prefix}{name}")["Body"].read()
    assert stored.startswith(b"age-encryption.org/v1\n")
    assert key.encode() not in stored and b"SQLite format 3" not in stored and b"PGDMP" not in stored
    assert KEY.encode() not in seaweed.client().get_object(Bucket=BUCKET, Key=f"{prefix}{name}.json")["Body"].read()
    assert cli(app, "backups", "verify", name).exit_code == 0

    with app.app_context():
        create_identities(app, 1, key)
        db.engine.dispose()
    restored = cli(app, "restore", name)
    assert restored.exit_code == 0, restored.output
    with app.app_context():
        db.engine.dispose()
        assert feed_end(app, key) == end


@pytest.mark.parametrize("given", [None, OTHER_KEY], ids=["no key", "wrong key"])
def test_without_the_right_key_a_restore_says_which_and_changes_nothing(backup_apps, database_url, given):
    app = backup_apps(database_url, IDENTITY_BACKUP_ENCRYPTION_KEY=KEY)
    name, key, before = backed_up_then_written(app)
    other = backup_apps(database_url, IDENTITY_BACKUP_ENCRYPTION_KEY=given)
    result = cli(other, "restore", name)
    assert result.exit_code == 1
    said = "set IDENTITY_BACKUP_ENCRYPTION_KEY" if given is None else "does not open this backup"
    assert said in result.output and "Nothing was changed" in result.output
    assert KEY not in result.output and OTHER_KEY not in result.output
    with other.app_context():
        assert feed_end(other, key) == before  # untouched: the later identity is still there
    verify = cli(other, "backups", "verify", name)
    assert verify.exit_code == 1 and said in verify.output


def test_a_key_that_is_not_an_age_key_stops_the_start_without_showing_it(tmp_path):
    with pytest.raises(ValueError, match="IDENTITY_BACKUP_ENCRYPTION_KEY must hold an age secret key") as raised:
        settings_from_env({"IDENTITY_BACKUP_ENCRYPTION_KEY": "hunter2-not-a-key"})
    assert "hunter2" not in str(raised.value)
    path = tmp_path / "backup.key"
    path.write_text(f"# created: today\n{KEY}\n")
    assert settings_from_env({"IDENTITY_BACKUP_ENCRYPTION_KEY_FILE": str(path)})["IDENTITY_BACKUP_ENCRYPTION_KEY"] == KEY
    with pytest.raises(ValueError, match="IDENTITY_BACKUP_ENCRYPTION_KEY_FILE names a file that cannot be read"):
        settings_from_env({"IDENTITY_BACKUP_ENCRYPTION_KEY_FILE": str(tmp_path / "missing")})
