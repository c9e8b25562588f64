"""Mirrors: an Admin registers upstream instances that this one follows, keeping a verified copy of them."""

from ..data import mirrors
from ..schemas import MirrorCreateSchema, MirrorListSchema, MirrorPatchSchema, MirrorSchema
from . import blp, budgets
from .answers import BODY, answers
from .auth import access
from .openapi import MIRROR_EXAMPLE

MIRROR_ID = {
    "in": "path",
    "name": "mirror_id",
    "required": True,
    "description": "The mirror's id, as its registration answered.",
    "schema": {"type": "string", "format": "uuid"},
    "example": MIRROR_EXAMPLE["id"],
}


@blp.route("/mirrors", methods=["POST"], endpoint="create_mirror")
@access(budgets.creates, role="Admin")
@blp.doc(operationId="createMirror", responses=answers(BODY, "AdminOnly", "MirrorTaken"))
@blp.arguments(
    MirrorCreateSchema(), example={"url": MIRROR_EXAMPLE["url"], "key": "idsk_...", "name": MIRROR_EXAMPLE["name"]}
)
@blp.response(201, MirrorSchema, example=MIRROR_EXAMPLE)
def create_mirror(fields):
    """Register an upstream to follow from the start of its feed (Admin keys only); its key is never shown."""
    return mirrors.state(mirrors.register(**fields)), 201


@blp.route("/mirrors", endpoint="list_mirrors")
@access(budgets.reads, role="Admin")
@blp.doc(operationId="listMirrors", responses=answers("AdminOnly"))
@blp.response(200, MirrorListSchema, example={"data": [MIRROR_EXAMPLE]})
def list_mirrors():
    """List the mirrors with their positions, lag and counts (Admin keys only)."""
    return {"data": [mirrors.state(mirror) for mirror in mirrors.all_mirrors()]}


@blp.route("/mirrors/<uuid:mirror_id>", endpoint="get_mirror", parameters=[MIRROR_ID])
@access(budgets.reads, role="Admin")
@blp.doc(operationId="getMirror", responses=answers("AdminOnly", "MirrorNotFound"))
@blp.response(200, MirrorSchema, example=MIRROR_EXAMPLE)
def get_mirror(mirror_id):
    """Fetch a mirror: its position, the upstream's head, lag, counts and last error (Admin keys only)."""
    return mirrors.state(mirrors.get(mirror_id))


@blp.route("/mirrors/<uuid:mirror_id>", methods=["PATCH"], endpoint="update_mirror", parameters=[MIRROR_ID])
@access(budgets.creates, role="Admin")
@blp.doc(operationId="updateMirror", responses=answers(BODY, "AdminOnly", "MirrorNotFound", "NotJsonOrMergePatch"))
@blp.arguments(MirrorPatchSchema(), example={"active": False})
@blp.response(200, MirrorSchema, example=MIRROR_EXAMPLE)
def update_mirror(changes, mirror_id):
    """Pause (active false) or resume (active true) a mirror, or give it a new upstream key (Admin keys only)."""
    return mirrors.state(mirrors.update(mirror_id, changes))


@blp.route("/mirrors/<uuid:mirror_id>", methods=["DELETE"], endpoint="delete_mirror", parameters=[MIRROR_ID])
@access(budgets.creates, role="Admin")
@blp.doc(operationId="deleteMirror", responses=answers("AdminOnly", "MirrorNotFound"))
@blp.response(204, description="Removed; the identities it copied stay, as this instance's own.")
def delete_mirror(mirror_id):
    """Stop following an upstream and forget it (Admin keys only); what it copied stays."""
    mirrors.remove(mirror_id)
