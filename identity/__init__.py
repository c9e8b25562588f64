"""The Identity service: a Flask application that stores and serves Identity records."""

import os

from flask import Flask

from . import request_id
from .config import engine_options, settings_from_env
from .errors import ProblemApi, register_error_handlers
from .extensions import db, migrate, tune_sqlite

MIGRATIONS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "migrations")


def create_app(config=None):
    """Build the app: settings from the environment, then `config` (a mapping) on top."""
    app = Flask(__name__, instance_relative_config=True)
    app.config.from_mapping(settings_from_env())
    if config:
        app.config.update(config)
        if config.get("DATABASE_URL"):
            app.config["SQLALCHEMY_DATABASE_URI"] = config["DATABASE_URL"]
    app.config.setdefault("SQLALCHEMY_ENGINE_OPTIONS", engine_options(app.config))

    db.init_app(app)
    with app.app_context():
        if db.engine.dialect.name == "sqlite":
            tune_sqlite(db.engine, app.config["IDENTITY_SQLITE_BUSY_TIMEOUT_MS"])
    migrate.init_app(app, db, directory=MIGRATIONS)

    from .api import blp
    from .cli import keys

    api = ProblemApi(app)
    api.spec.components.security_scheme("ApiKeyAuth", {"type": "apiKey", "in": "header", "name": "x-api-key"})
    api.register_blueprint(blp)
    register_error_handlers(app)
    request_id.init_app(app)
    app.cli.add_command(keys)
    return app
