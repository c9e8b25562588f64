"""Request ids: echoed from X-Request-ID when it is safe to, generated otherwise."""

import re
import uuid

from flask import g, request

HEADER = "X-Request-ID"
_SAFE = re.compile(r"[\x21-\x7e]{1,128}")


def assign_request_id():
    incoming = request.headers.get(HEADER, "")
    g.request_id = incoming if _SAFE.fullmatch(incoming) else uuid.uuid4().hex


def send_request_id(response):
    response.headers[HEADER] = g.get("request_id") or uuid.uuid4().hex
    return response


def init_app(app):
    app.before_request(assign_request_id)
    app.after_request(send_request_id)
