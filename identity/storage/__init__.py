"""The database: its tables (models), the session's ways of reading and writing (database), the schema's
migrations, whether it can serve (readiness), and leases."""

import os

MIGRATIONS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "migrations")


def init_app(app):
    """Bind the database and its migrations to `app`; on SQLite, its settings and the writers' lock."""
    from .database import db, migrate, tune_sqlite, wait_for_writes_in_turn

    db.init_app(app)
    with app.app_context():
        if db.engine.dialect.name == "sqlite":
            tune_sqlite(db.engine, app.config["IDENTITY_SQLITE_BUSY_TIMEOUT_MS"])
            wait_for_writes_in_turn(app)
    migrate.init_app(app, db, directory=MIGRATIONS)
