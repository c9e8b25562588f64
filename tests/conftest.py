"""Fixtures. Every test that touches the database runs twice: on SQLite, and on the PostgreSQL server
that IDENTITY_TEST_POSTGRES_URL names (`.ci/postgres` starts one); without it that half is left out."""

import logging
import shutil
import signal
from pathlib import Path

import pytest
from sqlalchemy import create_engine
from sqlalchemy.engine import make_url

from identity import background
from identity.core import keys
from identity.storage.database import db
from tests import wallets
from tests.common import postgres
from tests.common.apps import ADMIN_WALLET, USER_WALLET, make_app, migrate
from tests.common.live import free_port

# pytester runs the pytest plugin's tests as an outside project would (tests/test_pytest_plugin.py); the suite's
# fixtures that more than one folder uses are in tests.common.fixtures.
pytest_plugins = ["pytester", "tests.common.fixtures"]

BACKENDS = ("sqlite", "postgresql")
POSTGRES_SKIPPED = "PostgreSQL half: skipped (set IDENTITY_TEST_POSTGRES_URL)"
FIGURES = pytest.StashKey[list]()
POSTGRES_NOT_RUN = pytest.StashKey[int]()


def pytest_report_header(config):
    if postgres.URL:
        return "PostgreSQL half: on " + make_url(postgres.URL).render_as_string(hide_password=True)
    return POSTGRES_SKIPPED


def pytest_terminal_summary(terminalreporter, config):
    measured = config.stash.get(FIGURES, [])
    if measured:
        terminalreporter.write_sep("=", "measured")
        for line in measured:
            terminalreporter.write_line(line)
    if not postgres.URL:
        not_run = config.stash.get(POSTGRES_NOT_RUN, 0)
        terminalreporter.write_sep("=", f"{POSTGRES_SKIPPED}: {not_run} tests not run", yellow=True)


@pytest.fixture
def ctrl_c():
    """SIGINT raises KeyboardInterrupt in this process, as in a terminal, for the duration of the test.

    A suite started in the background (`make test &`, some CI runners) inherits SIGINT ignored, and
    Python then installs no handler of its own: a test's real Ctrl-C would do nothing.
    """
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.fixture
def report(request):
    """report(line): a figure the test measured, printed in the run's summary."""
    return request.config.stash.setdefault(FIGURES, []).append


def pytest_generate_tests(metafunc):
    """Each test that uses a database runs once per backend, or on the one its marker names."""
    if "backend" not in metafunc.fixturenames:
        return
    only = [name for name in BACKENDS if metafunc.definition.get_closest_marker(f"{name}_only")]
    if not only and "database_path" in metafunc.fixturenames:
        only = ["sqlite"]  # the test reads or serves the SQLite file itself
    params = [pytest.param(name, marks=getattr(pytest.mark, name)) for name in only or BACKENDS]
    metafunc.parametrize("backend", params, indirect=True, scope="session")


def pytest_collection_modifyitems(config, items):
    """Without a PostgreSQL server, leave out that half: counted once in the summary, not skipped test by test."""
    if postgres.URL:
        return
    left_out = [item for item in items if item.get_closest_marker("postgresql")]
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = [item for item in items if not item.get_closest_marker("postgresql")]
    config.stash[POSTGRES_NOT_RUN] = len(left_out)


@pytest.fixture(scope="session")
def backend(request):
    """"sqlite" or "postgresql": which half of the suite this test runs in."""
    return request.param


@pytest.fixture(scope="session")
def sqlite_template(_identity_template_database):
    """One SQLite file migrated once, by the package's own pytest plugin; every test gets a copy."""
    return _identity_template_database


@pytest.fixture(scope="session")
def postgres_server():
    server = postgres.PostgresServer(postgres.URL)
    yield server
    server.close()


@pytest.fixture(scope="session")
def postgres_suite_database(postgres_server):
    """One PostgreSQL database migrated once; every test leaves it empty (see database_url)."""
    url = postgres_server.create_database()
    migrate(url)
    engine = create_engine(url, pool_pre_ping=True)
    yield url, engine
    engine.dispose()
    postgres_server.drop_database(url)


