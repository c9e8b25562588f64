"""The mirrors: each with its state and lag as GET /mirrors/<id> shows it (its position, the upstream's head,
its counts and its last error), adding one, pausing, resuming, giving it a new upstream key and removing one
(after a confirmation), through identity.data.mirrors as /mirrors and `flask mirrors` use it.

The upstream's key goes into a form's body and nowhere else: it is never in a URL, never written back into a
page (a form that is refused comes back with the key's field empty), and never in a log line."""

from flask import redirect, request, url_for
from marshmallow import ValidationError

from ..core.errors import MirrorConflict
from ..data import mirrors
from ..schemas import MirrorCreateSchema, MirrorPatchSchema
from . import bp
from .pages import field_messages, render

DONE = {
    "added": "The mirror is added: the service follows the upstream from the start of its feed.",
    "paused": "The mirror is paused: nothing more is copied from its upstream until it is resumed.",
    "resumed": "The mirror is resumed: it goes on from the entry where it stopped.",
    "key": "The mirror's key is replaced: its next request to the upstream sends the new one.",
    "removed": "The mirror is removed. The identities it copied stay, as this instance's own.",
}
_create = MirrorCreateSchema()
_patch = MirrorPatchSchema()


@bp.route("/mirrors")
def mirrors_page():
    """Every mirror, oldest first, with its lag and last error."""
    return _mirrors_page()


def _mirrors_page(status=200, form=None, form_errors=None):
    rows = [mirrors.state(mirror) for mirror in mirrors.all_mirrors()]
    return render("mirrors.html", status, rows=rows, form=form or {}, form_errors=form_errors or {},
                  done=DONE.get(request.args.get("done")))


@bp.route("/mirrors", methods=["POST"])
def add_mirror():
    """Register an upstream to follow; the page shown next is the mirror's, which never shows its key."""
    form = {name: request.form.get(name, "").strip() for name in ("url", "key", "name")}
    shown = {name: value for name, value in form.items() if name != "key"}
    try:
        fields = _create.load({name: value for name, value in form.items() if value})
        mirror = mirrors.register(**fields)
    except ValidationError as invalid:
        return _mirrors_page(422, shown, field_messages(invalid.normalized_messages()))
    except MirrorConflict as taken:
        return _mirrors_page(409, shown, {"mirror": taken.detail})
    return redirect(url_for("console.mirror_page", mirror_id=mirror.id, done="added"), 303)


@bp.route("/mirrors/<uuid:mirror_id>")
def mirror_page(mirror_id):
    """One mirror: everything GET /mirrors/<id> shows, and what can be done to it."""
    return _mirror_page(mirror_id)


def _mirror_page(mirror_id, status=200, form_errors=None):
    return render("mirror.html", status, mirror=mirrors.state(mirrors.get(mirror_id)), form_errors=form_errors or {},
                  done=DONE.get(request.args.get("done")))


def _change(mirror_id, changes, done):
    mirrors.update(mirror_id, _patch.load(changes))
    return redirect(url_for("console.mirror_page", mirror_id=mirror_id, done=done), 303)


@bp.route("/mirrors/<uuid:mirror_id>/pause", methods=["POST"])
def pause_mirror(mirror_id):
    return _change(mirror_id, {"active": False}, "paused")


@bp.route("/mirrors/<uuid:mirror_id>/resume", methods=["POST"])
def resume_mirror(mirror_id):
    return _change(mirror_id, {"active": True}, "resumed")


@bp.route("/mirrors/<uuid:mirror_id>/key", methods=["POST"])
def replace_mirror_key(mirror_id):
    """Give the mirror a new key of its upstream (the old one revoked there, or rotated)."""
    try:
        return _change(mirror_id, {"key": request.form.get("key", "").strip()}, "key")
    except ValidationError as invalid:
        return _mirror_page(mirror_id, 422, field_messages(invalid.normalized_messages()))


@bp.route("/mirrors/<uuid:mirror_id>/remove")
def confirm_remove_mirror(mirror_id):
    """The confirmation step before a mirror is removed."""
    return render("mirror_remove.html", mirror=mirrors.get(mirror_id))


@bp.route("/mirrors/<uuid:mirror_id>/remove", methods=["POST"])
def remove_mirror(mirror_id):
    mirrors.remove(mirror_id)
    return redirect(url_for("console.mirrors_page", done="removed"), 303)
