"""The floor of the stack: a bare WSGI app doing the project's work with sqlite3 and orjson, no framework.

`make bench` serves it with the same gunicorn settings as the project, on a copy of the same
database, so the ratio project/floor says what Flask, flask-smorest, marshmallow and SQLAlchemy cost
on top of the work that cannot be avoided: the key lookup by hash, the essential validation, content
addressing, the same SQL statements and the same full response object. It is a yardstick, not a
second implementation: tests/test_bench_floor.py keeps its responses the same shape as the project's.

    gunicorn bench.floor:app      # DATABASE_URL=sqlite:////path/to/identity.db, migrated by `flask db upgrade`
"""

import hashlib
import os
import re
import sqlite3
import unicodedata
import uuid
from datetime import UTC, datetime
from http import HTTPStatus
from urllib.parse import urlsplit

import orjson

# Pure modules (no Flask, no database): the floor computes ids exactly as the project does.
from identity.core import content
from identity.core.wallets import checksum_wallet

FIELDS = frozenset(("display_name", "description", "image", "external_reference", "creator"))
MAX_KEY_LENGTH = 128
MAX_URL_LENGTH = 2048
_SAFE_REQUEST_ID = re.compile(r"[\x21-\x7e]{1,128}")

_AUTH = (
    "SELECT users.wallet, users.role FROM api_keys JOIN users ON api_keys.user_id = users.id"
    " WHERE api_keys.key_hash = ? AND api_keys.revoked_at IS NULL"
)
# The columns a create writes (creator_signature stays NULL), in the order of the rows the benchmarks build.
IDENTITY_COLUMNS = (
    "id, identity_id, content_id, identity_hash, vault_id, display_name, description, image,"
    " external_reference, corpora_id, semantic, creator_id, created_at, updated_at, num_positions,"
    " assets_sum, conviction_sum, conviction_price, status, is_user, user_conviction, user_conviction_value"
)
_USER_COLUMNS = "users.id, users.created_at, users.updated_at, users.last_login, users.wallet, users.role"
_GET = (
    f"SELECT identities.id, identity_id, identity_hash, vault_id, display_name, description, image,"
    f" corpora_id, semantic, external_reference, identities.created_at, identities.updated_at, num_positions,"
    f" assets_sum, conviction_sum, conviction_price, status, is_user, user_conviction, user_conviction_value,"
    f" {_USER_COLUMNS}, creator_signature"
    f" FROM identities JOIN users ON users.id = identities.creator_id WHERE identity_id = ?"
)
_KNOWN_CONTENT = "SELECT identity_id FROM identities WHERE content_id = ?"
_USER_BY_WALLET = f"SELECT {_USER_COLUMNS} FROM users WHERE wallet = ?"
_INSERT_USER = "INSERT INTO users (id, wallet, role, created_at, updated_at, last_login) VALUES (?, ?, 'User', ?, ?, NULL)"
INSERT_IDENTITY = f"INSERT INTO identities ({IDENTITY_COLUMNS}) VALUES ({', '.join('?' * 22)})"
_INSERT_CHANGE = "INSERT INTO identity_changes (identity_id, at, wallet, kind, fields) VALUES (?, ?, ?, 'created', NULL)"


class Refusal(Exception):
    """An answer other than success, as problem details."""

    def __init__(self, status, detail, headers=(), **extra):
        super().__init__(detail)
        self.status, self.detail, self.headers, self.extra = status, detail, list(headers), extra

    def body(self):
        """The problem details, as JSON bytes."""
        return orjson.dumps({"type": "about:blank", "title": HTTPStatus(self.status).phrase,
                             "status": self.status, "detail": self.detail, **self.extra})


def request_id_of(incoming):
    """The X-Request-ID to answer with: the client's when it is safe to echo, else a new one."""
    return incoming if _SAFE_REQUEST_ID.fullmatch(incoming) else uuid.uuid4().hex


def _db_time(moment):
    """SQLAlchemy's SQLite DATETIME text, which the project's rows hold; it sorts as the times do."""
    return moment.isoformat(" ", "microseconds")


def _utcnow():
    return datetime.now(UTC).replace(tzinfo=None)


def _json_time(db_time):
    """'2026-11-21 09:30:00.123456' (as stored) -> '2026-11-21T09:30:00.123456Z'."""
    if db_time is None:
        return None
    if len(db_time) == 26:
        return f"{db_time[:10]}T{db_time[11:]}Z"
    return datetime.fromisoformat(db_time).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _user_object(row):
    user_id, created_at, updated_at, last_login, wallet, role = row
    return {
        "id": user_id,
        "created_at": _json_time(created_at),
        "updated_at": _json_time(updated_at),
        "last_login": _json_time(last_login),
        "api_key": "",
        "wallet": wallet,
        "role": role,
    }


