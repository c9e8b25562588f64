"""`flask db copy --to URL`: every table into another migrated, empty database, verified; and the move
from SQLite to PostgreSQL that docs/scaling-out.md describes, served by gunicorn afterwards."""

import os
import signal
import subprocess

import pytest
import requests
from sqlalchemy import create_engine, func, select, text

from identity import seed
from identity.core import keys
from identity.data import copy as dbcopy
from identity.storage.database import db
from identity.storage.models import Change, Identity, User
from tests.common.apps import ADMIN_WALLET, OTHER_WALLET, USER_WALLET, make_app, migrate, without_last_login
from tests.common.copies import copy, rows
from tests.common.live import BIN, ROOT, LiveServer


def populate(app, client, admin_key):
    """Identities in every status, with their history; returns their ids."""
    ids = []
    for number, status in enumerate(("complete", "pending", "removed", "error", "complete")):
        identity = seed.create_identity(app, f"Identity {number}", description=f"about {number}", creator=USER_WALLET)
        response = client.patch(f"/identity/{identity['identity_id']}", json={"status": status, "num_positions": number},
                                headers={"x-api-key": admin_key})
        assert response.status_code == 200, response.text
        ids.append(identity["identity_id"])
    return ids






def test_copy_brings_every_table_and_the_feed_continues_after_the_last_number(app, client, admin_key, target_url, database_url):
    populate(app, client, admin_key)
    result = copy(app, target_url)
    assert result.exit_code == 0, result.output
    assert "counts and checksums verified" in result.stdout
    source, target = rows(database_url), rows(target_url)
    # The source's audit log ends with the copy's own entry, written once the copy was done.
    assert source["audit_entries"][-1].action == "database.copy"
    assert target["audit_entries"] == source["audit_entries"][:-1]
    assert target["audit_chain"][0].head_hash == source["audit_entries"][-1].prev_hash
    for table in ("audit_entries", "audit_chain"):
        del source[table], target[table]
    assert target == source
    last = rows(database_url)["identity_changes"][-1].seq
    moved = make_app(target_url)
    created = seed.create_identity(moved, "After the move")
    with moved.app_context():
        entry = db.session.execute(select(Change).where(Change.identity_id == created["identity_id"])).scalar_one()
        counts = db.session.execute(select(func.count()).select_from(Identity)).scalar_one()
        db.engine.dispose()
    assert entry.seq == last + 1
    assert counts == 6


def test_a_table_that_a_migration_made_without_a_model_comes_along(app, client, admin_key, database_url, target_url):
    engines = [create_engine(database_url), create_engine(target_url)]
    for engine in engines:
        with engine.begin() as connection:
            connection.execute(text("CREATE TABLE extra_notes (note TEXT NOT NULL, weight INTEGER)"))
    try:
        with engines[0].begin() as connection:
            connection.execute(text("INSERT INTO extra_notes VALUES ('b', 2), ('a', 1), ('a', NULL)"))
        populate(app, client, admin_key)
        result = copy(app, target_url)
        assert result.exit_code == 0, result.output
        assert "extra_notes: 3 rows, checksum equal" in result.stderr
        with engines[1].connect() as connection:
            notes = [tuple(row) for row in connection.execute(text("SELECT note, weight FROM extra_notes"))]
        assert sorted(notes, key=repr) == sorted([("a", None), ("a", 1), ("b", 2)], key=repr)
    finally:
        for engine in engines:
            with engine.begin() as connection:
                connection.execute(text("DROP TABLE extra_notes"))
            engine.dispose()


def test_copy_refuses_a_target_that_is_not_migrated(app, empty_database_url):
    result = copy(app, empty_database_url)
    assert result.exit_code == 1
    assert "not migrated" in result.output and "flask --app app db upgrade" in result.output
    assert "Traceback" not in result.output


def test_copy_refuses_a_target_that_holds_data_and_leaves_it_alone(app, client, admin_key, target_url):
    populate(app, client, admin_key)
    other = make_app(target_url)
    seed.create_identity(other, "Already here")
    result = copy(app, target_url)
    assert result.exit_code == 1
    assert "not empty" in result.output
    assert [row.display_name for row in rows(target_url)["identities"]] == ["Already here"]
    with other.app_context():
        db.engine.dispose()


def test_copy_refuses_an_unusable_url(app):
    result = copy(app, "nosuchdb://x")
    assert result.exit_code == 1
    assert "--to is not a database URL" in result.output


