"""Settings, read once from the environment when the app is built."""

import ipaddress
import logging
import os
import re
from urllib.parse import urlsplit

from limits import parse_many
from sqlalchemy.engine import make_url

from .core import uris

NAMESPACE_PATTERN = re.compile(r"[a-z0-9]+")
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _int(environ, name, default):
    raw = environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{name} must be a whole number, not {raw!r}") from None


def _positive(environ, name, default):
    value = _int(environ, name, default)
    if value < 1:
        raise ValueError(f"{name} must be 1 or more, not {value}")
    return value


def _bool(environ, name, default):
    raw = (environ.get(name) or "").strip().lower()
    if raw == "":
        return default
    if raw in _TRUE | _FALSE:
        return raw in _TRUE
    raise ValueError(f"{name} must be true or false, not {raw!r}")


def _seconds(environ, name, default, minimum=0.0):
    raw = (environ.get(name) or "").strip()
    if raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{name} must be a number of seconds, not {raw!r}") from None
    if not minimum <= value < float("inf"):
        raise ValueError(f"{name} must be a number of seconds of at least {minimum:g}, not {raw!r}")
    return value


def env_int(name, default):
    """A whole number from the environment variable `name` (gunicorn.conf.py's settings), or `default`;
    a value that is not one stops the server with a message naming the variable, not a traceback."""
    try:
        return _int(os.environ, name, default)
    except ValueError as error:
        raise SystemExit(f"Error: {error}; fix it in the environment and start the server again.") from None


def log_level(name, default):
    """A log level from the environment variable `name`, or `default`; stops with a message if it is not one."""
    try:
        return _log_level(os.environ, name, default)
    except ValueError as error:
        raise SystemExit(f"Error: {error}; fix it in the environment and start the server again.") from None


def _rate_limit(environ, name, default):
    value = environ.get(name) or default
    try:
        parse_many(value)
    except ValueError:
        raise ValueError(f"{name} must be a rate limit such as 120/minute, not {value!r}") from None
    return value


def _siwe_domain(environ):
    """IDENTITY_SIWE_DOMAIN: an RFC 3986 authority (host, and its port when not the default), or None (off)."""
    domain = (environ.get("IDENTITY_SIWE_DOMAIN") or "").strip()
    if domain and (domain.startswith(("http:", "https:")) or uris.authority_problem(domain, host_required=True)):
        raise ValueError("IDENTITY_SIWE_DOMAIN must be the host users sign in to, with its port when not the "
                         f"default (e.g. identity.example.com or 127.0.0.1:8000), not {domain!r}")
    return domain or None


def _siwe_uri(environ):
    """IDENTITY_SIWE_URI: an absolute URI with a host (a message's URI must be at its origin), or None."""
    uri = (environ.get("IDENTITY_SIWE_URI") or "").strip()
    if uri and (uris.uri_problem(uri) or not _has_origin(uri)):
        raise ValueError("IDENTITY_SIWE_URI must be an absolute URI with a host, such as https://identity.example.com, "
                         f"not {uri!r}")
    return uri or None


def _has_origin(uri):
    """Whether `uri` names a host, and a port that is a number when it names one."""
    parts = urlsplit(uri)
    try:
        parts.port  # noqa: B018 - read for the ValueError of a port that is not a number
    except ValueError:
        return False
    return bool(parts.hostname)


def _chain_ids(environ, name):
    """A comma-separated list of EIP-155 chain ids, or None (any chain) when unset."""
    raw = (environ.get(name) or "").strip()
    if not raw:
        return None
    items = [item.strip() for item in raw.split(",")]
    if not all(item.isdigit() and item.isascii() and len(item) <= 78 for item in items):
        raise ValueError(f"{name} must be chain ids in decimal digits separated by commas (e.g. 1,10), not {raw!r}")
    return tuple(sorted({int(item) for item in items}))


