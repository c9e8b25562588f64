"""Storage: SQLite settings, the migration, exact big integers, the default location."""

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from flask_migrate import upgrade
from sqlalchemy import text

from identity import create_app
from identity.extensions import db
from identity.models import MAX_UINT256, Identity, User


def test_sqlite_runs_in_wal_with_foreign_keys_and_a_busy_timeout(app):
    with app.app_context():
        assert db.session.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        assert db.session.execute(text("PRAGMA foreign_keys")).scalar() == 1
        assert db.session.execute(text("PRAGMA busy_timeout")).scalar() == app.config["IDENTITY_SQLITE_BUSY_TIMEOUT_MS"]


def test_the_migration_builds_exactly_the_models_schema(app):
    with app.app_context(), db.engine.connect() as connection:
        differences = compare_metadata(MigrationContext.configure(connection), db.metadata)
    assert differences == []


def test_migration_creates_the_database_on_first_upgrade(tmp_path):
    path = tmp_path / "fresh.db"
    app = create_app({"DATABASE_URL": f"sqlite:///{path}"})
    with app.app_context():
        upgrade()
        tables = set(db.session.execute(text("SELECT name FROM sqlite_master WHERE type='table'")).scalars())
        db.engine.dispose()
    assert {"users", "api_keys", "identities", "alembic_version"} <= tables


def test_default_database_is_a_file_in_the_instance_folder(monkeypatch):
    monkeypatch.delenv("DATABASE_URL", raising=False)
    app = create_app()
    with app.app_context():
        location = db.engine.url.database
        db.engine.dispose()
    assert location.startswith(app.instance_path)


def test_uint256_refuses_values_outside_its_range(app):
    with app.app_context():
        user = User(wallet="0x" + "1" * 40)
        for bad in (MAX_UINT256 + 1, -1):
            db.session.add(Identity(identity_id=f"x{bad}", content_id=f"c{bad}", identity_hash="0x", display_name="n",
                                    creator=user, vault_id=bad))
            with pytest.raises(Exception, match="outside"):
                db.session.flush()
            db.session.rollback()


def test_foreign_keys_are_enforced(app):
    from sqlalchemy.exc import IntegrityError

    with app.app_context():
        db.session.add(Identity(identity_id="x", content_id="c", identity_hash="0x", display_name="n", creator_id="nobody"))
        with pytest.raises(IntegrityError):
            db.session.commit()
