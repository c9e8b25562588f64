"""Settings, read once from the environment when the app is built.

`Settings`, a marshmallow schema, declares each variable: its type, its default and its bounds. A value that is
empty (or only spaces) is unset, so its default applies. Every value that cannot be read is named at once, in
one SettingsError, each with what is wrong with it."""

import os

from marshmallow import Schema, ValidationError, fields, post_load, validates_schema
from sqlalchemy.engine import make_url

from .config_values import (
    age_identity,
    age_identity_file,
    backup_url,
    boolean,
    chain_ids,
    choice,
    cron,
    log_level_name,
    namespace,
    parsed,
    proxies,
    rate_limit,
    rpc_urls,
    seconds,
    siwe_domain,
    siwe_uri,
    whole,
)

FIX = "in the environment, then start the server (or run the command) again"


class SettingsError(ValueError):
    """Variables whose values cannot be read: `problems` holds one line per problem, each naming its variable."""

    def __init__(self, problems):
        self.problems = problems
        super().__init__("\n".join(problems))

    def exit_message(self):
        """What a server or command stops with: the problem and what to do, in one line; or several problems
        under one line saying what to do."""
        if len(self.problems) == 1:
            return f"Error: {self.problems[0]}; fix it {FIX}."
        return "\n".join([f"Error: settings that cannot be read; fix them {FIX}:",
                          *(f"  {problem}" for problem in self.problems)])