def _rpc_urls(environ, name):
    """Ethereum JSON-RPC endpoints by chain id, `1=https://…,8453=https://…`: {chain id: URL}, empty when unset.
    An operator's setting: any http(s) URL is taken, private and loopback addresses included."""
    raw = (environ.get(name) or "").strip()
    urls = {}
    for item in filter(None, (part.strip() for part in raw.split(","))):
        chain, _, url = (text.strip() for text in item.partition("="))
        if not (chain.isascii() and chain.isdigit() and len(chain) <= 78) or uris.uri_problem(url) or \
                not url.lower().startswith(("http://", "https://")) or not urlsplit(url).hostname:
            raise ValueError(f"{name} must be chain ids and their http(s) JSON-RPC URLs, as "
                             f"1=https://rpc.example,8453=https://base.example, not {item!r}")
        if int(chain) in urls:
            raise ValueError(f"{name} names chain {int(chain)} twice; give each chain one URL")
        urls[int(chain)] = url
    return urls


def _rpc_timeout(environ, name):
    value = _seconds(environ, name, 5.0, 0.001)
    if value > 300:
        raise ValueError(f"{name} must be a number of seconds up to 300, not {value:g}")
    return value


def _between(environ, name, default, low, high):
    value = _int(environ, name, default)
    if not low <= value <= high:
        raise ValueError(f"{name} must be {low:,} to {high:,}, not {value}")
    return value


def _proxies(environ, name):
    """The proxies trusted to name a client in X-Forwarded-For: addresses or networks, comma-separated, or *."""
    raw = (environ.get(name) or "127.0.0.1,::1").strip()
    if raw != "*":
        try:
            for item in raw.split(","):
                ipaddress.ip_network(item.strip(), strict=False)
        except ValueError:
            raise ValueError(f"{name} must be IP addresses or networks separated by commas, or *, not {raw!r}") from None
    return raw


def _log_level(environ, name, default):
    level = (environ.get(name) or default).upper()
    if not isinstance(logging.getLevelName(level), int):
        raise ValueError(f"{name} must be DEBUG, INFO, WARNING, ERROR or CRITICAL, not {level!r}")
    return level


def _backup_url(environ):
    """IDENTITY_BACKUP_URL: s3://BUCKET/PREFIX, file:///FOLDER or a plain folder path; None (no target) when unset."""
    raw = (environ.get("IDENTITY_BACKUP_URL") or "").strip()
    if raw and (problem := backup_target_problem(raw)):
        raise ValueError(f"IDENTITY_BACKUP_URL {problem}")
    return raw or None


def backup_target_problem(raw):
    """What is wrong with a backup target's URL, in words, or None."""
    scheme = raw.partition("://")[0].lower() if "://" in raw else ""
    if scheme == "s3":
        bucket = raw.partition("://")[2].partition("/")[0]
        if not re.fullmatch(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]", bucket):
            return (f"must name a bucket (3 to 63 lower-case letters, digits, dots or hyphens) as in "
                    f"s3://BUCKET/PREFIX, not {raw!r}")
        return None
    if scheme not in ("", "file"):
        return f"must be s3://BUCKET/PREFIX, file:///FOLDER or a folder's path, not a {scheme}:// URL"
    if scheme == "file" and not raw.startswith("file:///"):
        return f"must be a file URL with an absolute path (file:///srv/backups), not {raw!r}"
    return None


def _choice(environ, name, default, choices):
    value = (environ.get(name) or default).strip().lower()
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(choices)}, not {value!r}")
    return value


def _cron(environ, name):
    """A cron expression in UTC (five fields, or six with seconds last), or None when unset."""
    from croniter import croniter

    raw = " ".join((environ.get(name) or "").split())
    if raw and (len(raw.split()) not in (5, 6) or not croniter.is_valid(raw)):
        raise ValueError(f"{name} must be a cron expression in UTC such as '0 3 * * *' (minute hour day month "
                         f"weekday), not {raw!r}")
    return raw or None


