"""The Identity service: a Flask application that stores and serves Identity records."""

def create_app(config=None):
    """Build the app: settings from the environment, then `config` (a mapping) on top."""
    # Imported here rather than at the top: the package's pytest plugin (identity.pytest_plugin) is loaded
    # by every pytest run in an environment that has the package installed, and a run that does not use
    # it must not pay for importing Flask, SQLAlchemy and Alembic.
    from flask import Flask

    from . import background, cli, console, storage, web
    from . import config as settings
    from .core import keys
    from .web import logs

    app = Flask(__name__, instance_relative_config=True)
    settings.init_app(app, config)
    logs.init_app(app)  # first, so that nothing logs before the log lines are JSON
    storage.init_app(app)
    keys.init_app(app)
    web.init_app(app)
    console.init_app(app)
    cli.init_app(app)
    background.init_app(app)
    return app
