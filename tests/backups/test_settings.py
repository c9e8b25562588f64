"""The backup settings are checked at start-up, each wrong value with a message that names its variable."""

import pytest

from identity.config import settings_from_env


@pytest.mark.parametrize(("environ", "message"), [
    ({"IDENTITY_BACKUP_URL": "ftp://example.net/backups"}, "IDENTITY_BACKUP_URL must be s3://BUCKET/PREFIX"),
    ({"IDENTITY_BACKUP_URL": "s3://A_Bucket/x"}, "IDENTITY_BACKUP_URL must name a bucket"),
    ({"IDENTITY_BACKUP_URL": "file://relative/path"}, "IDENTITY_BACKUP_URL must be a file URL with an absolute path"),
    ({"IDENTITY_BACKUP_SCHEDULE": "every night"}, "IDENTITY_BACKUP_SCHEDULE must be a cron expression"),
    ({"IDENTITY_BACKUP_SCHEDULE": "61 3 * * *"}, "IDENTITY_BACKUP_SCHEDULE must be a cron expression"),
    ({"IDENTITY_BACKUP_S3_ADDRESSING": "sideways"}, "IDENTITY_BACKUP_S3_ADDRESSING must be one of auto, path, virtual"),
    ({"IDENTITY_BACKUP_KEEP": "0"}, "IDENTITY_BACKUP_KEEP must be 1 or more"),
    ({"IDENTITY_BACKUP_PART_MB": "4"}, "IDENTITY_BACKUP_PART_MB must be 5 to 5,120"),
    ({"IDENTITY_BACKUP_ENCRYPTION_KEY": "AGE-SECRET-KEY-1", "IDENTITY_BACKUP_ENCRYPTION_KEY_FILE": "/k"},
     "are both set"),
])
def test_a_wrong_backup_setting_is_named(environ, message):
    with pytest.raises(ValueError, match=message):
        settings_from_env(environ)


def test_good_backup_settings_are_read():
    settings = settings_from_env({"IDENTITY_BACKUP_URL": "s3://acme-backups/identity", "IDENTITY_BACKUP_SCHEDULE":
                                  " 0  3 * * * ", "IDENTITY_BACKUP_KEEP": "3", "IDENTITY_BACKUP_S3_ADDRESSING": "PATH"})
    assert settings["IDENTITY_BACKUP_URL"] == "s3://acme-backups/identity"
    assert settings["IDENTITY_BACKUP_SCHEDULE"] == "0 3 * * *"
    assert settings["IDENTITY_BACKUP_KEEP"] == 3 and settings["IDENTITY_BACKUP_S3_ADDRESSING"] == "path"
    unset = settings_from_env({})
    assert unset["IDENTITY_BACKUP_URL"] is None and unset["IDENTITY_BACKUP_SCHEDULE"] is None
    assert unset["IDENTITY_BACKUP_KEEP"] == 14 and unset["IDENTITY_BACKUP_ENCRYPTION_KEY"] is None


def test_backup_without_a_target_or_path_says_what_to_set(app):
    result = app.test_cli_runner().invoke(args=["backup"])
    assert result.exit_code == 1 and "set IDENTITY_BACKUP_URL" in result.output
