"""Who is calling: the API key in x-api-key, checked on every request through Flask-HTTPAuth.

The key's lookup is the core's (identity.core.keys.caller_of); here are the HTTP words: the header, the
challenge of a 401, the Admin role of a route, and what a read-only key may not do.
"""

from flask import request
from flask_httpauth import HTTPTokenAuth

from ..core import audit
from ..core.errors import ReadOnlyKey
from ..core.keys import caller_of
from .problems import problem

HEADER = "x-api-key"
CHALLENGE = f'ApiKey header="{HEADER}"'
UNAUTHORIZED_DETAIL = f"A valid API key is required in the {HEADER} header."
ADMIN_ONLY_DETAIL = "Only an Admin key may do this."
# What a read-only key may do besides GET, HEAD and OPTIONS: revoke itself, should it leak.
READ_SCOPE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
READ_SCOPE_ENDPOINTS = frozenset({"identities.revoke_my_key"})

auth = HTTPTokenAuth(scheme="ApiKey", header=HEADER)


@auth.verify_token
def authenticate(key):
    """The request's Caller, or None for no valid key; ReadOnlyKey for a read-only key on a route that
    writes. The Caller is kept on the request (web.hooks.Request.caller), where current_caller reads it,
    as soon as the key is known good: a request refused for its role (403) is logged with its key's id."""
    caller = request.caller = caller_of(key)
    if caller is not None and caller.scope == "read" and request.method not in READ_SCOPE_METHODS:
        if request.endpoint not in READ_SCOPE_ENDPOINTS:
            raise ReadOnlyKey()
    return caller


@auth.get_user_roles
def caller_roles(caller):
    """The role of the key's user, for `auth.login_required(role="Admin")`."""
    return caller.role


@auth.error_handler
def unauthorized(status):
    if status == 403:  # a valid key whose role is not the one the route needs
        admin_route_refused()
        return problem(403, ADMIN_ONLY_DETAIL)
    # One answer for missing, unknown, revoked and expired keys: the response must not tell them apart.
    return problem(401, UNAUTHORIZED_DETAIL, headers={"WWW-Authenticate": CHALLENGE})


def admin_route_refused():
    """A valid key refused on an Admin route for its role: the refusal is an audit entry of its own."""
    route = request.url_rule.rule if request.url_rule is not None else request.path
    audit.record_now("admin_route.refuse", "route", f"{request.method} {route}", outcome="refused",
                     detail=ADMIN_ONLY_DETAIL)


def current_caller():
    """The Caller of the request being served (None before authentication, and for no valid key)."""
    return request.caller