def _age_identity(environ, name):
    """The age identity (AGE-SECRET-KEY-1...) of IDENTITY_BACKUP_ENCRYPTION_KEY or the file _FILE names; None
    when neither is set. The key itself never appears in a message."""
    import pyrage

    value = (environ.get(name) or "").strip()
    path = (environ.get(f"{name}_FILE") or "").strip()
    if value and path:
        raise ValueError(f"{name} and {name}_FILE are both set; set one of them")
    if path:
        try:
            with open(path, encoding="utf-8") as file:
                lines = [line.strip() for line in file if line.strip() and not line.startswith("#")]
        except OSError as error:
            raise ValueError(f"{name}_FILE names a file that cannot be read ({error.strerror or error}): "
                             f"{path}") from None
        value = lines[0] if lines else ""
    if not value:
        return None
    try:
        pyrage.x25519.Identity.from_str(value)
    except pyrage.IdentityError:
        where = f"the file {name}_FILE names" if path else name
        raise ValueError(f"{where} must hold an age secret key (AGE-SECRET-KEY-1..., made by `age-keygen`); "
                         "what is there is not one (it is not shown)") from None
    return value


def database_url(raw):
    """The SQLAlchemy URL of DATABASE_URL: `postgres://` and `postgresql://` (as hosting platforms and libpq
    write them) name the psycopg 3 driver that the service installs."""
    if raw.startswith(("postgres://", "postgresql://")):
        return "postgresql+psycopg://" + raw.partition("://")[2]
    return raw


