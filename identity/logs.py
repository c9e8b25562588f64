"""Structured logs: every line one JSON object carrying its request's id; one access line per request.

The access line goes to standard output, everything else to standard error. gunicorn.conf.py hands
`logging_config()` to gunicorn, so its own lines are JSON too. No log line is built from a request's
body, path or headers (but a vetted X-Request-ID), so an API key cannot reach the logs: a request is
named by its route and its key's id.
"""

import logging
import logging.config
import time
from datetime import UTC, datetime

import orjson
from flask import has_request_context, request
from pythonjsonlogger.orjson import OrjsonFormatter

from .auth import current_caller
from .request_id import current_request_id

access_log = logging.getLogger("identity.access")


class RequestIdFilter(logging.Filter):
    """Stamp each record with the id of the request it was logged in (null outside requests)."""

    def filter(self, record):
        if not hasattr(record, "request_id"):
            record.request_id = current_request_id() if has_request_context() else None
        return True


def json_formatter():
    """The formatter of every log line: time, level, logger, message, request_id, then any extras."""
    # orjson, as for the responses: one line per request makes the encoder part of every request's cost.
    return OrjsonFormatter(
        "%(levelname)s %(name)s %(message)s %(request_id)s",
        rename_fields={"levelname": "level", "name": "logger"},
        timestamp="time",
    )


class AccessFormatter(logging.Formatter):
    """The access line's formatter: the very object json_formatter() writes for it, built directly.

    python-json-logger looks through every attribute of a record for extra fields, then renames and
    copies them; the access line, written once per request, has a fixed set of fields, so this one
    takes them by name. json_formatter() stays the reference: tests/test_logs.py checks that the two
    write the same line, and any record that is not a plain access line is left to it.
    """

    def __init__(self):
        super().__init__()
        self.reference = json_formatter()

    def format(self, record):
        if record.exc_info or record.exc_text or record.stack_info or not isinstance(record.msg, str):
            return self.reference.format(record)
        get = record.__dict__.get
        return orjson.dumps(
            {
                "level": record.levelname,
                "logger": record.name,
                # log_access passes its message made, without arguments; getMessage would only copy it.
                "message": record.getMessage() if record.args else record.msg,
                "request_id": get("request_id"),
                "method": get("method"),
                "route": get("route"),
                "status": get("status"),
                "duration_ms": get("duration_ms"),
                "key_id": get("key_id"),
                "time": datetime.fromtimestamp(record.created, UTC),
            }
        ).decode()


def logging_config(level="INFO"):
    """A logging.config.dictConfig mapping that makes every logger in the process write JSON."""
    handler = {"class": "logging.StreamHandler", "formatter": "json", "filters": ["request_id"]}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": json_formatter}, "access": {"()": AccessFormatter}},
        "filters": {"request_id": {"()": RequestIdFilter}},
        "handlers": {
            "stdout": {**handler, "stream": "ext://sys.stdout", "formatter": "access"},
            "stderr": {**handler, "stream": "ext://sys.stderr"},
        },
        "root": {"level": level, "handlers": ["stderr"]},
        "loggers": {
            "identity.access": {"handlers": ["stdout"], "propagate": False},
            "gunicorn.error": {"level": level, "handlers": ["stderr"], "propagate": False},
            # The app writes the access line (it knows the route and the key id); gunicorn's would
            # be a second, poorer line per request.
            "gunicorn.access": {"handlers": [], "propagate": False},
        },
    }


def log_access(response):
    if not access_log.isEnabledFor(logging.INFO):
        return response
    current = request._get_current_object()  # one lookup of the request rather than one per field
    caller = current_caller()
    # The rule, not the path: one route is one value, and no id or stray secret in a URL is copied
    # into the logs. Unmatched paths (404, 405) have no rule.
    route = current.url_rule.rule if current.url_rule else None
    method, status = current.method, response.status_code
    access_log.info(
        f"{method} {route} {status}",
        extra={
            "method": method,
            "route": route,
            "status": status,
            "duration_ms": round((time.perf_counter() - current.started) * 1000, 3),
            "request_id": current_request_id(),
            "key_id": caller.key_id if caller else None,
        },
    )
    return response


def init_app(app):
    # A process nobody configured logging for (flask run, a script) gets the same JSON lines as
    # gunicorn; one that did (gunicorn.conf.py, pytest) keeps its own handlers.
    if not logging.getLogger().handlers:
        logging.config.dictConfig(logging_config(app.config["IDENTITY_LOG_LEVEL"]))
    app.after_request(log_access)