class Settings(Schema):
    """The environment's settings: each field's key in Flask's config, and the variable it is read from
    (its data_key when the two differ)."""

    # A relative SQLite path is resolved by Flask-SQLAlchemy inside the instance folder.
    SQLALCHEMY_DATABASE_URI = fields.String(data_key="DATABASE_URL", load_default="sqlite:///identity.db")
    IDENTITY_DID_NAMESPACE = parsed(namespace, "identity")
    # Werkzeug refuses a larger body from its Content-Length, before reading it.
    MAX_CONTENT_LENGTH = whole(64 * 1024, data_key="IDENTITY_MAX_BODY_BYTES")
    IDENTITY_SQLITE_BUSY_TIMEOUT_MS = whole(10_000)
    # SQLite page cache of `identities import`: a large import inserts into many indexes at random places.
    IDENTITY_IMPORT_CACHE_MB = whole(32, low=1)
    # How often each process writes the keys' uses it noted, and the least time between two writes of
    # one key's last_used_at (identity.core.key_use).
    IDENTITY_KEY_USE_INTERVAL = whole(60, low=1)
    # How long a worker trusts its last lookup of a key: the bound on a revocation made elsewhere.
    IDENTITY_KEY_CACHE_SECONDS = whole(5)
    # Per API key; see identity/web/budgets.py for what counts and how.
    IDENTITY_RATELIMIT_READ = parsed(rate_limit, "120/minute")
    IDENTITY_RATELIMIT_CREATE = parsed(rate_limit, "30/minute")
    # memory:// counts on this machine, shared by one gunicorn server's workers (identity/web/shared_counts.py);
    # redis://... shares counts between nodes.
    IDENTITY_RATELIMIT_STORAGE = fields.String(load_default="memory://")
    # Streams and long polls of GET /changes that one API key may hold open at once: the cap is
    # docs/curation-and-feed.md's "Bounded per key".
    IDENTITY_MAX_STREAMS_PER_KEY = whole(10)
    # Sign-in with Ethereum (identity.core.signin): off until the domain is set; the URI a nonce's answer
    # suggests (None: https:// and the domain); nonces' life and live cap; chains (None: any); keys' longest term.
    IDENTITY_SIWE_DOMAIN = parsed(siwe_domain)
    IDENTITY_SIWE_URI = parsed(siwe_uri)
    IDENTITY_SIWE_NONCE_SECONDS = whole(600, 10, 86_400)
    IDENTITY_SIWE_CHAIN_IDS = parsed(chain_ids)
    IDENTITY_SIWE_KEY_SECONDS = whole(7 * 86_400, 60, 10 * 365 * 86_400)
    # Contract wallets (identity.core.contract_wallets): a chain's JSON-RPC endpoint, asked only when a
    # signature does not recover to its address; and how long one call may take.
    IDENTITY_ETH_RPC_URLS = parsed(rpc_urls, {})
    IDENTITY_ETH_RPC_TIMEOUT_SECONDS = seconds(5.0, 0.001, 300)
    # Per client address, for each of GET /auth/nonce and POST /auth/siwe.
    IDENTITY_RATELIMIT_SIGNIN = parsed(rate_limit, "30/minute")
    # The proxies whose X-Forwarded-For names the client (the variable gunicorn reads for its own headers).
    FORWARDED_ALLOW_IPS = parsed(proxies, "127.0.0.1,::1")
    IDENTITY_METRICS_ENABLED = parsed(boolean, True)
    IDENTITY_LOG_LEVEL = parsed(log_level_name, "INFO")
    # Connections each worker process keeps open to the database, and how many more it may open at a
    # peak. A request holds one at a time, so a process needs as many as it serves requests at once:
    # its threads (GUNICORN_THREADS, the setting gunicorn.conf.py reads too), and 5 at least.
    IDENTITY_DB_POOL_SIZE = whole(None)
    GUNICORN_THREADS = whole(1)
    IDENTITY_DB_MAX_OVERFLOW = whole(10)
    # Seconds a request waits for a free pooled connection, then for the server to accept a new one:
    # both well under gunicorn's 30 s worker timeout, so a stuck database gives a 503, not a killed worker.
    IDENTITY_DB_POOL_TIMEOUT = whole(10)
    IDENTITY_DB_CONNECT_TIMEOUT = whole(5)
    # Webhooks (identity.feed.webhooks, identity.feed.delivery). A node delivers unless told not to; one
    # deliverer works at a time across every process and node, through a lease in the database.
    IDENTITY_WEBHOOKS_DELIVER = parsed(boolean, True)
    # Receivers on loopback, private, link-local... addresses: refused unless this says otherwise.
    IDENTITY_WEBHOOKS_ALLOW_PRIVATE = parsed(boolean, False)
    # After this many seconds of failures a webhook turns inactive (PATCH active true resumes it).
    IDENTITY_WEBHOOK_GIVE_UP = seconds(24 * 3600.0)
    # The back-off between attempts at one entry doubles from the first to the last, with jitter.
    IDENTITY_WEBHOOK_RETRY_MIN_SECONDS = seconds(1.0, 0.01)
    IDENTITY_WEBHOOK_RETRY_MAX_SECONDS = seconds(600.0, 0.01)
    # The deliverer's lease: a holder that stops renewing it is replaced within this time and a third.
    IDENTITY_WEBHOOK_LEASE_SECONDS = seconds(15.0, 1.0)
    # How often the lease holder looks for new entries (one query per interval, however many webhooks).
    IDENTITY_WEBHOOK_POLL_SECONDS = seconds(0.5, 0.01)
    # The deliveries log keeps this many of the latest attempts per webhook.
    IDENTITY_WEBHOOK_DELIVERIES_KEPT = whole(100)
    # Mirrors (identity.data.follower). A node follows its upstreams unless told not to; one follower works
    # at a time across every process and node, through a lease in the database.
    IDENTITY_MIRRORS_FOLLOW = parsed(boolean, True)
    # The follower's lease: a holder that stops renewing it is replaced within this time and a third.
    IDENTITY_MIRROR_LEASE_SECONDS = seconds(15.0, 1.0)
    # After a failure to read an upstream, the pause before the next try doubles from 1 s up to this.
    IDENTITY_MIRROR_RETRY_MAX_SECONDS = seconds(60.0, 0.1)
    # Backups (identity.data.backups): where they go, when, how many scheduled ones are kept, how they
    # are encrypted, and the back-off between attempts after a failure.
    IDENTITY_BACKUP_URL = parsed(backup_url)
    # A node's serving processes take the scheduled backups unless told not to (one at a time, by a lease).
    IDENTITY_BACKUPS_TAKE = parsed(boolean, True)
    IDENTITY_BACKUP_S3_ADDRESSING = parsed(choice("auto", "path", "virtual"), "auto")
    IDENTITY_BACKUP_SCHEDULE = parsed(cron)
    IDENTITY_BACKUP_KEEP = whole(14, low=1)
    IDENTITY_BACKUP_ENCRYPTION_KEY = parsed(age_identity)
    IDENTITY_BACKUP_ENCRYPTION_KEY_FILE = parsed(age_identity_file)
    IDENTITY_BACKUP_RETRY_MIN_SECONDS = seconds(30.0, 0.01)
    IDENTITY_BACKUP_RETRY_MAX_SECONDS = seconds(3600.0, 0.01)
    # The size of each part of an upload (S3 allows 5 MiB to 5 GiB; 10,000 parts at most).
    IDENTITY_BACKUP_PART_MB = whole(16, 5, 5120)
    # How often the scheduler's lease holder looks whether a backup is due.
    IDENTITY_BACKUP_POLL_SECONDS = seconds(5.0, 0.01)
    IDENTITY_BACKUP_LEASE_SECONDS = seconds(60.0, 1.0)
    # The audit log (identity.core.audit_retention): entries older than this many days are pruned, hourly,
    # by one process at a time; 0 keeps every entry.
    IDENTITY_AUDIT_RETENTION_DAYS = whole(365, 0, 100 * 365)

    @validates_schema(pass_original=True, skip_on_field_errors=False)
    def one_key(self, data, original_data, **kwargs):
        if {"IDENTITY_BACKUP_ENCRYPTION_KEY", "IDENTITY_BACKUP_ENCRYPTION_KEY_FILE"} <= original_data.keys():
            raise ValidationError("and IDENTITY_BACKUP_ENCRYPTION_KEY_FILE are both set; set one of them",
                                  "IDENTITY_BACKUP_ENCRYPTION_KEY")

    @post_load
    def derived(self, data, **kwargs):
        data["SQLALCHEMY_DATABASE_URI"] = database_url(data["SQLALCHEMY_DATABASE_URI"])
        if data["IDENTITY_DB_POOL_SIZE"] is None:
            data["IDENTITY_DB_POOL_SIZE"] = max(5, data["GUNICORN_THREADS"])
        del data["GUNICORN_THREADS"]
        key_file = data.pop("IDENTITY_BACKUP_ENCRYPTION_KEY_FILE")
        data["IDENTITY_BACKUP_ENCRYPTION_KEY"] = data["IDENTITY_BACKUP_ENCRYPTION_KEY"] or key_file
        return data


