"""The keys: the listing (by wallet, live or not), issuing one (shown once, on the page that answers the
form, never again), and revoking one after a confirmation, through the core functions of /keys.

A key just issued is in that one answer only: not in a URL (the form posts), not in a later page (the
answer is not a redirect, and Cache-Control: no-store keeps it out of the browser's cache), and not in a
log line (the core logs the key's id).
"""

from flask import g, redirect, request, url_for
from marshmallow import ValidationError

from ..core import keys
from ..schemas import KeyCreateSchema, KeyListArgsSchema
from . import bp
from .pages import field_messages, listing, render

# What the issue form offers for expires_in, in seconds ("" for never).
EXPIRIES = (("", "never"), ("3600", "in 1 hour"), ("86400", "in 1 day"), ("2592000", "in 30 days"),
            ("31536000", "in 1 year"))
STATES = (("", "any"), ("true", "working"), ("false", "revoked or expired"))
LISTING = ("wallet", "active", "cursor")
DONE = {"revoked": "The key is revoked: the API refuses it now (within IDENTITY_KEY_CACHE_SECONDS on other "
                   "workers and nodes), and so does the console."}
_list_args = KeyListArgsSchema()
_create = KeyCreateSchema()


@bp.route("/keys")
def keys_page():
    """Keys, newest first, without their secrets."""
    return _keys_page()


def _keys_page(status=200, form=None, form_errors=None):
    shown = listing(LISTING, _list_args.load, keys.list_keys)
    return render("keys.html", status if shown["page"] else 400, **shown, form=form or {},
                  form_errors=form_errors or {}, expiries=EXPIRIES, states=STATES, done=DONE.get(request.args.get("done")))


@bp.route("/keys", methods=["POST"])
def issue_key():
    """Issue a key; the answer shows it this once."""
    form = {name: request.form.get(name, "").strip() for name in ("wallet", "role", "scope", "label", "expires_in")}
    fields = {
        "wallet": form["wallet"], "role": form["role"] or None, "scope": form["scope"] or "write",
        "label": form["label"] or None,
        "expires_in": int(form["expires_in"]) if form["expires_in"].isdigit() else form["expires_in"] or None,
    }
    try:
        fields = _create.load({name: value for name, value in fields.items() if value is not None})
    except ValidationError as invalid:
        return _keys_page(422, form, field_messages(invalid.normalized_messages()))
    options = {name: fields.get(name) for name in ("scope", "label", "expires_in")}
    key, api_key = keys.issue_key(fields["wallet"], fields.get("role"), **options, created_by=g.session.caller.wallet)
    return render("key_issued.html", 201, issued=keys.issued_record(key, api_key))


@bp.route("/keys/<key_id>/revoke")
def confirm_revoke(key_id):
    """The confirmation step before a key is revoked."""
    return render("key_revoke.html", key=keys.get_key(key_id))


@bp.route("/keys/<key_id>/revoke", methods=["POST"])
def revoke_key(key_id):
    """Revoke a key now (one revoked already stays revoked)."""
    if not keys.revoke_key(key_id=key_id, by=g.session.caller.wallet):
        keys.get_key(key_id)  # KeyNotFound for an unknown id
    return redirect(url_for("console.keys_page", done="revoked"), 303)
