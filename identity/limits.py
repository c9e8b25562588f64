"""Rate limits per API key, by Flask-Limiter: one budget for reads, one for creates.

The limits sit under `auth.login_required` on each view, so they are checked after the key is:
a request with a missing, unknown or revoked key is refused with 401 before it can touch any
budget, and the budget is named by the key's id, never by the key itself.
"""

from flask import current_app
from flask_limiter import Limiter

from .auth import current_caller


def caller_key_id():
    """Whose budget a request spends: the id of the authenticated key (only valid under login_required)."""
    return current_caller().key_id


# One Limiter for the process, as Flask-Limiter is built to be used: its storage and settings come
# from the app that init_app last bound, which in production is the only one. No default or
# application limits: only the routes decorated below are limited, so /healthz, /readyz, the
# OpenAPI document and /metrics never are.
limiter = Limiter(
    key_func=caller_key_id,
    key_prefix="identity",
    strategy="fixed-window",
    headers_enabled=True,
    # When the shared storage (Redis) does not answer, count in this process until it is back,
    # rather than failing every request: a degraded limit beats an outage.
    in_memory_fallback_enabled=True,
    swallow_errors=True,
)


def _budget(setting, scope, what):
    """A limit shared by every route it decorates (the singular and plural paths spend one budget)."""
    return limiter.shared_limit(
        lambda: current_app.config[setting],
        scope=scope,
        error_message=lambda: (
            f"Too many {what} with this API key: the limit is {current_app.config[setting]}. "
            "Retry after the number of seconds in Retry-After."
        ),
    )


reads = _budget("IDENTITY_RATELIMIT_READ", "read", "reads")
creates = _budget("IDENTITY_RATELIMIT_CREATE", "create", "creates")


def init_app(app):
    app.config.update(
        RATELIMIT_ENABLED=True,
        RATELIMIT_STORAGE_URI=app.config["IDENTITY_RATELIMIT_STORAGE"],
    )
    limiter.init_app(app)
    # Flask-Limiter also checks every request in a before_request hook, for default and application
    # limits. There are none here (only the decorated routes are limited, and the decorator does its
    # own check), so that hook would only repeat, on every request, the search for limits that do
    # not exist: a tenth of a read's time. Its header and teardown hooks stay.
    app.before_request_funcs[None].remove(limiter._check_request_limit)
