"""Response headers: conditional GET for cacheable representations, and what every response carries."""

from functools import wraps

from flask import Response, make_response, request
from werkzeug.http import generate_etag


def conditional(view):
    """Give the view's response a strong ETag and answer a matching If-None-Match with 304.

    The ETag is a hash of the exact body sent: an identity's content never changes, but its
    embedded creator's last_login does, so a tag of the content alone would vouch for a body
    that is no longer the one served. The body is the same for every caller, but it is served
    only behind a key: a shared cache must not hand it to a client without one (private).
    """

    @wraps(view)
    def wrapper(*args, **kwargs):
        answer = view(*args, **kwargs)
        # make_response would hand a Response back as it is, through current_app: a read of the proxy.
        response = answer if isinstance(answer, Response) else make_response(answer)
        if "ETag" not in response.headers:  # the content route sets its own
            response.set_etag(body_etag(response.get_data()))
        response.headers["Cache-Control"] = "private"
        if not CONDITIONAL_HEADERS.intersection(request.environ):
            # Nothing to evaluate. (make_conditional would also stamp a Date header, which the
            # server sends anyway: gunicorn writes its own, and one response would carry two.)
            return response
        # Werkzeug compares If-None-Match weakly, as RFC 9110 asks, and knows "*" and lists of
        # tags; a 304 keeps the ETag and Cache-Control headers and loses the body.
        return response.make_conditional(request)

    return wrapper


# The request headers that can make a GET's answer conditional (RFC 9110, section 13; and Range),
# as WSGI names them.
CONDITIONAL_HEADERS = frozenset(
    ("HTTP_IF_NONE_MATCH", "HTTP_IF_MATCH", "HTTP_IF_MODIFIED_SINCE", "HTTP_IF_UNMODIFIED_SINCE", "HTTP_IF_RANGE",
     "HTTP_RANGE")
)


def body_etag(data):
    """The strong ETag of a body: a hash of its exact bytes. GET sends it; PATCH's If-Match is compared with it."""
    return generate_etag(data)


def add_security_headers(headers):
    """The headers every response carries for browsers' sake, in `headers` (Werkzeug's)."""
    # Browsers must not guess a type for problem+json or JSON bodies and then render them. (No view
    # sets it; set, not setdefault, whose look-up of a missing header raises and catches a KeyError.)
    headers["X-Content-Type-Options"] = "nosniff"
