"""Settings, read once from the environment when the app is built."""

import os
import re

from sqlalchemy.engine import make_url

NAMESPACE_PATTERN = re.compile(r"[a-z0-9]+")


def _int(environ, name, default):
    raw = environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{name} must be a whole number, not {raw!r}") from None


def settings_from_env(environ=None):
    """Return the Flask config mapping that the environment asks for."""
    environ = os.environ if environ is None else environ
    namespace = environ.get("IDENTITY_DID_NAMESPACE") or "identity"
    if not NAMESPACE_PATTERN.fullmatch(namespace):
        raise ValueError("IDENTITY_DID_NAMESPACE must be lower-case letters and digits")
    return {
        # A relative SQLite path is resolved by Flask-SQLAlchemy inside the instance folder.
        "SQLALCHEMY_DATABASE_URI": environ.get("DATABASE_URL") or "sqlite:///identity.db",
        "IDENTITY_DID_NAMESPACE": namespace,
        # Werkzeug refuses a larger body from its Content-Length, before reading it.
        "MAX_CONTENT_LENGTH": _int(environ, "IDENTITY_MAX_BODY_BYTES", 64 * 1024),
        "IDENTITY_SQLITE_BUSY_TIMEOUT_MS": _int(environ, "IDENTITY_SQLITE_BUSY_TIMEOUT_MS", 10_000),
        "IDENTITY_LAST_LOGIN_INTERVAL": _int(environ, "IDENTITY_LAST_LOGIN_INTERVAL", 60),
        # Connections each worker process keeps open to a database server, and how many more it may open at a peak.
        "IDENTITY_DB_POOL_SIZE": _int(environ, "IDENTITY_DB_POOL_SIZE", 5),
        "IDENTITY_DB_MAX_OVERFLOW": _int(environ, "IDENTITY_DB_MAX_OVERFLOW", 10),
        # Seconds a request waits for a free pooled connection, then for the server to accept a new one:
        # both well under gunicorn's 30 s worker timeout, so a stuck database gives a 503, not a killed worker.
        "IDENTITY_DB_POOL_TIMEOUT": _int(environ, "IDENTITY_DB_POOL_TIMEOUT", 10),
        "IDENTITY_DB_CONNECT_TIMEOUT": _int(environ, "IDENTITY_DB_CONNECT_TIMEOUT", 5),
        "API_TITLE": "Identity service",
        "API_VERSION": "1.0.0",
        "OPENAPI_VERSION": "3.1.0",
        "OPENAPI_URL_PREFIX": "/",
        "OPENAPI_JSON_PATH": "openapi.json",
        "SQLALCHEMY_TRACK_MODIFICATIONS": False,
        "JSON_SORT_KEYS": False,
    }


def engine_options(config):
    """SQLAlchemy engine options for the configured database: pooling and timeouts for a server database."""
    if make_url(config["SQLALCHEMY_DATABASE_URI"]).get_backend_name() == "sqlite":
        # A file opens in microseconds and its waits are bounded by the busy timeout (see tune_sqlite).
        return {}
    return {
        # A connection the server dropped (a restart, a failover) is replaced before a request gets it.
        "pool_pre_ping": True,
        "pool_size": config["IDENTITY_DB_POOL_SIZE"],
        "max_overflow": config["IDENTITY_DB_MAX_OVERFLOW"],
        "pool_timeout": config["IDENTITY_DB_POOL_TIMEOUT"],
        # libpq otherwise waits on an unreachable host as long as the operating system does.
        "connect_args": {"connect_timeout": config["IDENTITY_DB_CONNECT_TIMEOUT"]},
    }
