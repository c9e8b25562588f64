"""The PostgreSQL server that the suite's second half runs on (`.ci/postgres` starts a throwaway one).

IDENTITY_TEST_POSTGRES_URL names a database on it to connect to for creating others, as a superuser;
IDENTITY_TEST_POSTGRES_CTL, when given, is the pg_ctl command (with -D) that stops and starts it.
"""

import itertools
import os
import shlex
import subprocess

from sqlalchemy import create_engine
from sqlalchemy.engine import make_url

URL = os.environ.get("IDENTITY_TEST_POSTGRES_URL")
CTL = os.environ.get("IDENTITY_TEST_POSTGRES_CTL")


class PostgresServer:
    """Creates and drops the suite's databases; each name carries the pid, so runs never collide."""

    def __init__(self, url):
        self.url = make_url(url)
        # CREATE and DROP DATABASE refuse to run inside a transaction.
        self.admin = create_engine(self.url, isolation_level="AUTOCOMMIT", pool_pre_ping=True)
        self._names = (f"identity_test_{os.getpid()}_{n}" for n in itertools.count())

    def create_database(self):
        """A new, empty database; returns its URL."""
        name = next(self._names)
        with self.admin.connect() as connection:
            connection.exec_driver_sql(f'CREATE DATABASE "{name}"')
        return self.url.set(database=name).render_as_string(hide_password=False)

    def drop_database(self, url):
        with self.admin.connect() as connection:
            # FORCE ends the sessions of servers a test killed before PostgreSQL noticed.
            connection.exec_driver_sql(f'DROP DATABASE IF EXISTS "{make_url(url).database}" WITH (FORCE)')

    def close(self):
        self.admin.dispose()


def pg_ctl(*args):
    """Run IDENTITY_TEST_POSTGRES_CTL with `args` (stop, start ...), failing loudly."""
    result = subprocess.run([*shlex.split(CTL), *args], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