def test_ctrl_c_during_a_copy_leaves_the_target_as_it_was(app, client, admin_key, target_url, ctrl_c):
    populate(app, client, admin_key)
    before = rows(target_url)

    def interrupt(done):
        os.kill(os.getpid(), signal.SIGINT)  # a real Ctrl-C, once the first rows are written

    with app.app_context(), pytest.raises(KeyboardInterrupt):
        dbcopy.copy_database(db.engine, target_url, interrupt)
    assert rows(target_url) == before


@pytest.mark.postgresql_only
def test_move_from_sqlite_to_postgresql_as_docs_scaling_out_describes(backend, tmp_path, postgres_server):
    """Keys of every kind, identities in every status, history and the cursor secret move; gunicorn serves them."""
    sqlite_url = f"sqlite:///{tmp_path / 'identity.db'}"
    migrate(sqlite_url)
    app = make_app(sqlite_url)
    client = app.test_client()
    issued = {"admin": seed.issue_key(app, ADMIN_WALLET, "Admin"), "user": seed.issue_key(app, USER_WALLET, "User")}
    revoked = seed.issue_key(app, OTHER_WALLET, "User")
    with app.app_context():
        keys.revoke_key(wallet=OTHER_WALLET)
        rotated, _ = keys.rotate_key(keys.all_keys()[-1].id)  # the first Admin key, rotated out
        issued["rotated-in"] = rotated
        issued["admin-2"] = keys.issue_key(ADMIN_WALLET)[0]
    issued.pop("admin")
    ids = populate(app, client, issued["admin-2"])
    admin = {"x-api-key": issued["admin-2"]}
    before = {identity_id: client.get(f"/identity/{identity_id}", headers=admin) for identity_id in ids}
    first_page = client.get("/identities?limit=2", headers=admin).json
    second_page = client.get(f"/identities?cursor={first_page['next']}", headers=admin).json
    feed = client.get("/changes?after=0&limit=1000", headers=admin).json
    with app.app_context():
        users = db.session.execute(select(func.count()).select_from(User)).scalar_one()
        db.engine.dispose()

    postgres_url = postgres_server.create_database()
    env = {**os.environ, "DATABASE_URL": sqlite_url}
    try:
        upgraded = subprocess.run([str(BIN / "flask"), "--app", "app", "db", "upgrade"], cwd=ROOT,
                                  env={**env, "DATABASE_URL": postgres_url}, capture_output=True, text=True, timeout=120)
        assert upgraded.returncode == 0, upgraded.stderr
        moved = subprocess.run([str(BIN / "flask"), "--app", "app", "db", "copy", "--to", postgres_url], cwd=ROOT,
                               env=env, capture_output=True, text=True, timeout=300)
        assert moved.returncode == 0, moved.stderr
        server = LiveServer(postgres_url, workers=2).start()
        try:
            session = requests.Session()
            for name, key in issued.items():
                assert session.get(server.url + "/identities", headers={"x-api-key": key}, timeout=30).status_code == 200, name
            assert session.get(server.url + "/identities", headers={"x-api-key": revoked}, timeout=30).status_code == 401
            for identity_id, answer in before.items():
                now = session.get(f"{server.url}/identity/{identity_id}", headers=admin, timeout=30)
                assert now.status_code == answer.status_code
                if answer.status_code == 200:
                    assert without_last_login(now.json()) == without_last_login(answer.json)
            continued = session.get(f"{server.url}/identities?cursor={first_page['next']}", headers=admin, timeout=30)
            assert continued.status_code == 200
            assert [i["identity_id"] for i in continued.json()["data"]] == [i["identity_id"] for i in second_page["data"]]
            assert session.get(f"{server.url}/changes?after=0&limit=1000", headers=admin, timeout=30).json() == feed
            created = session.post(server.url + "/identity", json={"display_name": "On PostgreSQL"}, headers=admin, timeout=30)
            assert created.status_code == 201, created.text
            after = session.get(f"{server.url}/changes?after={feed['next_after']}", headers=admin, timeout=30).json()
            assert [(e["seq"], e["identity_id"]) for e in after["data"]] == [(feed["next_after"] + 1, created.json()["identity_id"])]
            listed = session.get(server.url + "/identities?status=complete", headers=admin, timeout=30).json()
            assert listed["total"] == 3  # the counts the triggers keep came along
        finally:
            server.stop()
        engine = create_engine(postgres_url)
        with engine.connect() as connection:
            assert connection.execute(select(func.count()).select_from(User)).scalar_one() == users
        engine.dispose()
    finally:
        postgres_server.drop_database(postgres_url)
