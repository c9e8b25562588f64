"""Structured logs: every line one JSON object carrying its request's id; one access line per request
(web.hooks writes it).

The access line goes to standard output, everything else to standard error. gunicorn.conf.py hands
`logging_config()` to gunicorn, so its own lines are JSON too. No log line is built from a request's
body, path or headers (but a vetted X-Request-ID), so an API key cannot reach the logs: a request is
named by its route and its key's id. Should a key reach a line anyway (gunicorn's parser names a header
line it could not read), the standard error's filter blanks it.
"""

import logging
import logging.config
import re

from flask import has_request_context
from pythonjsonlogger.orjson import OrjsonFormatter

from ..core.keys import KEY_PREFIX
from .hooks import ACCESS_LOGGER, current_request_id


class RequestIdFilter(logging.Filter):
    """Stamp each record with the id of the request it was logged in (null outside requests)."""

    def filter(self, record):
        if not hasattr(record, "request_id"):
            record.request_id = current_request_id() if has_request_context() else None
        return True


ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# werkzeug's request line: `127.0.0.1 - - [23/Nov/2026 18:40:00] "GET /healthz HTTP/1.1" 200 -`
DEV_SERVER_REQUEST = re.compile(r'^\S+ - - \[[^\]]*\] "')


class DevServerLines(logging.Filter):
    """flask run's server (werkzeug): each request is logged once, by the app's access line, so werkzeug's
    own request line is dropped; its other lines lose their terminal colours, raw escapes inside JSON."""

    def filter(self, record):
        message = ANSI_ESCAPE.sub("", record.getMessage()).rstrip("\n")
        if DEV_SERVER_REQUEST.match(message):
            return False
        record.msg, record.args = message, ()
        return True


JSON_FIELDS = "%(levelname)s %(name)s %(message)s %(request_id)s"
RENAMED_FIELDS = {"levelname": "level", "name": "logger"}


def json_formatter():
    """The formatter of every log line: time, level, logger, message, request_id, then any extras."""
    return OrjsonFormatter(JSON_FIELDS, rename_fields=RENAMED_FIELDS, timestamp="time")


# A key is the prefix and URL-safe base64 (identity.web.auth); anything that starts like one is blanked,
# a truncated or mangled key too.
_KEY = re.compile(re.escape(KEY_PREFIX) + r"[A-Za-z0-9_\-]*")
REDACTED = KEY_PREFIX + "[redacted]"


def redact(text):
    return _KEY.sub(REDACTED, text)


class RedactKeys(logging.Filter):
    """Rewrite a record whose message or exception text holds a key; pass every record on."""

    def filter(self, record):
        message = record.getMessage()
        if KEY_PREFIX in message:
            record.msg, record.args = redact(message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text and KEY_PREFIX in record.exc_text:
            record.exc_text = redact(record.exc_text)
        return True


def logging_config(level="INFO"):
    """A logging.config.dictConfig mapping that makes every logger in the process write JSON."""
    handler = {"class": "logging.StreamHandler", "formatter": "json"}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": json_formatter}},
        "filters": {
            "request_id": {"()": RequestIdFilter}, "dev_server": {"()": DevServerLines}, "redact_keys": {"()": RedactKeys},
        },
        "handlers": {
            # An access line carries its request id and is made from the route and the key's id alone.
            "stdout": {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stdout"},
            "stderr": {**handler, "filters": ["request_id", "redact_keys"], "stream": "ext://sys.stderr"},
        },
        "root": {"level": level, "handlers": ["stderr"]},
        "loggers": {
            ACCESS_LOGGER: {"handlers": ["stdout"], "propagate": False},
            "gunicorn.error": {"level": level, "handlers": ["stderr"], "propagate": False},
            # The app writes the access line (it knows the route and the key id); gunicorn's would
            # be a second, poorer line per request.
            "gunicorn.access": {"handlers": [], "propagate": False},
            # Reading the schema's migration (readiness, the CLI's check) would log two lines of Alembic
            # set-up each time; `flask db upgrade` configures Alembic's logging itself and shows its steps.
            "alembic.runtime.migration": {"level": "WARNING"},
            # flask run's development server: its request lines repeat the access line, and its own
            # lines carry terminal colours (see DevServerLines).
            "werkzeug": {"filters": ["dev_server"]},
        },
    }


def init_app(app):
    # A process nobody configured logging for (flask run, a script) gets the same JSON lines as
    # gunicorn; one that did (gunicorn.conf.py, pytest) keeps its own handlers.
    if not logging.getLogger().handlers:
        logging.config.dictConfig(logging_config(app.config["IDENTITY_LOG_LEVEL"]))
