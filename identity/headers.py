"""Response headers: conditional GET for cacheable representations, and what every response carries."""

from functools import wraps

from flask import current_app, request
from werkzeug.http import generate_etag

# The request headers that can make a response conditional (Werkzeug's make_conditional reads these).
_CONDITIONS = frozenset(("HTTP_IF_NONE_MATCH", "HTTP_IF_MATCH", "HTTP_IF_MODIFIED_SINCE", "HTTP_IF_UNMODIFIED_SINCE"))


def conditional(view):
    """Give the view's response a strong ETag and answer a matching If-None-Match with 304.

    The ETag is a hash of the exact body sent: an identity's content never changes, but its
    embedded creator's last_login does, so a tag of the content alone would vouch for a body
    that is no longer the one served. The body is the same for every caller, but it is served
    only behind a key: a shared cache must not hand it to a client without one (private).
    """

    @wraps(view)
    def wrapper(*args, **kwargs):
        response = current_app._get_current_object().make_response(view(*args, **kwargs))
        if not has_header(response.headers, "ETag"):  # the content route sets its own
            response.set_etag(generate_etag(response.get_data()))
        response.headers.add("Cache-Control", "private")
        current = request._get_current_object()
        if not _CONDITIONS.intersection(current.environ):
            return response  # nothing to compare: the full response, as it is
        # Werkzeug compares If-None-Match weakly, as RFC 9110 asks, and knows "*" and lists of
        # tags; a 304 keeps the ETag and Cache-Control headers and loses the body.
        return response.make_conditional(current)

    return wrapper


def has_header(headers, name):
    """Whether Werkzeug `headers` has `name`. Asking Headers itself (`in`, get, setdefault) builds and
    raises a BadRequestKeyError for every absent name, which costs more than looking."""
    name = name.lower()
    return any(key.lower() == name for key, _ in headers)


def add_security_headers(response):
    # Browsers must not guess a type for problem+json or JSON bodies and then render them.
    if not has_header(response.headers, "X-Content-Type-Options"):
        response.headers.add("X-Content-Type-Options", "nosniff")
    return response


def init_app(app):
    app.after_request(add_security_headers)
