"""Who is calling: the API key in x-api-key, checked through Flask-HTTPAuth; and what each view asks of a
request before it runs (access): the key, its role and the budget it spends.

The key's lookup is the core's (identity.core.keys.caller_of); here are the HTTP words: the header, the
challenge of a 401, the Admin role of a route, and what a read-only key may not do.
"""

from flask import current_app, request
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
    """A valid key refused on an Admin route for its role: the refusal is an audit entry of its own, once it has
    spent the caller's budget (web.budgets.spend_on_refusal): past the budget, a 429 and no entry, so a key that
    keeps knocking adds entries no faster than its budget lets it make requests."""
    from .budgets import spend_on_refusal  # web.budgets imports this module

    spend_on_refusal()
    route = request.url_rule.rule if request.url_rule is not None else request.path
    audit.record_now("admin_route.refuse", "route", f"{request.method} {route}", outcome="refused",
                     detail=ADMIN_ONLY_DETAIL)


# The view function's attribute that holds what access() declared (as Flask reads `methods` and
# `provide_automatic_options` off a view function): functools.wraps carries it up through flask-smorest's
# and webargs' wrappers, so it is on the function the route registers wherever access() sits.
ACCESS = "identity_access"


def access(budget, *, role=None, when=None):
    """Declare what a request must pass before the view runs: the key in x-api-key (401) and, with `role`,
    its user's role (403), by Flask-HTTPAuth's login_required; then `when` (a check that raises to refuse,
    such as sign-in with Ethereum being off); then `budget` (web.budgets: 429 once spent). A budget counted by
    client address (the sign-in routes') takes no key.

    The declaration is checked by check_access, the blueprint's before_request hook, so it holds before any
    decorator of the view runs (a body is read only from a caller that passed), in whatever order they sit.
    """
    if role is not None and not budget.per_key:
        raise ValueError("a role needs a key: give a budget counted per key")

    def check():
        if when is not None:
            when()
        budget.spend()

    if budget.per_key:
        check = auth.login_required(role=role)(check)

    def declare(view):
        setattr(view, ACCESS, check)
        return view

    return declare


def check_access():
    """Before a request of the API (the blueprint's hook): what its view's access() declared; a refusal is
    the answer. OPTIONS is Flask's to answer (its Allow header), for every route: no key asked, no budget spent."""
    if request.method == "OPTIONS":
        return None
    check = getattr(current_app.view_functions.get(request.endpoint), ACCESS, None)
    return None if check is None else check()


def current_caller():
    """The Caller of the request being served (None before authentication, and for no valid key)."""
    return request.caller
