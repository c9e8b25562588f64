"""Request ids: echoed from X-Request-ID when it is safe to, generated otherwise."""

import os
import re

from flask import g, request

# The module, not the name: auth imports errors, which imports this module.
from . import auth

HEADER = "X-Request-ID"
_ENVIRON_KEY = "HTTP_X_REQUEST_ID"  # where WSGI puts the header; cheaper to read than request.headers
# Short and printable ASCII only: the id is copied into headers and log lines, so nothing that could
# split a line, smuggle a header or flood the logs is ever echoed.
_SAFE = re.compile(r"[\x21-\x7e]{1,128}")


def _is_safe(incoming):
    # A client that sends its API key as a request id must not get it written to the logs.
    return _SAFE.fullmatch(incoming) is not None and auth.KEY_PREFIX not in incoming


def current_request_id():
    """The id of the request being served, assigned on first use."""
    # The objects behind the proxies, taken once: each attribute asked of a proxy costs as much as
    # a small function call (see application.py).
    context = g._get_current_object()
    request_id = context.get("request_id")
    if request_id is None:
        incoming = request._get_current_object().environ.get(_ENVIRON_KEY, "")
        # 128 random bits in hex, as uuid4().hex but without building a UUID object per request.
        request_id = context.request_id = incoming if _is_safe(incoming) else os.urandom(16).hex()
    return request_id


def send_request_id(response):
    response.headers.add(HEADER, current_request_id())  # only this hook sets it
    return response


def init_app(app):
    # No before_request hook: the id is assigned on first use (a log line, an error, this header).
    app.after_request(send_request_id)
