"""Every request's way in and out: the app's request class, its id, how JSON bodies are read and answers
encoded, and the two hooks every request passes (the schema check on the way in; the headers, the
metrics and the access line on the way out)."""

import json
import logging
import re
import secrets
import time
from decimal import Decimal

import flask
import orjson
from flask import current_app, request
from flask.json.provider import DefaultJSONProvider, JSONProvider
from webargs.flaskparser import FlaskParser, abort
from werkzeug.utils import cached_property

from ..core.keys import KEY_PREFIX
from ..storage import readiness
from . import metrics

REQUEST_ID_HEADER = "X-Request-ID"
# Short and printable ASCII only: the id is copied into headers and log lines, so nothing that could
# split a line, smuggle a header or flood the logs is ever echoed.
_SAFE_REQUEST_ID = re.compile(r"[\x21-\x7e]{1,128}")
ACCESS_LOGGER = "identity.access"
access_log = logging.getLogger(ACCESS_LOGGER)


class Request(flask.Request):
    """The app's `request_class`: Flask's, with what a request learns on its way kept on it."""

    #: The window of the budget this request spent (web.budgets), or None.
    rate_limit_window = None
    #: The Caller of the request's key once it is known good (web.auth), or None.
    caller = None

    def __init__(self, environ, *args, **kwargs):
        super().__init__(environ, *args, **kwargs)
        # Its access line and its latency metric are timed from here.
        self.started = time.perf_counter()

    @cached_property
    def request_id(self):
        """X-Request-ID when it is safe to echo, generated otherwise (128 random bits); made on first use."""
        incoming = self.headers.get(REQUEST_ID_HEADER, "")
        # A client that sends its API key as a request id must not get it written to the logs.
        if _SAFE_REQUEST_ID.fullmatch(incoming) and KEY_PREFIX not in incoming:
            return incoming
        return secrets.token_hex(16)


def current_request_id():
    """The id of the request being served; None for a request of another app in the same process."""
    return getattr(request, "request_id", None)


# --- JSON in ------------------------------------------------------------------------------------------

JSON_MIMETYPES = frozenset({"application/json"})
# RFC 7396: a PATCH may say its body is a JSON merge patch, which for these flat objects is the same.
MERGE_PATCH = "application/merge-patch+json"
PATCH_MIMETYPES = JSON_MIMETYPES | {MERGE_PATCH}


def _refuse_constant(name):
    raise ValueError(f"{name} is not JSON")


def _parse_int(digits):
    # Python refuses to make an int of more than 4300 digits; such a number is still valid JSON (of the
    # wrong type for every field), so it must reach validation rather than fail parsing.
    return int(digits) if len(digits) <= 4000 else Decimal(digits)


_DECODER = json.JSONDecoder(parse_constant=_refuse_constant, parse_int=_parse_int)


class BodyParser(FlaskParser):
    """Bodies are JSON in UTF-8 under a JSON Content-Type, and nothing else (flask-smorest's
    ARGUMENTS_PARSER). webargs' own JSON loading reads a body without a JSON type as absent, and an empty
    body too; here the first is a 415 and the second invalid JSON (400). NaN and Infinity are not JSON."""

    def load_json(self, req, schema):
        allowed = PATCH_MIMETYPES if req.method == "PATCH" else JSON_MIMETYPES
        if req.mimetype not in allowed:
            abort(415, message=f"The body must be sent as Content-Type: {' or '.join(sorted(allowed))}.")
        data = read_body(req)
        if not data and req.method == "PATCH":
            return {}  # a patch of nothing: refused as {} is, naming the body (422)
        try:
            return _DECODER.decode(data.decode("utf-8"))
        except UnicodeDecodeError:
            abort(400, message="The body is not valid UTF-8.")
        except (ValueError, RecursionError):
            abort(400, message="The body is not valid JSON.")


