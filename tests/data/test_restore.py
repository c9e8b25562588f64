"""A restore keeps the feed's promise (the contract's "Command line"): no seq, and so no webhook-id, ever names
two different entries, and no follower is left waiting for numbers that will not come.

Each backend's procedure is run as docs/backup.md gives it, from its own shell blocks: `flask backup` and
`flask restore` on SQLite; pg_dump, pg_restore and the step that raises the sequence on PostgreSQL (Debian's
postgresql-client). Around it: real gunicorn, a long poll waiting across the restore, and a real webhook
receiver.
"""

import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest
import requests

from tests.common.apps import make_app
from tests.common.live import BIN, ROOT, LiveServer, flask_cli
from tests.common.pasted import DOCS, Shell, blocks, project_folder
from tests.common.restores import assert_no_seq_names_two_entries, create, entries, let_go, restore_under_clients


def procedure(backend):
    """docs/backup.md's blocks for `backend`: (the backup, taken while serving; the restore, service stopped)."""
    backup, restore = [block.text for block in blocks(DOCS / "backup.md") if backend in block.marks]
    return backup, restore


@pytest.fixture
def shell(database_url, tmp_path):
    """A shell in the project folder where DATABASE_URL names the test's database, as an operator's does."""
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "DATABASE_URL": database_url}
    with Shell(env, project_folder(tmp_path / "project")) as shell:
        yield shell


def test_a_restore_after_later_writes_never_gives_one_seq_to_two_entries(app, database_url, admin_key, shell, backend):
    """3 identities, a backup, 3 more, a restore, one more: the last one's entry is numbered above the 6th, so
    the poller that waited at the 6th gets it, and the webhook delivers it under a webhook-id never used."""
    backup, restore = procedure(backend)
    seen = restore_under_clients(app, database_url, admin_key, lambda: shell.run(backup, "docs/backup.md's backup"),
                                 lambda: shell.run(restore, "docs/backup.md's restore"))
    assert_no_seq_names_two_entries(seen)


@pytest.mark.sqlite_only
def test_a_restore_without_the_replaced_database_tells_followers_beyond_its_end(app, database_url, admin_key, tmp_path):
    """The old database lost: nothing says how far it numbered, so a follower beyond the backup's end gets a 409
    that names the feed's end, on a poll, a long poll and a stream, instead of waiting for nothing."""
    database = Path(database_url.removeprefix("sqlite:///"))
    server = LiveServer(database_url, workers=1).start()
    try:
        create(server, admin_key, "In the backup")
        backup_end = entries(server, admin_key)[-1]["seq"]
        flask_cli(database_url, "backup", str(tmp_path / "backup.db"))
        create(server, admin_key, "Lost with the disk")
        end = entries(server, admin_key)[-1]["seq"]
    finally:
        server.stop()
    let_go(app)
    database.unlink()
    restored = run_flask(database_url, "restore", str(tmp_path / "backup.db"))
    assert restored.returncode == 0, restored.stderr
    assert "409" in restored.stderr and "--issued-up-to" in restored.stderr
    server.start()
    try:
        headers = {"x-api-key": admin_key}
        answers = [
            requests.get(f"{server.url}/changes", params={"after": end, **params}, headers=headers, timeout=10)
            for params in ({}, {"feed": "longpoll", "timeout": 30_000}, {"feed": "eventsource"})
        ]
    finally:
        server.stop()
    for answer in answers:
        assert answer.status_code == 409
        assert answer.json()["feed_end"] == backup_end
        assert "after=0" in answer.json()["detail"]


@pytest.mark.sqlite_only
def test_a_restore_without_the_replaced_database_numbers_above_the_seq_the_operator_gives(app, database_url, admin_key,
                                                                                         tmp_path):
    """A receiver logged webhook-id ..._5: given --issued-up-to 5, the next entry is 6, a number it never saw."""
    database = Path(database_url.removeprefix("sqlite:///"))
    server = LiveServer(database_url, workers=1).start()
    try:
        create(server, admin_key, "In the backup")
        flask_cli(database_url, "backup", str(tmp_path / "backup.db"))
        for n in range(3):
            create(server, admin_key, f"Lost with the disk {n}")
        end = entries(server, admin_key)[-1]["seq"]
    finally:
        server.stop()
    let_go(app)
    database.unlink()
    restored = run_flask(database_url, "restore", str(tmp_path / "backup.db"), "--issued-up-to", str(end))
    assert restored.returncode == 0, restored.stderr
    assert f"The next entry of the feed is seq {end + 1}" in restored.stderr
    server.start()
    try:
        later = create(server, admin_key, "After the restore")
        waited = requests.get(f"{server.url}/changes", params={"after": end, "feed": "longpoll", "timeout": 5000},
                              headers={"x-api-key": admin_key}, timeout=10)
    finally:
        server.stop()
    assert [(entry["seq"], entry["identity_id"]) for entry in waited.json()["data"]] == [(end + 1, later)]


