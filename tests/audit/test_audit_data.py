"""The data commands in the audit log: `backup` and `restore` (SQLite), `db copy` (SQLite and PostgreSQL), each
an entry of its own via cli; the copy carries the log, whose chain verifies in the target too."""

from sqlalchemy.engine import make_url

from tests.common.apps import USER_WALLET, make_app, migrate
from tests.common.audit import entries, only, verified


def invoke(runner, *args):
    result = runner.invoke(args=list(args))
    assert result.exit_code == 0, result.output
    return result


def test_backup_and_restore_are_entries_and_the_restored_log_verifies(app, runner, database_path, issue_key, tmp_path):
    issue_key(USER_WALLET)
    backup = tmp_path / "backup.db"
    invoke(runner, "backup", str(backup))
    entry = only(app, "database.backup")
    assert entry["actor"]["via"] == "cli" and entry["after"]["path"] == str(backup.resolve())
    invoke(runner, "restore", str(backup))
    # The restored log is the backup's (the backup's own entry came after it), and then the restore's.
    assert [entry["action"] for entry in entries(app)] == ["key.issue", "database.restore"]
    restored = only(app, "database.restore")
    assert restored["after"]["path"] == str(backup) and restored["after"]["identities"] == 0
    assert verified(app).finding is None


def test_db_copy_is_an_entry_naming_the_target_without_its_password_and_the_copy_verifies(
        app, runner, issue_key, empty_database_url):
    migrate(empty_database_url)
    issue_key(USER_WALLET)
    target = make_url(empty_database_url)
    if target.get_backend_name() == "postgresql":
        target = target.set(password="never-in-the-log")
    url = target.render_as_string(hide_password=False)
    invoke(runner, "db", "copy", "--to", url)
    entry = only(app, "database.copy")
    assert "never-in-the-log" not in str(entries(app)) and entry["after"]["tables"] > 0
    assert entry["target"]["id"] == target.render_as_string(hide_password=True)
    copied = make_app(empty_database_url)
    assert [entry["action"] for entry in entries(copied)] == ["key.issue"]
    assert verified(copied).finding is None
