"""Request ids: echoed from X-Request-ID when it is safe to, generated otherwise; assigned on first use
(a log line, an error, the response's own header, which finish.py sends)."""

import re
import secrets

from flask import g, request

from .keys import KEY_PREFIX

HEADER = "X-Request-ID"
# Short and printable ASCII only: the id is copied into headers and log lines, so nothing that could
# split a line, smuggle a header or flood the logs is ever echoed.
_SAFE = re.compile(r"[\x21-\x7e]{1,128}")


def _is_safe(incoming):
    # A client that sends its API key as a request id must not get it written to the logs.
    return _SAFE.fullmatch(incoming) is not None and KEY_PREFIX not in incoming


def current_request_id():
    """The id of the request being served, assigned on first use."""
    request_id = g.get("request_id")
    if request_id is None:
        incoming = request.headers.get(HEADER, "")
        # Generated: 32 hex digits, 128 random bits (uuid4().hex fixes 6 of them, in three times the time).
        request_id = g.request_id = incoming if _is_safe(incoming) else secrets.token_hex(16)
    return request_id