def run_flask(database_url, *args):
    env = {**os.environ, "DATABASE_URL": database_url}
    return subprocess.run([str(BIN / "flask"), "--app", "app", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)


def sequence(path):
    with sqlite3.connect(path) as connection:
        return connection.execute("SELECT seq FROM sqlite_sequence WHERE name = 'identity_changes'").fetchone()[0]


@pytest.fixture
def backed_up(app, database_url, admin_key, tmp_path):
    """A database with an identity in its backup (tmp_path / "backup.db") and one after it."""
    server = LiveServer(database_url, workers=1).start()
    try:
        create(server, admin_key, "In the backup")
        assert run_flask(database_url, "backup", str(tmp_path / "backup.db")).returncode == 0
        create(server, admin_key, "After the backup")
    finally:
        server.stop()
    let_go(app)
    return tmp_path / "backup.db"


@pytest.mark.sqlite_only
def test_restore_refuses_while_another_process_has_the_database_open(database_url, backed_up):
    database = database_url.removeprefix("sqlite:///")
    before = Path(database).read_bytes()
    server = LiveServer(database_url, workers=1).start()
    try:
        requests.get(f"{server.url}/readyz", timeout=10)  # its workers now hold the file open
        result = run_flask(database_url, "restore", str(backed_up))
    finally:
        server.stop()
    assert result.returncode == 1
    assert "open in another process" in result.stderr and "stop every process" in result.stderr
    assert "Traceback" not in result.stderr
    assert Path(database).read_bytes() == before


@pytest.mark.sqlite_only
@pytest.mark.parametrize("damage", ["not a database", "a torn page"])
def test_restore_refuses_a_damaged_backup_and_leaves_the_database_as_it_was(database_url, backed_up, damage):
    database = database_url.removeprefix("sqlite:///")
    if damage == "not a database":
        backed_up.write_bytes(b"hello")
    else:  # a page in the middle overwritten, as a bad disk or a partial copy leaves it
        with open(backed_up, "r+b") as file:
            file.seek(4096 * 3)
            file.write(b"\xff" * 4096)
    before = sorted(path.name for path in Path(database).parent.iterdir())
    result = run_flask(database_url, "restore", str(backed_up))
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert ("cannot be read as an SQLite database" in result.stderr or "failed its integrity check" in result.stderr), result.stderr
    assert sorted(path.name for path in Path(database).parent.iterdir()) == before  # no copy left behind
    check = run_flask(database_url, "check-database")
    assert check.returncode == 0, check.stderr


@pytest.mark.sqlite_only
def test_a_restore_over_a_crashed_service_replays_nothing_of_its_write_ahead_log(app, database_url, admin_key, tmp_path):
    """The service killed outright leaves its -wal and -shm, holding writes made after the backup: none of them
    may be replayed over the restored file, and the sequence still counts them."""
    database = database_url.removeprefix("sqlite:///")
    server = LiveServer(database_url, workers=None).start()
    try:
        kept = create(server, admin_key, "In the backup")
        assert run_flask(database_url, "backup", str(tmp_path / "backup.db")).returncode == 0
        lost = [create(server, admin_key, f"After the backup {n}") for n in range(5)]
        end = entries(server, admin_key)[-1]["seq"]
    finally:
        server.kill()
    assert Path(f"{database}-wal").exists()
    let_go(app)

    result = run_flask(database_url, "restore", str(tmp_path / "backup.db"))

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == database
    assert f"The next entry of the feed is seq {end + 1}" in result.stderr
    assert not Path(f"{database}-wal").exists() and not Path(f"{database}-shm").exists()
    with sqlite3.connect(database) as connection:
        assert connection.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        stored = {row[0] for row in connection.execute("SELECT identity_id FROM identities")}
    assert kept in stored and not stored & set(lost)
    assert sequence(database) == end


@pytest.mark.sqlite_only
def test_a_backup_older_than_the_code_is_restored_with_word_to_run_db_upgrade(database_url, tmp_path):
    old = tmp_path / "old.db"
    flask_cli(f"sqlite:///{old}", "db", "upgrade", "0004")
    result = run_flask(database_url, "restore", str(old))
    assert result.returncode == 0, result.stderr
    assert "revision 0004" in result.stderr and "db upgrade" in result.stderr
    assert run_flask(database_url, "check-database").returncode == 1
    flask_cli(database_url, "db", "upgrade")
    assert run_flask(database_url, "check-database").returncode == 0


@pytest.mark.sqlite_only
def test_restore_refuses_a_live_database_file_as_a_backup(database_url, tmp_path):
    live = tmp_path / "live.db"
    shutil.copy(database_url.removeprefix("sqlite:///"), live)
    Path(f"{live}-wal").write_bytes(b"")
    result = run_flask(database_url, "restore", str(live))
    assert result.returncode == 1
    assert "write-ahead log beside it" in result.stderr and "backup NEW_PATH" in result.stderr


@pytest.mark.postgresql_only
def test_restore_on_postgresql_points_to_pg_restore_and_the_sequence_step(database_url, tmp_path):
    result = run_flask(database_url, "restore", str(tmp_path / "identity.dump"))
    assert result.returncode == 1
    assert "pg_restore" in result.stderr and "docs/backup.md" in result.stderr and "sequence" in result.stderr


def head_revision(database):
    with sqlite3.connect(database) as connection:
        return connection.execute("SELECT version_num FROM alembic_version").fetchone()[0]


@pytest.mark.sqlite_only
def test_restore_refuses_a_hollow_file_labelled_with_the_current_revision_and_readyz_stays_true(
    app, database_url, admin_key, tmp_path
):
    database = Path(database_url.removeprefix("sqlite:///"))
    hollow = tmp_path / "hollow.db"
    with sqlite3.connect(hollow) as connection:  # three tables and the label: what a forger or a wrong file gives
        connection.execute("CREATE TABLE alembic_version (version_num VARCHAR(32) PRIMARY KEY)")
        connection.execute("INSERT INTO alembic_version VALUES (?)", (head_revision(database),))
        connection.execute("CREATE TABLE identity_changes (seq INTEGER PRIMARY KEY AUTOINCREMENT, identity_id TEXT)")
        connection.execute("CREATE TABLE identities (identity_id TEXT)")
    connection.close()
    let_go(app)
    before = database.read_bytes()
    folder = sorted(path.name for path in database.parent.iterdir())

    result = run_flask(database_url, "restore", str(hollow))

    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "lacks what that revision has" in result.stderr and "restore a file that `flask backup` wrote" in result.stderr
    for missing in ("users", "api_keys", "webhooks", "identities.display_name", "identity_changes.kind"):
        assert missing in result.stderr
    assert database.read_bytes() == before
    assert sorted(path.name for path in database.parent.iterdir()) == folder
    served = make_app(database_url).test_client()
    assert served.get("/readyz").status_code == 200
    assert served.get("/identities", headers={"x-api-key": admin_key}).status_code == 200


@pytest.mark.sqlite_only
def test_restore_refuses_a_backup_whose_foreign_keys_point_at_no_row(app, database_url, backed_up):
    with sqlite3.connect(backed_up) as connection:  # foreign keys off, as sqlite3 opens it: the user goes, its keys stay
        connection.execute("DELETE FROM users")
    connection.close()
    database = Path(database_url.removeprefix("sqlite:///"))
    before = database.read_bytes()
    result = run_flask(database_url, "restore", str(backed_up))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "failed its foreign key check" in result.stderr and "api_keys" in result.stderr
    assert database.read_bytes() == before


@pytest.mark.sqlite_only
def test_the_restored_file_keeps_the_replaced_databases_owner_and_mode(database_url, backed_up):
    database = Path(database_url.removeprefix("sqlite:///"))
    os.chmod(database, 0o640)
    owner = (4321, 4321) if os.geteuid() == 0 else (database.stat().st_uid, database.stat().st_gid)
    os.chown(database, *owner)
    result = run_flask(database_url, "restore", str(backed_up))
    assert result.returncode == 0, result.stderr
    restored = database.stat()
    assert oct(restored.st_mode & 0o7777) == oct(0o640)
    assert (restored.st_uid, restored.st_gid) == owner
    with sqlite3.connect(database) as connection:
        assert connection.execute("SELECT count(*) FROM identities").fetchone() == (1,)
    connection.close()