def _identity_object(row):
    """The contract's Identity object from a row of _GET; bigints are stored as decimal text already."""
    return {
        "id": row[0],
        "identity_id": row[1],
        "identity_hash": row[2],
        "vault_id": row[3],
        "display_name": row[4],
        "description": row[5],
        "image": row[6],
        "corpora_id": row[7],
        "semantic": row[8],
        "external_reference": row[9],
        "creator": _user_object(row[20:26]),
        "creator_signature": row[26],
        "created_at": _json_time(row[10]),
        "updated_at": _json_time(row[11]),
        "num_positions": row[12],
        "assets_sum": row[13],
        "conviction_sum": row[14],
        "conviction_price": row[15],
        "status": row[16],
        "isUser": bool(row[17]),
        "user_conviction": row[18],
        "user_conviction_value": row[19],
    }


def _bad_characters(value, allowed=frozenset()):
    return any(unicodedata.category(c) in ("Cc", "Cs") and c not in allowed for c in value)


def _url_error(value, schemes):
    if len(value) > MAX_URL_LENGTH:
        return f"Longer than {MAX_URL_LENGTH} characters."
    if any(c.isspace() for c in value) or _bad_characters(value):
        return "Must not contain white space or control characters."
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError for a malformed port
    except ValueError:
        return "Not a valid URL."
    scheme = parts.scheme.lower()
    if scheme not in schemes:
        return "Must be an absolute URL with scheme " + ", ".join(sorted(schemes)) + "."
    if not parts.netloc or (scheme != "ipfs" and not parts.hostname):
        return "Must name a host."
    return None


def validate(body):
    """The create body's essential rules; returns the normalized fields or raises a 422 Refusal."""
    if not isinstance(body, dict):
        raise Refusal(422, "The body must be a JSON object.", errors={"_schema": ["Invalid input type."]})
    errors = {name: ["Unknown field."] for name in body if name not in FIELDS}
    fields = {}
    for name in ("display_name", "description", "image", "external_reference"):
        value = body.get(name)
        if value is None:
            if name == "display_name":
                errors[name] = ["Missing data for required field." if name not in body else "Field may not be null."]
            continue
        if not isinstance(value, str):
            errors[name] = ["Not a valid string."]
            continue
        value = content.normalize_text(value)
        if name == "display_name":
            problem = ("Length must be between 1 and 256." if not 1 <= len(value) <= 256
                       else "Must not contain control characters." if _bad_characters(value) else None)
        elif name == "description":
            problem = ("Longer than maximum length 4096." if len(value) > 4096
                       else "Must not contain control characters other than newline, carriage return and tab."
                       if _bad_characters(value, frozenset("\n\r\t")) else None)
        elif name == "image":
            problem = _url_error(value, frozenset(("https", "http", "ipfs")))
        else:
            problem = _url_error(value, frozenset(("https", "http")))
        if problem:
            errors[name] = [problem]
        else:
            fields[name] = value
    creator = body.get("creator")
    if creator is not None:
        try:
            fields["creator"] = checksum_wallet(creator)
        except ValueError as error:
            errors["creator"] = [str(error)]
    if errors:
        raise Refusal(422, "Invalid fields: " + ", ".join(sorted(errors)) + ".", errors=errors)
    return fields


