"""The Admin console at /admin: pages in the browser for the people who run the service, served by the
service itself.

One blueprint, `console`: Jinja templates (templates/console/), plain CSS and a small script of our own
(static/), no build step. What every page passes through is in `guard` (the session cookie, the Origin
and CSRF checks, the security headers) and `pages` (rendering, error pages); the sign-in in `signin`;
then one module of views per page: identities, keys, webhooks, mirrors, changes, audit, status. The views call the
same core functions as the JSON API (identity.web): the console never calls the API, and the API never
reads the console's cookie.
"""

from flask import Blueprint

bp = Blueprint(
    "console", __name__, url_prefix="/admin", template_folder="templates", static_folder="static",
    static_url_path="/static",
)

from . import audit, changes, guard, identities, keys, mirrors, pages, signin, status, webhooks  # noqa: E402,F401 - registers the views


def init_app(app):
    """Serve the console at /admin."""
    app.register_blueprint(bp)
