"""Signing in to the console with an Admin key, and out.

The key is pasted once, posted in the form's body (never a URL), checked by identity.core.sessions, and
forgotten: from then on the browser holds only the session's random token. A User key is refused with
a page that says why.
"""

import hmac
import secrets

from flask import g, make_response, redirect, request, url_for

from ..core import sessions
from . import bp
from .guard import COOKIE, SIGN_IN_COOKIE, clear_session_cookie, local_path, set_session_cookie
from .pages import error_page, render

STALE_FORM = "This sign-in form has expired or was not sent from the console's own page. Reload it and sign in again."


@bp.route("/sign-in", methods=["GET", "POST"])
def sign_in():
    """The sign-in page; its form posts an Admin key."""
    if g.session is not None:
        return redirect(local_path(request.values.get("next")))
    if request.method == "GET":
        return _sign_in_page(signed_out=request.args.get("done") == "signed-out")
    expected = request.cookies.get(SIGN_IN_COOKIE, "")
    if not expected or not hmac.compare_digest(request.form.get("form_token", "").encode(), expected.encode()):
        return error_page(403, "Forbidden", STALE_FORM)
    try:
        token, _ = sessions.open_session(request.form.get("key", "").strip())
    except sessions.SignInRefused as refusal:
        if refusal.admin_only:
            return render("refused.html", 403, detail=refusal.detail)
        return _sign_in_page(error=refusal.detail, status=401)
    response = redirect(local_path(request.form.get("next")), 303)
    set_session_cookie(response, token)
    response.delete_cookie(SIGN_IN_COOKIE, path=bp.url_prefix)
    return response


def _sign_in_page(error=None, status=200, signed_out=False):
    form_token = secrets.token_urlsafe(32)
    body, status = render("sign_in.html", status, error=error, signed_out=signed_out, form_token=form_token,
                          next=local_path(request.values.get("next")))
    response = make_response(body, status)
    response.set_cookie(SIGN_IN_COOKIE, form_token, path=bp.url_prefix, httponly=True, samesite="Strict",
                        secure=request.is_secure)
    return response


@bp.route("/sign-out", methods=["POST"])
def sign_out():
    """End the session, here and on every worker and node."""
    sessions.close_session(request.cookies.get(COOKIE))
    response = redirect(url_for("console.sign_in", done="signed-out"), 303)
    clear_session_cookie(response)
    return response
