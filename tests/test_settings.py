"""Settings read from the environment (identity.config): what a value means, and what a value that cannot be
read does to the app, to `flask` and to gunicorn: a message naming each such variable, never a traceback."""

import os
import subprocess

import pytest

from identity import create_app
from identity.config import SettingsError, settings_from_env
from tests.common.live import BIN, ROOT, free_port


def test_two_wrong_values_are_both_named_in_one_error_each_with_what_it_must_be():
    with pytest.raises(SettingsError) as raised:
        settings_from_env({"IDENTITY_KEY_CACHE_SECONDS": "abc", "IDENTITY_WEBHOOKS_DELIVER": "maybe"})
    assert raised.value.problems == [
        "IDENTITY_KEY_CACHE_SECONDS must be a whole number, not 'abc'",
        "IDENTITY_WEBHOOKS_DELIVER must be true or false (or 1, yes, on / 0, no, off), not 'maybe'",
    ]
    message = raised.value.exit_message()
    assert message.startswith("Error: ") and "fix them in the environment" in message
    assert "IDENTITY_KEY_CACHE_SECONDS" in message and "IDENTITY_WEBHOOKS_DELIVER" in message


def test_create_app_refuses_wrong_values_naming_each(monkeypatch):
    monkeypatch.setenv("IDENTITY_BACKUP_PART_MB", "4")
    monkeypatch.setenv("IDENTITY_WEBHOOK_GIVE_UP", "-1")
    with pytest.raises(ValueError, match="IDENTITY_BACKUP_PART_MB must be 5 to 5,120, not 4") as raised:
        create_app({"DATABASE_URL": "sqlite://", "TESTING": True})
    assert "IDENTITY_WEBHOOK_GIVE_UP must be a number of seconds of at least 0, not -1" in str(raised.value)


@pytest.mark.parametrize("blank", ["", "   "])
def test_an_empty_value_is_unset_and_takes_the_default(blank):
    settings = settings_from_env({"IDENTITY_KEY_CACHE_SECONDS": blank, "IDENTITY_METRICS_ENABLED": blank,
                                  "IDENTITY_LOG_LEVEL": blank, "IDENTITY_WEBHOOK_GIVE_UP": blank,
                                  "IDENTITY_BACKUP_URL": blank, "IDENTITY_RATELIMIT_READ": blank})
    assert settings["IDENTITY_KEY_CACHE_SECONDS"] == 5 and settings["IDENTITY_METRICS_ENABLED"] is True
    assert settings["IDENTITY_LOG_LEVEL"] == "INFO" and settings["IDENTITY_WEBHOOK_GIVE_UP"] == 24 * 3600
    assert settings["IDENTITY_BACKUP_URL"] is None and settings["IDENTITY_RATELIMIT_READ"] == "120/minute"


@pytest.mark.parametrize(("raw", "value"), [("1", True), ("TRUE", True), ("Yes", True), (" on ", True),
                                            ("0", False), ("False", False), ("NO", False), ("oFF", False)])
def test_a_boolean_is_one_of_four_words_each_way_in_any_case(raw, value):
    assert settings_from_env({"IDENTITY_WEBHOOKS_ALLOW_PRIVATE": raw})["IDENTITY_WEBHOOKS_ALLOW_PRIVATE"] is value


@pytest.mark.parametrize("raw", ["t", "y", "2", "enabled"])
def test_other_words_are_not_booleans(raw):
    with pytest.raises(SettingsError, match=f"IDENTITY_WEBHOOKS_ALLOW_PRIVATE must be true or false .*, not '{raw}'"):
        settings_from_env({"IDENTITY_WEBHOOKS_ALLOW_PRIVATE": raw})