class Floor:
    """The WSGI callable. One sqlite3 connection per process, opened after gunicorn forks."""

    def __init__(self, database_path, namespace="identity", max_body_bytes=64 * 1024,
                 busy_timeout_ms=10_000):
        self.database_path = database_path
        self.namespace = namespace
        self.max_body_bytes = max_body_bytes
        self.busy_timeout_ms = busy_timeout_ms
        self._connection = None
        self._pid = None

    @classmethod
    def from_env(cls, environ=os.environ):
        url = environ.get("DATABASE_URL") or "sqlite:///instance/identity.db"
        if not url.startswith("sqlite:///"):
            raise ValueError("the floor serves SQLite only: DATABASE_URL=sqlite:////path/to/identity.db")
        return cls(
            url.removeprefix("sqlite:///"),
            namespace=environ.get("IDENTITY_DID_NAMESPACE") or "identity",
            max_body_bytes=int(environ.get("IDENTITY_MAX_BODY_BYTES") or 64 * 1024),
            busy_timeout_ms=int(environ.get("IDENTITY_SQLITE_BUSY_TIMEOUT_MS") or 10_000),
        )

    @property
    def db(self):
        if self._connection is None or self._pid != os.getpid():
            # The project's pragmas; isolation_level=None so BEGIN/COMMIT are ours, as in the project.
            connection = sqlite3.connect(self.database_path, isolation_level=None, check_same_thread=False)
            connection.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_ms)}")
            connection.execute("PRAGMA journal_mode = WAL")
            connection.execute("PRAGMA synchronous = NORMAL")
            connection.execute("PRAGMA foreign_keys = ON")
            self._connection, self._pid = connection, os.getpid()
        return self._connection

    def close(self):
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def __call__(self, environ, start_response):
        request_id = request_id_of(environ.get("HTTP_X_REQUEST_ID", ""))
        try:
            status, payload, headers = self.route(environ)
        except Refusal as refusal:
            status, payload = refusal.status, refusal.body()
            headers = [("Content-Type", "application/problem+json"), *refusal.headers]
        else:
            headers = [("Content-Type", "application/json"), *headers]
        headers += [("Content-Length", str(len(payload))), ("X-Request-ID", request_id)]
        start_response(f"{status} {HTTPStatus(status).phrase}", headers)
        return [payload]

    def route(self, environ):
        path, method = environ.get("PATH_INFO", ""), environ["REQUEST_METHOD"]
        key = environ.get("HTTP_X_API_KEY")
        for prefix in ("/identity/", "/identities/"):
            if path.startswith(prefix) and "/" not in path[len(prefix):] and len(path) > len(prefix):
                if method not in ("GET", "HEAD"):
                    raise Refusal(405, "The method is not allowed for the requested URL.", [("Allow", "GET, HEAD, OPTIONS")])
                return self.get(key, path[len(prefix):])
        if path in ("/identity", "/identities"):
            if method != "POST":
                raise Refusal(405, "The method is not allowed for the requested URL.", [("Allow", "OPTIONS, POST")])
            wallet, role = self.authenticate(key)
            mimetype = environ.get("CONTENT_TYPE", "").split(";", 1)[0].strip().lower()
            if mimetype != "application/json":
                raise Refusal(415, "The body must be sent as Content-Type: application/json.")
            length = int(environ.get("CONTENT_LENGTH") or 0)
            if length > self.max_body_bytes:
                raise Refusal(413, "The data value transmitted exceeds the capacity limit.")
            return self.create(wallet, role, environ["wsgi.input"].read(length))
        if path in ("/healthz", "/readyz"):
            if path == "/readyz":
                self.ready()
            return 200, b'{"status":"ok"}', []
        raise Refusal(404, "The requested URL was not found on the server.")

    def ready(self):
        self.db.execute("SELECT 1").fetchone()

    def authenticate(self, key):
        """(wallet, role) of the caller's live key, looked up by its SHA-256. A read, as the project's: a
        request made with a key writes nothing (the project notes the key's use in memory and writes it once
        a minute, off the request's path)."""
        row = None
        if key and len(key) <= MAX_KEY_LENGTH:
            key_hash = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()
            row = self.db.execute(_AUTH, (key_hash,)).fetchone()
        if row is None:
            raise Refusal(401, "A valid API key is required in the x-api-key header.",
                          [("WWW-Authenticate", 'ApiKey header="x-api-key"')])
        return row

    def get(self, key, identity_id):
        """(status, JSON bytes, headers) of the Identity, for the caller with `key`."""
        self.authenticate(key)
        row = self.db.execute(_GET, (identity_id,)).fetchone()
        if row is None:
            raise Refusal(404, "No Identity exists for the provided id.")
        return 200, orjson.dumps(_identity_object(row)), []

    def create(self, wallet, role, data):
        """(status, JSON bytes, headers) of a create from the body `data`, by the authenticated (wallet, role)."""
        try:
            body = orjson.loads(data)
        except orjson.JSONDecodeError:
            raise Refusal(400, "The body is not valid JSON.") from None
        fields = validate(body)
        creator = fields.get("creator") or wallet
        if role != "Admin" and creator != wallet:
            raise Refusal(403, "A User key may create identities only with its own wallet as creator.")
        address = content.address(fields, self.namespace)
        db = self.db
        db.execute("BEGIN IMMEDIATE")
        try:
            user = db.execute(_USER_BY_WALLET, (creator,)).fetchone()
            now = _db_time(_utcnow())
            if user is None:
                user = (str(uuid.uuid4()), now, now, None, creator, "User")
                db.execute(_INSERT_USER, (user[0], creator, now, now))
            given = address.content
            identity_uuid = str(uuid.uuid4())
            db.execute(INSERT_IDENTITY, (
                identity_uuid, address.identity_id, address.content_id, address.identity_hash, "0",
                given["display_name"], given.get("description"), given.get("image"), given.get("external_reference"),
                None, None, user[0], now, now, 0, "0", "0", "0", "complete", 0, "0", "0",
            ))
            db.execute(_INSERT_CHANGE, (address.identity_id, now, wallet))  # the change log's `created` entry
            db.execute("COMMIT")
        except sqlite3.IntegrityError:
            db.execute("ROLLBACK")
            # The content is known: its unique content_id refused the insert.
            self._refuse_known_content(address.content_id)
            raise
        except BaseException:
            db.execute("ROLLBACK")
            raise
        # The row as _GET would read it back, so both answers come from one function.
        row = (
            identity_uuid, address.identity_id, address.identity_hash, "0", given["display_name"],
            given.get("description"), given.get("image"), None, None, given.get("external_reference"),
            now, now, 0, "0", "0", "0", "complete", 0, "0", "0", *user, None,
        )
        return 201, orjson.dumps(_identity_object(row)), [("Location", f"/identity/{address.identity_id}")]

    def _refuse_known_content(self, content_id):
        existing = self.db.execute(_KNOWN_CONTENT, (content_id,)).fetchone()
        if existing is not None:
            raise Refusal(409, "An identity with this content already exists.",
                          [("Location", f"/identity/{existing[0]}")], identity_id=existing[0])


app = Floor.from_env()
