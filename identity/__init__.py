"""The Identity service: a Flask application that stores and serves Identity records."""

import os

MIGRATIONS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "storage", "migrations")


def create_app(config=None):
    """Build the app: settings from the environment, then `config` (a mapping) on top."""
    # Imported here rather than at the top: the package's pytest plugin (identity.pytest_plugin) is
    # loaded by every pytest run in an environment that has the package installed, and a run that
    # does not use it must not pay for importing Flask, SQLAlchemy and Alembic.
    from flask import Flask
    from flask_migrate.cli import db as migrate_commands

    from . import background
    from .cli import backup, check_database, copy_database, identities, keys, webhooks
    from .config import database_url, engine_options, settings_from_env
    from .server.cork import WholeResponses
    from .storage.database import db, migrate, tune_sqlite, wait_for_writes_in_turn
    from .web import blp, docs, finish, limits, logs, metrics
    from .web import json_provider as encoding
    from .web.problems import ProblemApi, register_error_handlers
    from .web.requests import Request

    app = Flask(__name__, instance_relative_config=True)
    app.request_class = Request
    encoding.init_app(app)
    app.config.from_mapping(settings_from_env())
    if config:
        app.config.update(config)
        if config.get("DATABASE_URL"):
            app.config["SQLALCHEMY_DATABASE_URI"] = database_url(config["DATABASE_URL"])
    app.config.setdefault("SQLALCHEMY_ENGINE_OPTIONS", engine_options(app.config))

    # First, so that nothing logs before the log lines are JSON.
    logs.init_app(app)
    db.init_app(app)
    with app.app_context():
        if db.engine.dialect.name == "sqlite":
            tune_sqlite(db.engine, app.config["IDENTITY_SQLITE_BUSY_TIMEOUT_MS"])
            wait_for_writes_in_turn(app)
    migrate.init_app(app, db, directory=MIGRATIONS)

    api = ProblemApi(app, spec_kwargs=docs.spec_kwargs())
    api.register_default_problem()
    docs.init_app(app, api)
    api.register_blueprint(blp)
    register_error_handlers(app)
    metrics.init_app(app)
    limits.init_app(app)
    finish.init_app(app)
    app.cli.add_command(keys)
    app.cli.add_command(backup)
    app.cli.add_command(check_database)
    app.cli.add_command(identities)
    app.cli.add_command(webhooks)
    background.init_app(app)
    # `flask db copy` beside Flask-Migrate's own `db` commands (its group is the one `flask db` runs).
    migrate_commands.add_command(copy_database)
    # Under gunicorn, a response of known length leaves in one TCP segment, not two (identity/segments.py).
    app.wsgi_app = WholeResponses(app.wsgi_app)
    return app
