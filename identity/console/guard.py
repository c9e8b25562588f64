"""What every console request passes through: who is signed in (the session cookie), whether a change
comes from the console's own pages (Origin, CSRF token), and the headers that keep a page from being
framed, from running a script it did not load from here, and from being kept in a cache.

The session cookie holds a random token (identity.core.sessions keeps its hash and the key's id);
it is HttpOnly, SameSite=Strict, Path=/admin, and Secure when the request came over https, which
behind the nginx recipe gunicorn learns from X-Forwarded-Proto (its forwarded_allow_ips, 127.0.0.1 by
default). The JSON API never reads it: the API authenticates by x-api-key alone.
"""

from urllib.parse import urlsplit

from flask import abort, g, redirect, request, url_for

from ..core import sessions
from ..storage import readiness
from . import bp

COOKIE = "identity_console"
# The sign-in form's own token, compared with the one this cookie carries (a double submit): there is no
# session yet to hold one.
SIGN_IN_COOKIE = "identity_console_sign_in"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# Pages served to a visitor who is not signed in.
PUBLIC = frozenset({"console.sign_in", "console.wallet_message", "console.sign_in_with_wallet", "console.static"})
# What a session of a read-only key may post: its own end.
READ_SCOPE_POSTS = frozenset({"console.sign_out"})
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'; object-src 'none'"
)
OTHER_ORIGIN = (
    "This form was not sent from the console's own pages (its Origin is {origin}): nothing was changed. "
    "Open the console at {ours}/admin and use its forms."
)
NO_CSRF_TOKEN = (
    "This form did not carry the console's token for your session (it may come from an older page or from "
    "another site): nothing was changed. Reload the page and try again."
)
READ_ONLY = (
    "You are signed in with a read-only key (scope read): the console shows everything and changes "
    "nothing. Sign in with a key of scope write to change this."
)


def own_origin():
    """This console's origin as the browser sees it: scheme, host and port (https behind the proxy too)."""
    return request.host_url.rstrip("/")


def refuse_other_origins():
    """403 for a change whose Origin (or, lacking one, Referer) is not this console's, or names none:
    browsers send Origin with every POST, and a cross-site form must not act here."""
    origin = request.headers.get("Origin")
    if origin is None and request.referrer:
        try:
            parts = urlsplit(request.referrer)
            origin = f"{parts.scheme}://{parts.netloc}"
        except ValueError:  # not a URL (an unclosed IPv6 bracket): no origin
            origin = None
    if origin != own_origin():
        abort(403, OTHER_ORIGIN.format(origin=origin or "missing", ours=own_origin()))


@bp.before_request
def guard():
    """Before each console request: the schema current, the session known, and a change refused unless it
    comes from our own page of a live, writing session."""
    if request.endpoint == "console.static":
        return None
    readiness.require_latest_schema()
    session = sessions.session_of(request.cookies.get(COOKIE))
    if session is not None and session.caller.role != "Admin":  # the wallet's role changed since
        session = None
    g.session = session
    request.caller = session.caller if session else None  # the access line names the key's id
    if request.method not in SAFE_METHODS:
        refuse_other_origins()
    if request.endpoint in PUBLIC:
        return None
    if session is None:
        if request.endpoint == "console.change_stream":
            abort(401, "Sign in to the console again: the session has ended.")
        return redirect(url_for("console.sign_in", next=request.full_path.rstrip("?")))
    if request.method not in SAFE_METHODS:
        if session.caller.scope != "write" and request.endpoint not in READ_SCOPE_POSTS:
            abort(403, READ_ONLY)
        if not sessions.holds_csrf_token(session, request.form.get("csrf_token", "")):
            abort(403, NO_CSRF_TOKEN)
    return None


@bp.after_request
def protect(response):
    """The console's pages run only what they load from here, are never framed, and are never cached:
    a page that showed a key once must not come back from a cache."""
    response.headers["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
    response.headers["X-Frame-Options"] = "DENY"
    response.headers["Referrer-Policy"] = "same-origin"
    if request.endpoint != "console.static":
        response.headers["Cache-Control"] = "no-store"
    return response


def set_session_cookie(response, token):
    """The browser keeps the session's token until it closes, the session ends, or it signs out."""
    response.set_cookie(COOKIE, token, path=bp.url_prefix, httponly=True, samesite="Strict", secure=request.is_secure)


def clear_session_cookie(response):
    response.delete_cookie(COOKIE, path=bp.url_prefix, httponly=True, samesite="Strict", secure=request.is_secure)


def local_path(target):
    """`target` if it is a console page of this service (where sign-in returns to), else the console's home."""
    if target and target.startswith(bp.url_prefix + "/") and not target.startswith("//") and "\\" not in target:
        return target
    return url_for("console.home")
