"""The identities: the listing (search, filters, sort, cursor pages, the total) and one identity (every
field, its content checked against its id, its creator and signature, its history, Take down and
Restore), through the core functions GET /identities, GET and PATCH /identity/<id> use."""

from flask import g, redirect, request, url_for
from marshmallow import ValidationError

from ..core import authorship, browse, content, curation, history, identities
from ..core.errors import IdentityNotFound, InvalidParameters, PreconditionFailed
from ..core.signatures import SignatureError
from ..schemas import SORT_KEYS, STATUSES, identity_body, identity_list_args_schema, identity_schema
from . import bp
from .pages import error_page, field_messages, render

# The listing's query parameters that the page's form and links carry.
LISTING = ("q", "status", "creator", "sortBy", "direction", "cursor")
CONFLICT = (
    "Someone else changed this identity after you opened it, so nothing was changed. "
    "This page now shows it as it is: check it, then take it down or restore it again if you still mean to."
)
DONE = {"removed": "The identity is taken down: it answers 410 Gone and is left out of listings.",
        "restored": "The identity is restored: it is served and listed again."}


@bp.route("/identities")
def identities_page():
    """Identities: the listing's search, filters, order and cursor, as GET /identities takes them."""
    asked = {name: value for name in LISTING if (value := request.args.get(name, "").strip())}
    page, errors = None, {}
    try:
        page = browse.list_identities(identity_list_args_schema.load(asked), g.session.caller)
    except ValidationError as invalid:
        errors = field_messages(invalid.normalized_messages())
    except InvalidParameters as invalid:
        errors = field_messages(invalid.errors)
    filters = {name: value for name, value in asked.items() if name != "cursor"}
    return render("identities.html", 200 if page else 400, page=page, asked=asked, filters=filters, errors=errors,
                  statuses=STATUSES, sort_keys=SORT_KEYS)


@bp.route("/identities/<identity_id>")
def identity_page(identity_id):
    """One identity, whatever its status."""
    return _identity_page(identity_id, done=DONE.get(request.args.get("done")))


def _identity_page(identity_id, status=200, conflict=None, done=None):
    record = identities.get_identity(identity_id)
    if record is None:
        raise IdentityNotFound()
    entries = history.changes_of(identity_id, full=True) or []
    return render(
        "identity.html", status,
        identity=identity_schema.dump(record),
        etag=identity_body(record)[1],
        check=content.check_address(record, record["identity_id"], record["identity_hash"]),
        signature=signature_state(record),
        history=entries,
        restore_to=curation.status_before_removal(entries),
        conflict=conflict,
        done=done,
    )


def signature_state(record):
    """What the page says of the creator's signature: "not signed", "signed", "signed by a contract wallet on
    chain N", or "does not recover to the creator" (which the service never stores, but a database edited by hand
    may hold)."""
    signature = record["creator_signature"]
    if signature is None:
        return "not signed"
    chain_id = record.get("creator_signature_chain_id")
    if chain_id is not None:
        # Checked on its chain when it was stored; the page asks no chain again.
        return f"signed by a contract wallet on chain {chain_id}"
    try:
        signer = authorship.recover_author(record["content_id"], signature)
    except SignatureError:
        signer = None
    return "signed" if signer == record["creator"]["wallet"] else "does not recover to the creator"


@bp.route("/identities/<identity_id>/status", methods=["POST"])
def change_status(identity_id):
    """Take an identity down, or restore it, if it is still as the page showed it (the If-Match rule)."""
    status = request.form.get("status")
    if status not in STATUSES:
        return error_page(400, "Bad Request", f"status must be one of {', '.join(STATUSES)}.")
    shown = request.form.get("etag", "")
    try:
        curation.update_identity(identity_id, {"status": status}, g.session.caller.wallet,
                                 precondition=lambda identity: identity_body(identity)[1] == shown)
    except PreconditionFailed:
        return _identity_page(identity_id, status=409, conflict=CONFLICT)
    done = "removed" if status == "removed" else "restored"
    return redirect(url_for("console.identity_page", identity_id=identity_id, done=done), 303)