SETTINGS = Settings()


def settings_from_env(environ=None):
    """Return the Flask config mapping that the environment asks for; SettingsError names what it cannot read."""
    return {
        **read(SETTINGS, os.environ if environ is None else environ),
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


def read(schema, environ):
    """`schema` loaded from the variables of `environ` that it names and that are not blank; SettingsError
    naming every variable that cannot be read."""
    names = [field.data_key or name for name, field in schema.fields.items()]
    given = {name: value for name in names if (value := environ.get(name)) is not None and value.strip()}
    try:
        return schema.load(given)
    except ValidationError as error:
        raise SettingsError([f"{name} {message}" for name in names for message in error.messages.get(name, ())]) \
            from None


def env_int(name, default):
    """A whole number from the environment variable `name` (gunicorn.conf.py's settings), or `default`;
    a value that is not one stops the server with a message naming the variable, not a traceback."""
    return one_setting(name, whole(default))


def log_level(name, default):
    """A log level from the environment variable `name`, or `default`; stops with a message if it is not one."""
    return one_setting(name, parsed(log_level_name, default))


def one_setting(name, field):
    """The value of the one variable `name`, read with `field`; stops the server with a message if it cannot be."""
    try:
        return read(Schema.from_dict({name: field})(), os.environ)[name]
    except SettingsError as error:
        raise SystemExit(error.exit_message()) from None


def check_environment():
    """Stop with a message naming each variable that cannot be read (gunicorn.conf.py calls it in the
    server's first process, before any worker builds the app)."""
    try:
        settings_from_env()
    except SettingsError as error:
        raise SystemExit(error.exit_message()) from None


def database_url(raw):
    """The SQLAlchemy URL of DATABASE_URL: `postgres://` and `postgresql://` (as hosting platforms and libpq
    write them) name the psycopg 3 driver that the service installs."""
    if raw.startswith(("postgres://", "postgresql://")):
        return "postgresql+psycopg://" + raw.partition("://")[2]
    return raw


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