def settings_from_env(environ=None):
    """Return the Flask config mapping that the environment asks for."""
    environ = os.environ if environ is None else environ
    namespace = environ.get("IDENTITY_DID_NAMESPACE") or "identity"
    if not NAMESPACE_PATTERN.fullmatch(namespace):
        raise ValueError("IDENTITY_DID_NAMESPACE must be lower-case letters and digits")
    return {
        # A relative SQLite path is resolved by Flask-SQLAlchemy inside the instance folder.
        "SQLALCHEMY_DATABASE_URI": database_url(environ.get("DATABASE_URL") or "sqlite:///identity.db"),
        "IDENTITY_DID_NAMESPACE": namespace,
        # Werkzeug refuses a larger body from its Content-Length, before reading it.
        "MAX_CONTENT_LENGTH": _int(environ, "IDENTITY_MAX_BODY_BYTES", 64 * 1024),
        "IDENTITY_SQLITE_BUSY_TIMEOUT_MS": _int(environ, "IDENTITY_SQLITE_BUSY_TIMEOUT_MS", 10_000),
        # SQLite page cache of `identities import`: a large import inserts into many indexes at random places.
        "IDENTITY_IMPORT_CACHE_MB": _positive(environ, "IDENTITY_IMPORT_CACHE_MB", 32),
        # How often each process writes the keys' uses it noted, and the least time between two writes of
        # one key's last_used_at (identity.core.key_use).
        "IDENTITY_KEY_USE_INTERVAL": _positive(environ, "IDENTITY_KEY_USE_INTERVAL", 60),
        # How long a worker trusts its last lookup of a key: the bound on a revocation made elsewhere.
        "IDENTITY_KEY_CACHE_SECONDS": _int(environ, "IDENTITY_KEY_CACHE_SECONDS", 5),
        # Per API key; see identity/web/limits.py for what counts and how.
        "IDENTITY_RATELIMIT_READ": _rate_limit(environ, "IDENTITY_RATELIMIT_READ", "120/minute"),
        "IDENTITY_RATELIMIT_CREATE": _rate_limit(environ, "IDENTITY_RATELIMIT_CREATE", "30/minute"),
        # memory:// counts on this machine, shared by one gunicorn server's workers (identity/web/shared_counts.py);
        # redis://... shares counts between nodes.
        "IDENTITY_RATELIMIT_STORAGE": environ.get("IDENTITY_RATELIMIT_STORAGE") or "memory://",
        # Streams and long polls of GET /changes that one API key may hold open at once: the cap is
        # docs/curation-and-feed.md's "Bounded per key".
        "IDENTITY_MAX_STREAMS_PER_KEY": _int(environ, "IDENTITY_MAX_STREAMS_PER_KEY", 10),
        # Sign-in with Ethereum (identity.core.signin): off until the domain is set; the URI a nonce's answer
        # suggests (None: https:// and the domain); nonces' life and live cap; chains (None: any); keys' longest term.
        "IDENTITY_SIWE_DOMAIN": _siwe_domain(environ),
        "IDENTITY_SIWE_URI": _siwe_uri(environ),
        "IDENTITY_SIWE_NONCE_SECONDS": _between(environ, "IDENTITY_SIWE_NONCE_SECONDS", 600, 10, 86_400),
        "IDENTITY_SIWE_CHAIN_IDS": _chain_ids(environ, "IDENTITY_SIWE_CHAIN_IDS"),
        "IDENTITY_SIWE_KEY_SECONDS": _between(environ, "IDENTITY_SIWE_KEY_SECONDS", 7 * 86_400, 60, 10 * 365 * 86_400),
        # Contract wallets (identity.core.contract_wallets): a chain's JSON-RPC endpoint, asked only when a
        # signature does not recover to its address; and how long one call may take.
        "IDENTITY_ETH_RPC_URLS": _rpc_urls(environ, "IDENTITY_ETH_RPC_URLS"),
        "IDENTITY_ETH_RPC_TIMEOUT_SECONDS": _rpc_timeout(environ, "IDENTITY_ETH_RPC_TIMEOUT_SECONDS"),
        # Per client address, for each of GET /auth/nonce and POST /auth/siwe.
        "IDENTITY_RATELIMIT_SIGNIN": _rate_limit(environ, "IDENTITY_RATELIMIT_SIGNIN", "30/minute"),
        # The proxies whose X-Forwarded-For names the client (the variable gunicorn reads for its own headers).
        "FORWARDED_ALLOW_IPS": _proxies(environ, "FORWARDED_ALLOW_IPS"),
        "IDENTITY_METRICS_ENABLED": _bool(environ, "IDENTITY_METRICS_ENABLED", True),
        "IDENTITY_LOG_LEVEL": _log_level(environ, "IDENTITY_LOG_LEVEL", "INFO"),
        # Connections each worker process keeps open to the database, and how many more it may open at a
        # peak. A request holds one at a time, so a process needs as many as it serves requests at once:
        # its threads (GUNICORN_THREADS, the setting gunicorn.conf.py reads too).
        "IDENTITY_DB_POOL_SIZE": _int(environ, "IDENTITY_DB_POOL_SIZE", max(5, _int(environ, "GUNICORN_THREADS", 1))),
        "IDENTITY_DB_MAX_OVERFLOW": _int(environ, "IDENTITY_DB_MAX_OVERFLOW", 10),
        # Seconds a request waits for a free pooled connection, then for the server to accept a new one:
        # both well under gunicorn's 30 s worker timeout, so a stuck database gives a 503, not a killed worker.
        "IDENTITY_DB_POOL_TIMEOUT": _int(environ, "IDENTITY_DB_POOL_TIMEOUT", 10),
        "IDENTITY_DB_CONNECT_TIMEOUT": _int(environ, "IDENTITY_DB_CONNECT_TIMEOUT", 5),
        # Webhooks (identity.feed.webhooks, identity.feed.delivery). A node delivers unless told not to; one
        # deliverer works at a time across every process and node, through a lease in the database.
        "IDENTITY_WEBHOOKS_DELIVER": _bool(environ, "IDENTITY_WEBHOOKS_DELIVER", True),
        # Receivers on loopback, private, link-local... addresses: refused unless this says otherwise.
        "IDENTITY_WEBHOOKS_ALLOW_PRIVATE": _bool(environ, "IDENTITY_WEBHOOKS_ALLOW_PRIVATE", False),
        # After this many seconds of failures a webhook turns inactive (PATCH active true resumes it).
        "IDENTITY_WEBHOOK_GIVE_UP": _seconds(environ, "IDENTITY_WEBHOOK_GIVE_UP", 24 * 3600.0),
        # The back-off between attempts at one entry doubles from the first to the last, with jitter.
        "IDENTITY_WEBHOOK_RETRY_MIN_SECONDS": _seconds(environ, "IDENTITY_WEBHOOK_RETRY_MIN_SECONDS", 1.0, 0.01),
        "IDENTITY_WEBHOOK_RETRY_MAX_SECONDS": _seconds(environ, "IDENTITY_WEBHOOK_RETRY_MAX_SECONDS", 600.0, 0.01),
        # The deliverer's lease: a holder that stops renewing it is replaced within this time and a third.
        "IDENTITY_WEBHOOK_LEASE_SECONDS": _seconds(environ, "IDENTITY_WEBHOOK_LEASE_SECONDS", 15.0, 1.0),
        # How often the lease holder looks for new entries (one query per interval, however many webhooks).
        "IDENTITY_WEBHOOK_POLL_SECONDS": _seconds(environ, "IDENTITY_WEBHOOK_POLL_SECONDS", 0.5, 0.01),
        # The deliveries log keeps this many of the latest attempts per webhook.
        "IDENTITY_WEBHOOK_DELIVERIES_KEPT": _int(environ, "IDENTITY_WEBHOOK_DELIVERIES_KEPT", 100),
        # Mirrors (identity.data.follower). A node follows its upstreams unless told not to; one follower works
        # at a time across every process and node, through a lease in the database.
        "IDENTITY_MIRRORS_FOLLOW": _bool(environ, "IDENTITY_MIRRORS_FOLLOW", True),
        # The follower's lease: a holder that stops renewing it is replaced within this time and a third.
        "IDENTITY_MIRROR_LEASE_SECONDS": _seconds(environ, "IDENTITY_MIRROR_LEASE_SECONDS", 15.0, 1.0),
        # After a failure to read an upstream, the pause before the next try doubles from 1 s up to this.
        "IDENTITY_MIRROR_RETRY_MAX_SECONDS": _seconds(environ, "IDENTITY_MIRROR_RETRY_MAX_SECONDS", 60.0, 0.1),
        # Backups (identity.data.backups): where they go, when, how many scheduled ones are kept, how they
        # are encrypted, and the back-off between attempts after a failure.
        "IDENTITY_BACKUP_URL": _backup_url(environ),
        # A node's serving processes take the scheduled backups unless told not to (one at a time, by a lease).
        "IDENTITY_BACKUPS_TAKE": _bool(environ, "IDENTITY_BACKUPS_TAKE", True),
        "IDENTITY_BACKUP_S3_ADDRESSING": _choice(environ, "IDENTITY_BACKUP_S3_ADDRESSING", "auto",
                                                 ("auto", "path", "virtual")),
        "IDENTITY_BACKUP_SCHEDULE": _cron(environ, "IDENTITY_BACKUP_SCHEDULE"),
        "IDENTITY_BACKUP_KEEP": _positive(environ, "IDENTITY_BACKUP_KEEP", 14),
        "IDENTITY_BACKUP_ENCRYPTION_KEY": _age_identity(environ, "IDENTITY_BACKUP_ENCRYPTION_KEY"),
        "IDENTITY_BACKUP_RETRY_MIN_SECONDS": _seconds(environ, "IDENTITY_BACKUP_RETRY_MIN_SECONDS", 30.0, 0.01),
        "IDENTITY_BACKUP_RETRY_MAX_SECONDS": _seconds(environ, "IDENTITY_BACKUP_RETRY_MAX_SECONDS", 3600.0, 0.01),
        # The size of each part of an upload (S3 allows 5 MiB to 5 GiB; 10,000 parts at most).
        "IDENTITY_BACKUP_PART_MB": _between(environ, "IDENTITY_BACKUP_PART_MB", 16, 5, 5120),
        # How often the scheduler's lease holder looks whether a backup is due.
        "IDENTITY_BACKUP_POLL_SECONDS": _seconds(environ, "IDENTITY_BACKUP_POLL_SECONDS", 5.0, 0.01),
        "IDENTITY_BACKUP_LEASE_SECONDS": _seconds(environ, "IDENTITY_BACKUP_LEASE_SECONDS", 60.0, 1.0),
        # The audit log (identity.core.audit_retention): entries older than this many days are pruned, hourly,
        # by one process at a time; 0 keeps every entry.
        "IDENTITY_AUDIT_RETENTION_DAYS": _between(environ, "IDENTITY_AUDIT_RETENTION_DAYS", 365, 0, 100 * 365),
        "API_TITLE": "Identity service",
        "API_VERSION": "1.0.0",
        "OPENAPI_VERSION": "3.1.0",
        # The document is served by the service it describes: its base is the one it was fetched from.
        "API_SPEC_OPTIONS": {"servers": [{"url": "/", "description": "This service (the base /openapi.json was fetched from)."}]},
        "OPENAPI_URL_PREFIX": "/",
        "OPENAPI_JSON_PATH": "openapi.json",
        "OPENAPI_SWAGGER_UI_PATH": "docs",
        # Served by identity.web.openapi from an installed package, never a CDN: /docs works offline.
        "OPENAPI_SWAGGER_UI_URL": "/docs/assets/",
        # No call to the public validator service from the page.
        "OPENAPI_SWAGGER_UI_CONFIG": {"validatorUrl": None, "deepLinking": True},
        "SQLALCHEMY_TRACK_MODIFICATIONS": False,
    }