def read_body(req):
    """The request's body, at most MAX_CONTENT_LENGTH bytes (413 past that), however it is framed.

    With a Content-Length, Werkzeug refuses a larger one before reading (413). A chunked body has none;
    Werkzeug would cut it at the limit, silently, so it is read here from the server's stream to one byte
    past the limit.
    """
    if req.content_length is not None or req.environ.get("HTTP_TRANSFER_ENCODING") is None:
        return req.get_data(cache=True)
    limit = req.max_content_length
    try:
        data = req.input_stream.read() if limit is None else req.input_stream.read(limit + 1)
    except Exception:  # noqa: BLE001 - whatever the server's chunk decoder raises: the framing is broken
        abort(400, message="The body's chunked transfer coding is malformed.")
    if limit is not None and len(data) > limit:
        abort(413, message=f"The body is larger than {limit} bytes.")
    return data


# --- JSON out -----------------------------------------------------------------------------------------

class OrjsonProvider(JSONProvider):
    """Flask's JSON provider interface (dumps and loads) implemented with orjson: the same documents as the
    standard library's, several times faster.

    Keys keep their order (the contract's field order). What orjson refuses (an integer of more than 64
    bits, a keyword argument such as indent) is encoded by the standard library instead; values of other
    types (dates, decimals, UUIDs) are converted as Flask's default provider converts them.
    """

    def dumps(self, obj, **kwargs):
        if not kwargs:
            try:
                return orjson.dumps(obj, default=DefaultJSONProvider.default).decode()
            except TypeError:  # orjson.JSONEncodeError is a TypeError
                pass
        kwargs.setdefault("default", DefaultJSONProvider.default)
        return json.dumps(obj, **kwargs)

    def loads(self, s, **kwargs):
        return json.loads(s, **kwargs) if kwargs else orjson.loads(s)


# --- the hooks ----------------------------------------------------------------------------------------

# The routes that answer whatever the database's state: they report it.
SCHEMA_NOT_NEEDED = frozenset({"identities.healthz", "identities.readyz"})
SCHEMA_CHECKED = "identity_schema_current"


def refuse_until_migrated():
    """Before a request of the API (the blueprint's hook): a database not at the latest migration is a 503 naming the command
    that fixes it. Once a process has seen the latest schema it trusts it (a schema is not downgraded
    under a running service), so a request pays one look-up."""
    if not current_app.extensions.get(SCHEMA_CHECKED) and request.endpoint not in SCHEMA_NOT_NEEDED:
        readiness.schema_state()
        current_app.extensions[SCHEMA_CHECKED] = True


def finish_response(response):
    """After every request: its rate-limit window, nosniff and its id in the headers; then its metrics and
    its access line, named by the route's rule (one value per route, and no id or stray secret of a URL
    copied into the metrics or the logs) and the key's id, never the key."""
    # The request itself, read once through Flask's proxy ("Notes On Proxies"): every other read is plain.
    served = request._get_current_object()
    seconds = time.perf_counter() - served.started
    rule, method = served.url_rule, served.method
    route = None if rule is None else rule.rule
    headers = response.headers
    if served.rate_limit_window is not None:
        served.rate_limit_window.add_headers(headers)
    # Browsers must not guess a type for problem+json or JSON bodies and then render them.
    headers["X-Content-Type-Options"] = "nosniff"
    request_id = headers[REQUEST_ID_HEADER] = served.request_id
    status = response.status_code
    if current_app.config["IDENTITY_METRICS_ENABLED"]:
        count, latency = _metrics_of(route, method, status)
        count.inc()
        latency.observe(seconds)
    if access_log.isEnabledFor(logging.INFO):
        caller = served.caller
        access_log.info("%s %s %s", method, route, status, extra={
            "method": method, "route": route, "status": status, "duration_ms": round(seconds * 1000, 3),
            "request_id": request_id, "key_id": caller.key_id if caller else None,
        })
    return response


# The labelled children of the request metrics, by (route, method, status): a few combinations that recur
# on every request, where `labels()` checks and looks its values up under a lock on each call.
_children = {}


def _metrics_of(route, method, status):
    children = _children.get((route, method, status))
    if children is None:
        label = metrics.UNMATCHED if route is None else route
        children = _children[route, method, status] = (
            metrics.REQUESTS.labels(label, method, str(status)), metrics.LATENCY.labels(label, method)
        )
    return children


def init_app(app):
    app.request_class = Request
    app.json = OrjsonProvider(app)
    app.after_request(finish_response)
