"""Request ids: echoed from X-Request-ID when it is safe to, generated otherwise; assigned on first use
(a log line, an error, the response's own header, which finish.py sends), and kept on the request
(wrappers.Request.request_id)."""

import re
import secrets

from flask import request

from ..core.keys import KEY_PREFIX

HEADER = "X-Request-ID"
# Short and printable ASCII only: the id is copied into headers and log lines, so nothing that could
# split a line, smuggle a header or flood the logs is ever echoed.
_SAFE = re.compile(r"[\x21-\x7e]{1,128}")


def _is_safe(incoming):
    # A client that sends its API key as a request id must not get it written to the logs.
    return _SAFE.fullmatch(incoming) is not None and KEY_PREFIX not in incoming


def current_request_id():
    """The id of the request being served, assigned on first use; None for a request of another app
    in the same process (its request class is not the service's)."""
    return getattr(request, "request_id", None)


def request_id_of(headers):
    """A request's id, given its headers (Werkzeug's)."""
    incoming = headers.get(HEADER, "")
    # Generated: 32 hex digits, 128 random bits (uuid4().hex fixes 6 of them, in three times the time).
    return incoming if _is_safe(incoming) else secrets.token_hex(16)