def init_app(app, config=None):
    """`app`'s settings: the environment's, then `config` (a mapping) on top."""
    app.config.from_mapping(settings_from_env())
    if config:
        app.config.update(config)
        if config.get("DATABASE_URL"):
            app.config["SQLALCHEMY_DATABASE_URI"] = database_url(config["DATABASE_URL"])
    app.config.setdefault("SQLALCHEMY_ENGINE_OPTIONS", engine_options(app.config))


def engine_options(config):
    """SQLAlchemy engine options for the configured database: pooling and timeouts for a server database."""
    url = make_url(config["SQLALCHEMY_DATABASE_URI"])
    pool = {"pool_size": config["IDENTITY_DB_POOL_SIZE"], "max_overflow": config["IDENTITY_DB_MAX_OVERFLOW"]}
    if url.get_backend_name() == "sqlite":
        if url.database in (None, "", ":memory:"):
            return {}  # one connection per thread, SQLAlchemy's own choice for a database in memory
        # A file handle per request served at once, however many: there is no server whose
        # connections could run out, and waits are bounded by the busy timeout (see tune_sqlite).
        # The connection used last is the next one handed out: its page cache is the likeliest to be
        # still valid (SQLite drops a connection's cache when another connection has written since its
        # last transaction), where a queue would hand out the one idle the longest (the pages it
        # spares: docs/performance.md, "Figures behind the code's choices").
        return {**pool, "max_overflow": -1, "pool_use_lifo": True}
    return {
        **pool,
        # A connection the server dropped (a restart, a failover) is replaced before a request gets it.
        "pool_pre_ping": True,
        "pool_timeout": config["IDENTITY_DB_POOL_TIMEOUT"],
        # libpq otherwise waits on an unreachable host as long as the operating system does.
        "connect_args": {"connect_timeout": config["IDENTITY_DB_CONNECT_TIMEOUT"]},
    }