@pytest.fixture
def database_url(backend, tmp_path, request):
    """A migrated database with no rows, for this test alone."""
    if backend == "sqlite":
        path = tmp_path / "identity.db"
        shutil.copy(request.getfixturevalue("sqlite_template"), path)
        yield f"sqlite:///{path}"
    else:
        url, engine = request.getfixturevalue("postgres_suite_database")
        yield url
        # Emptying the tables takes milliseconds; creating a database from a template, a quarter second.
        with engine.begin() as connection:
            for table in reversed(db.metadata.sorted_tables):
                connection.execute(table.delete())


@pytest.fixture
def empty_database_url(backend, tmp_path, request):
    """A database that no migration has touched yet, as a first deploy finds it."""
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'fresh.db'}"
    else:
        server = request.getfixturevalue("postgres_server")
        url = server.create_database()
        yield url
        server.drop_database(url)


@pytest.fixture
def unreachable_database_url(backend, tmp_path):
    """A database URL that cannot be connected to."""
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'missing' / 'identity.db'}"  # its folder does not exist
    return make_url(postgres.URL).set(port=free_port()).render_as_string(hide_password=False)


@pytest.fixture
def app_config():
    """Settings of this test's app, over UNLIMITED rate limits; a test module may override or parametrize it."""
    return {}


@pytest.fixture
def app(database_url, app_config):
    app = make_app(database_url, **app_config)
    yield app
    background.stop(app)  # a hub that long polls or streams started
    with app.app_context():
        db.engine.dispose()


@pytest.fixture
def failing_app(database_url, app_config):
    """An app (with `app_config`) that serves the real routes in production mode, plus `GET /boom`, which logs a
    warning on `identity.boom` and then raises an error whose text names internals: the service's answer is a
    500 problem that must not show it."""
    app = make_app(database_url, **app_config, TESTING=False)

    @app.route("/boom")
    def boom():
        logging.getLogger("identity.boom").warning("about to fail")
        raise RuntimeError("secret internals: SELECT * FROM api_keys")

    yield app
    with app.app_context():
        db.engine.dispose()


@pytest.fixture
def database_path(app):
    """The SQLite file behind `app`; a test that asks for it runs in the SQLite half only."""
    return Path(app.config["SQLALCHEMY_DATABASE_URI"].removeprefix("sqlite:///"))


@pytest.fixture
def client(app):
    return app.test_client()


@pytest.fixture
def runner(app):
    return app.test_cli_runner()


@pytest.fixture
def issue_key(app):
    """issue_key(wallet, role=None) -> a real key, issued through the service."""

    def issue(wallet, role=None):
        with app.app_context():
            key, _ = keys.issue_key(wallet, role)
        return key

    return issue


@pytest.fixture
def admin_key(issue_key):
    return issue_key(ADMIN_WALLET, "Admin")


@pytest.fixture
def user_key(issue_key):
    return issue_key(USER_WALLET, "User")


@pytest.fixture
def create(client, user_key):
    """create(body, key=user_key, path="/identity") -> the response of a POST."""

    def post(body, key=None, path="/identity"):
        return client.post(path, json=body, headers={"x-api-key": key or user_key})

    return post


@pytest.fixture(scope="session")
def ethers():
    """ethers(requests) -> answers: an independent wallet, ethers run by node (tests/wallets/sign.mjs)."""
    wallets.install()
    return wallets.ethers


@pytest.fixture(scope="session")
def live_server(tmp_path_factory):
    """The service as it is deployed: migrated by the CLI, a key from the CLI, gunicorn with two workers.

    It carries `url` and `api_key` (an Admin key).
    """
    from tests.common.live import LiveServer, prepare_database

    database_url = f"sqlite:///{tmp_path_factory.mktemp('live') / 'identity.db'}"
    api_key = prepare_database(database_url, ADMIN_WALLET)
    # Schemathesis registers webhooks and mirrors of made-up URLs: this server must not deliver to them, nor
    # follow them. Sign-in is on, so that its routes are fuzzed too.
    server = LiveServer(database_url, workers=2, env={
        "IDENTITY_WEBHOOKS_DELIVER": "0", "IDENTITY_MIRRORS_FOLLOW": "0", "IDENTITY_SIWE_DOMAIN": "identity.test",
    }).start()
    server.api_key = api_key
    yield server
    server.stop()
