"""pytest plugin: run the Identity service inside your own tests, through Flask's test client.

Installing the package registers it (entry point `pytest11`, name `identity`), so a test only
names the fixtures it wants:

- `identity_app`: an app from `create_app` on a fresh, migrated SQLite database for each test;
- `identity_client`: that app's Flask test client;
- `identity_api_key`: `identity_api_key(role="User", wallet=None) -> str` issues a real key;
- `identity_set_status`: `identity_set_status(identity_id, status, by=None) -> dict` sets a status
  (`"removed"` makes the identity answer 410 Gone), recorded in its history;
- `identity_config`: settings for `identity_app`; override this fixture to change them.

Rate limits are off in `identity_app` (budgets no test reaches), so a test may make as many requests
as it likes; an `identity_config` that sets IDENTITY_RATELIMIT_READ or IDENTITY_RATELIMIT_CREATE
turns that budget on, e.g. `{"IDENTITY_RATELIMIT_CREATE": "30/minute"}` to test a 429.

The service is imported inside the fixtures, so a test run that uses none of them pays nothing.
`pytest -p no:identity` turns the plugin off.
"""

import logging
import shutil
from contextlib import contextmanager

import pytest

_DATABASE_SETTINGS = ("DATABASE_URL", "SQLALCHEMY_DATABASE_URI")
# Rate limits off: budgets so large that no test reaches them. identity_config may set its own.
RATE_LIMITS_OFF = {"IDENTITY_RATELIMIT_READ": "1000000000/second", "IDENTITY_RATELIMIT_CREATE": "1000000000/second"}


@pytest.fixture
def identity_config():
    """Settings for `identity_app`, applied over the environment's, `TESTING = True` and rate limits off.

    Override it in your conftest.py or test module, e.g. to return
    `{"IDENTITY_DID_NAMESPACE": "acme"}`. The database is the plugin's: each test gets its own.
    """
    return {}


@pytest.fixture(scope="session")
def _identity_template_database(tmp_path_factory):
    """One database migrated once per session; each test gets a copy of the file."""
    from flask_migrate import upgrade

    from . import create_app
    from .storage.database import db

    path = tmp_path_factory.mktemp("identity-template") / "identity.db"
    app = create_app({"DATABASE_URL": f"sqlite:///{path}", "TESTING": True})
    with app.app_context(), _logging_left_as_it_was():
        upgrade()
        # Closing every connection checkpoints SQLite's WAL, so the file alone holds the schema.
        db.engine.dispose()
    return path


@pytest.fixture
def identity_app(identity_config, _identity_template_database, tmp_path_factory):
    """The Identity service's Flask app on a fresh database, migrated and seen by this test alone."""
    from . import background, create_app
    from .storage.database import db

    given = sorted(set(_DATABASE_SETTINGS) & set(identity_config))
    if given:
        pytest.fail(f"identity_config may not set {', '.join(given)}: identity_app gives each test its own database.")
    path = tmp_path_factory.mktemp("identity") / "identity.db"
    shutil.copyfile(_identity_template_database, path)
    app = create_app({"TESTING": True, **RATE_LIMITS_OFF, **identity_config, "DATABASE_URL": f"sqlite:///{path}"})
    yield app
    background.stop(app)  # the watcher of the live feed, if a long poll or stream started it
    with app.app_context():
        db.engine.dispose()


@pytest.fixture
def identity_client(identity_app):
    """The Flask test client of `identity_app`."""
    return identity_app.test_client()


@pytest.fixture
def identity_api_key(identity_app):
    """`identity_api_key(role="User", wallet=None) -> str`: issue a real key on `identity_app`.

    Without a wallet, each call makes a user with a new random wallet. The role belongs to the
    wallet's user: a second key for the same wallet with another role changes it for both.
    """
    from .seed import issue_key

    def issue(role="User", wallet=None):
        return issue_key(identity_app, wallet=wallet, role=role)

    return issue


@pytest.fixture
def identity_set_status(identity_app):
    """`identity_set_status(identity_id, status, by=None) -> dict`: set a status on `identity_app`.

    As an Admin's PATCH would: "removed" makes the identity answer 410 Gone, another status brings it
    back. Returns the identity as a dict; raises identity.seed.IdentityNotFound for an unknown id.
    """
    from .seed import set_status

    def change(identity_id, status, by=None):
        return set_status(identity_app, identity_id, status, by=by)

    return change


@contextmanager
def _logging_left_as_it_was():
    # Alembic's env.py configures logging from alembic.ini (root level, a stderr handler, levels of
    # loggers it may create), which is right for `flask db upgrade` but must not change how the test
    # run logs: every logger is put back as it was, or as new if it did not exist.
    def loggers():
        return [logging.getLogger()] + [
            logger for logger in logging.Logger.manager.loggerDict.values() if isinstance(logger, logging.Logger)
        ]

    saved = {logger: (logger.level, list(logger.handlers), logger.propagate, logger.disabled) for logger in loggers()}
    try:
        yield
    finally:
        for logger in loggers():
            level, handlers, propagate, disabled = saved.get(logger, (logging.NOTSET, [], True, False))
            logger.setLevel(level)
            logger.handlers[:] = handlers
            logger.propagate = propagate
            logger.disabled = disabled