@pytest.mark.parametrize(("name", "raw", "words"), [
    ("IDENTITY_IMPORT_CACHE_MB", "0", "must be 1 or more, not 0"),
    ("IDENTITY_SIWE_NONCE_SECONDS", "86401", "must be 10 to 86,400, not 86401"),
    ("IDENTITY_WEBHOOK_LEASE_SECONDS", "0.5", "must be a number of seconds of at least 1, not 0.5"),
    ("IDENTITY_MIRROR_RETRY_MAX_SECONDS", "inf", "must be a number of seconds of at least 0.1, not infinity or NaN"),
    ("IDENTITY_BACKUP_POLL_SECONDS", "soon", "must be a number of seconds, not 'soon'"),
    ("IDENTITY_DID_NAMESPACE", "Acme", "must be lower-case letters and digits, not 'Acme'"),
    ("GUNICORN_THREADS", "many", "must be a whole number, not 'many'"),
])
def test_a_value_out_of_its_bounds_is_named_with_them(name, raw, words):
    with pytest.raises(SettingsError) as raised:
        settings_from_env({name: raw})
    assert raised.value.problems == [f"{name} {words}"]


def test_the_pool_follows_the_threads_unless_set():
    assert settings_from_env({})["IDENTITY_DB_POOL_SIZE"] == 5
    assert settings_from_env({"GUNICORN_THREADS": "20"})["IDENTITY_DB_POOL_SIZE"] == 20
    assert settings_from_env({"GUNICORN_THREADS": "20", "IDENTITY_DB_POOL_SIZE": "3"})["IDENTITY_DB_POOL_SIZE"] == 3
    assert "GUNICORN_THREADS" not in settings_from_env({})


def test_the_key_file_is_read_and_only_one_of_key_and_file_may_be_set(tmp_path):
    path = tmp_path / "backup.key"
    path.write_text("# a comment\nnot a key\n")
    with pytest.raises(SettingsError) as raised:
        settings_from_env({"IDENTITY_BACKUP_ENCRYPTION_KEY_FILE": str(path)})
    assert raised.value.problems[0].startswith("IDENTITY_BACKUP_ENCRYPTION_KEY_FILE names a file that does not hold "
                                               "an age secret key")
    assert "not a key" not in str(raised.value)
    with pytest.raises(SettingsError, match="IDENTITY_BACKUP_ENCRYPTION_KEY and IDENTITY_BACKUP_ENCRYPTION_KEY_FILE "
                                            "are both set; set one of them"):
        settings_from_env({"IDENTITY_BACKUP_ENCRYPTION_KEY": "x", "IDENTITY_BACKUP_ENCRYPTION_KEY_FILE": str(path)})


def run(command, **variables):
    env = {**os.environ, "DATABASE_URL": "sqlite://", **variables}
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)


def test_flask_stops_on_wrong_values_with_the_message_and_no_traceback():
    result = run([str(BIN / "flask"), "--app", "app", "keys", "list"],
                 IDENTITY_KEY_CACHE_SECONDS="abc", IDENTITY_RATELIMIT_READ="lots")
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "Error: settings that cannot be read; fix them in the environment, then start the server (or run the "
        "command) again:",
        "  IDENTITY_KEY_CACHE_SECONDS must be a whole number, not 'abc'",
        "  IDENTITY_RATELIMIT_READ must be a rate limit such as 120/minute, not 'lots'",
    ], result.stderr
    assert "Traceback" not in result.stdout + result.stderr


def test_gunicorn_stops_before_any_worker_on_a_wrong_value_with_one_line():
    result = run([str(BIN / "gunicorn"), "-c", "gunicorn.conf.py", "app:app"],
                 PORT=str(free_port()), IDENTITY_SIWE_DOMAIN="https://identity.example.com")
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: IDENTITY_SIWE_DOMAIN must be the host users sign in to"), \
        result.stderr
    assert lines[0].endswith("; fix it in the environment, then start the server (or run the command) again.")
    assert "Booting worker" not in result.stdout + result.stderr


def test_gunicorn_names_its_own_setting_that_is_not_a_number():
    result = run([str(BIN / "gunicorn"), "-c", "gunicorn.conf.py", "app:app"], PORT="eighty")
    assert result.returncode == 1
    assert result.stderr.strip() == ("Error: PORT must be a whole number, not 'eighty'; fix it in the environment, "
                                     "then start the server (or run the command) again."), result.stderr
