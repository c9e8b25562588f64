"""The files the command line writes and opens: one rule for a PATH that exists (backup, identities export and
identities snapshot all refuse it unless --overwrite), and no empty SQLite file left behind where DATABASE_URL
names one that does not exist."""

import sqlite3

import pytest

from identity import seed
from tests.common.apps import make_app
from tests.common.live import flask_cli


def write_command(name, path):
    return {"backup": ["backup", str(path)], "export": ["identities", "export", str(path)],
            "snapshot": ["identities", "snapshot", str(path)]}[name]


def refuses_an_existing_file_unless_told_to_overwrite(app, tmp_path, command):
    seed.create_identity(app, "Written out")
    out = tmp_path / "out"  # beside the test's database, a folder of its own
    out.mkdir()
    existing = out / "existing"
    existing.write_bytes(b"keep me")
    runner = app.test_cli_runner()

    refused = runner.invoke(args=write_command(command, existing))

    assert refused.exit_code == 1 and "Traceback" not in refused.output
    assert "exists already" in refused.output and "--overwrite" in refused.output
    assert existing.read_bytes() == b"keep me"
    assert sorted(path.name for path in out.iterdir()) == ["existing"]  # no partial file left either

    replaced = runner.invoke(args=[*write_command(command, existing), "--overwrite"])

    assert replaced.exit_code == 0, replaced.output
    assert existing.read_bytes() != b"keep me" and existing.stat().st_size > 0
    written = runner.invoke(args=write_command(command, out / "new"))  # a new name needs no flag
    assert written.exit_code == 0, written.output
    assert (out / "new").stat().st_size > 0


@pytest.mark.parametrize("command", ["export", "snapshot"])
def test_export_and_snapshot_refuse_an_existing_file_unless_told_to_overwrite(app, tmp_path, command):
    refuses_an_existing_file_unless_told_to_overwrite(app, tmp_path, command)


@pytest.mark.sqlite_only
def test_backup_refuses_an_existing_file_unless_told_to_overwrite(backend, app, tmp_path):
    refuses_an_existing_file_unless_told_to_overwrite(app, tmp_path, "backup")


@pytest.fixture
def hollow(tmp_path):
    """A file labelled as a database of this service that is not one (restore refuses it)."""
    path = tmp_path / "hollow.db"
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE alembic_version (version_num VARCHAR(32) PRIMARY KEY)")
        connection.execute("INSERT INTO alembic_version VALUES ('0001')")
        connection.execute("CREATE TABLE identity_changes (seq INTEGER PRIMARY KEY AUTOINCREMENT)")
        connection.execute("CREATE TABLE identities (identity_id TEXT)")
    connection.close()
    return path


@pytest.mark.sqlite_only
@pytest.mark.parametrize("args", [
    ["keys", "list"], ["keys", "create", "--wallet", "0x" + "1" * 40], ["check-database"], ["mirrors", "list"],
    ["identities", "export", "{out}/out.jsonl"], ["identities", "snapshot", "{out}/out.car"], ["backup", "{out}/copy.db"],
    ["db", "copy", "--to", "sqlite:///{out}/target.db"], ["restore", "{hollow}"],
], ids=lambda args: " ".join(args[:2]))
def test_a_command_given_an_sqlite_file_that_does_not_exist_creates_none(backend, tmp_path, hollow, args):
    out = tmp_path / "out"
    out.mkdir()
    missing = tmp_path / "missing" / "identity.db"
    missing.parent.mkdir()
    app = make_app(missing)
    result = app.test_cli_runner().invoke(args=[arg.format(out=out, hollow=hollow) for arg in args])
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert not missing.exists() and list(missing.parent.iterdir()) == []
    assert list(out.iterdir()) == []
    if args[0] != "restore":  # restore into no database is allowed; this one refuses the file it was given
        assert f"there is no SQLite database at {missing}" in result.output and "db upgrade" in result.output


@pytest.mark.sqlite_only
def test_check_database_connection_only_on_a_new_sqlite_file_says_db_upgrade_creates_it(backend, tmp_path):
    missing = tmp_path / "identity.db"
    result = make_app(missing).test_cli_runner().invoke(args=["check-database", "--connection-only"])
    assert result.exit_code == 0, result.output
    assert "db upgrade" in result.output and not missing.exists()


def test_db_copy_to_an_sqlite_file_that_does_not_exist_creates_none(database_url, tmp_path):
    for target in (tmp_path / "target.db", tmp_path / "nowhere" / "target.db"):
        result = make_app(database_url).test_cli_runner().invoke(args=["db", "copy", "--to", f"sqlite:///{target}"])
        assert result.exit_code == 1 and "Traceback" not in result.output, result.output
        assert f"no SQLite database at {target}" in result.output and "db upgrade" in result.output
        assert not target.exists()
    flask_cli(f"sqlite:///{tmp_path / 'target.db'}", "db", "upgrade")  # then the copy goes through
    result = make_app(database_url).test_cli_runner().invoke(args=["db", "copy", "--to", f"sqlite:///{tmp_path / 'target.db'}"])
    assert result.exit_code == 0, result.output
