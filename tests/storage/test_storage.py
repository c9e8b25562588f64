"""Storage: the same migrations on SQLite and PostgreSQL, exact big integers, pooling, the default location."""

import sqlite3
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from flask_migrate import downgrade, upgrade
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import IntegrityError

from identity import create_app
from identity.storage import MIGRATIONS
from identity.storage.database import db
from identity.storage.models import MAX_UINT256, Identity, User
from tests.common.apps import make_app
from tests.common.live import flask_cli

TABLES = {"users", "api_keys", "identities", "alembic_version"}


@pytest.mark.sqlite_only
def test_sqlite_runs_in_wal_with_foreign_keys_and_a_busy_timeout(app):
    with app.app_context():
        assert db.session.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        assert db.session.execute(text("PRAGMA foreign_keys")).scalar() == 1
        assert db.session.execute(text("PRAGMA busy_timeout")).scalar() == app.config["IDENTITY_SQLITE_BUSY_TIMEOUT_MS"]


@pytest.mark.sqlite_only
def test_sqlite_hands_out_the_connection_used_last(app):
    """Its page cache is the likeliest to be valid still (identity.config.engine_options)."""
    with app.app_context():
        first, second = db.engine.connect(), db.engine.connect()
        used_last = second.connection.dbapi_connection
        first.close()
        second.close()
        with db.engine.connect() as again:
            assert again.connection.dbapi_connection is used_last


def _not_a_search_index(name, type_, parent_names):
    # The search indexes (migration 0002) are the database's own kind, which no model describes:
    # SQLite FTS5 tables and their shadow tables, PostgreSQL GIN indexes on an expression or opclass.
    return not (name or "").startswith("identity_search")


def test_the_migration_builds_exactly_the_models_schema(app):
    with app.app_context(), db.engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"include_name": _not_a_search_index})
        differences = compare_metadata(context, db.metadata)
    assert differences == []


def test_migrations_upgrade_an_empty_database_and_downgrade_it_again(empty_database_url):
    app = make_app(empty_database_url)
    with app.app_context():
        upgrade()
        assert TABLES <= set(inspect(db.engine).get_table_names())
        downgrade(revision="base")
        assert set(inspect(db.engine).get_table_names()) <= {"alembic_version"}
        upgrade()
        assert TABLES <= set(inspect(db.engine).get_table_names())
        db.engine.dispose()


@pytest.mark.sqlite_only
def test_migration_creates_the_sqlite_file_on_first_upgrade(empty_database_url):
    app = make_app(empty_database_url)
    with app.app_context():
        upgrade()
        db.engine.dispose()
    with sqlite3.connect(make_url(empty_database_url).database) as connection:
        tables = {name for (name,) in connection.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert TABLES <= tables


@pytest.mark.postgresql_only
def test_nodes_that_upgrade_at_once_take_turns(empty_database_url):
    with ThreadPoolExecutor(max_workers=3) as pool:
        list(pool.map(lambda _: flask_cli(empty_database_url, "db", "upgrade"), range(3)))  # each must succeed
    engine = create_engine(empty_database_url)
    with engine.connect() as connection:
        head = ScriptDirectory(MIGRATIONS).get_current_head()
        assert connection.execute(text("SELECT version_num FROM alembic_version")).scalars().all() == [head]
    engine.dispose()


def test_default_database_is_a_file_in_the_instance_folder(monkeypatch):
    monkeypatch.delenv("DATABASE_URL", raising=False)
    app = create_app()
    with app.app_context():
        location = db.engine.url.database
        db.engine.dispose()
    assert location.startswith(app.instance_path)


@pytest.mark.postgresql_only
def test_pool_size_overflow_and_timeout_are_settings_and_a_full_pool_is_503(database_url, monkeypatch):
    monkeypatch.setenv("IDENTITY_DB_POOL_SIZE", "1")
    monkeypatch.setenv("IDENTITY_DB_MAX_OVERFLOW", "0")
    monkeypatch.setenv("IDENTITY_DB_POOL_TIMEOUT", "1")
    app = make_app(database_url)
    with app.app_context():
        held = db.engine.connect()  # the pool's only connection
        started = time.monotonic()
        try:
            response = app.test_client().get("/readyz")
        finally:
            held.close()
            db.engine.dispose()
    assert response.status_code == 503
    assert response.mimetype == "application/problem+json"
    assert 1 <= time.monotonic() - started < 5  # IDENTITY_DB_POOL_TIMEOUT, not the default 10 s


def test_bigint_columns_hold_2_256_minus_1_exactly(app):
    with app.app_context():
        user = User(wallet="0x" + "2" * 40)
        db.session.add(Identity(identity_id="x", content_id="c", identity_hash="0x", display_name="n", creator=user,
                                vault_id=MAX_UINT256, assets_sum=MAX_UINT256 - 1, conviction_price=10**77))
        db.session.commit()
        db.session.expunge_all()
        stored = db.session.execute(db.select(Identity.vault_id, Identity.assets_sum, Identity.conviction_price)).one()
    assert tuple(stored) == (MAX_UINT256, MAX_UINT256 - 1, 10**77)


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
    with app.app_context():
        db.session.add(Identity(identity_id="x", content_id="c", identity_hash="0x", display_name="n", creator_id="nobody"))
        with pytest.raises(IntegrityError):
            db.session.commit()
