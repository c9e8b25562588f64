"""Signing in to the console with an Admin key or an Admin wallet, and out.

The key is pasted once, posted in the form's body (never a URL), checked by identity.core.sessions, and
forgotten: from then on the browser holds only the session's random token. A User key is refused with
a page that says why.

When sign-in with Ethereum is on (IDENTITY_SIWE_DOMAIN), the page also has a button (static/wallet.js,
there only with JavaScript) that asks wallet_message for the EIP-4361 message naming the wallet's account
(written here, in its EIP-55 form) and a fresh nonce, has the browser's wallet sign it, and posts it to
sign_in_with_wallet in a form like the key's: the checks are POST /auth/siwe's, and only an Admin's wallet
opens a session.

wallet_message is a GET, as GET /auth/nonce is: it changes nothing (a nonce stores nothing until a sign-in
spends it), under the same budget per client address (web.budgets, the one thing the console takes from the web
layer); its answer carries nothing secret (a cross-site page cannot read it anyway), and is never cached.

An Admin wallet granted read only (users.grant) opens read-only sessions alone: asking for more is answered
with the sign-in page, 403, saying so.
"""

import hmac
import secrets

from flask import g, make_response, redirect, request, url_for

from ..core import sessions, signin
from ..core.errors import BeyondGrant, InvalidMessage, SigninRefused
from ..schemas import SigninMessageSchema
from ..web import budgets
from . import bp
from .guard import COOKIE, SIGN_IN_COOKIE, clear_session_cookie, local_path, set_session_cookie
from .pages import error_page, render

STALE_FORM = "This sign-in form has expired or was not sent from the console's own page. Reload it and sign in again."
# The message's statement, which the wallet shows when asked to sign: what the signature is for.
STATEMENT = "Sign in to the Identity service's console."
_message = SigninMessageSchema()


@bp.route("/sign-in", methods=["GET", "POST"])
def sign_in():
    """The sign-in page; its form posts an Admin key."""
    if g.session is not None:
        return redirect(local_path(request.values.get("next")))
    if request.method == "GET":
        return _sign_in_page(signed_out=request.args.get("done") == "signed-out")
    if not _form_token_matches():
        return error_page(403, "Forbidden", STALE_FORM)
    try:
        token, _ = sessions.open_session(request.form.get("key", "").strip())
    except sessions.SignInRefused as refusal:
        if refusal.admin_only:
            return render("refused.html", 403, detail=refusal.detail, by="key")
        return _sign_in_page(error=refusal.detail, status=401)
    return _signed_in(token)


@bp.route("/sign-in/wallet/message")
@signin.when_on
@budgets.nonces
def wallet_message():
    """The message for the wallet button to have signed, as JSON: for the wallet ?address= (as the wallet answers
    it) on ?chain_id= (decimal), naming a fresh nonce; 400 naming the parameter that is not one."""
    offered = signin.wallet_message(request.args.get("address"), request.args.get("chain_id"), STATEMENT)
    return _message.dump(offered)


@bp.route("/sign-in/wallet", methods=["POST"])
@signin.when_on
def sign_in_with_wallet():
    """The wallet button's form: an EIP-4361 message and its personal_sign signature, checked as POST
    /auth/siwe checks them."""
    if g.session is not None:
        return redirect(local_path(request.form.get("next")), 303)
    if not _form_token_matches():
        return error_page(403, "Forbidden", STALE_FORM)
    # A browser sends a form's line breaks as CRLF (the HTML standard's form encoding); wallet_message wrote, and
    # the wallet signed, the message with LF alone, as EIP-4361 lays it out.
    message = request.form.get("message", "").replace("\r\n", "\n")
    scope = "read" if request.form.get("scope") == "read" else "write"
    try:
        token, _ = sessions.open_wallet_session(message, request.form.get("signature", ""), scope)
    except sessions.SignInRefused as refusal:
        return render("refused.html", 403, detail=refusal.detail, by="wallet")
    except BeyondGrant as refusal:  # an Admin wallet granted read only, which may sign in again read-only
        return _sign_in_page(wallet_error=refusal.detail, status=403)
    except InvalidMessage as invalid:
        return _sign_in_page(wallet_error=invalid.detail, status=422)
    except SigninRefused as refusal:
        return _sign_in_page(wallet_error=refusal.detail, status=401)
    return _signed_in(token)


def _form_token_matches():
    """Whether the form carries the token its page set in the sign-in cookie (a double submit)."""
    expected = request.cookies.get(SIGN_IN_COOKIE, "")
    return bool(expected) and hmac.compare_digest(request.form.get("form_token", "").encode(), expected.encode())


def _signed_in(token):
    response = redirect(local_path(request.form.get("next")), 303)
    set_session_cookie(response, token)
    response.delete_cookie(SIGN_IN_COOKIE, path=bp.url_prefix)
    return response


def _sign_in_page(error=None, wallet_error=None, status=200, signed_out=False):
    form_token = secrets.token_urlsafe(32)
    body, status = render("sign_in.html", status, error=error, wallet_error=wallet_error, signed_out=signed_out,
                          form_token=form_token, next=local_path(request.values.get("next")),
                          wallet_sign_in=signin.is_on())
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
