"""The change log: one identity's history, and the feed of every identity's changes."""

from marshmallow import RAISE

from .. import history, limits
from ..auth import auth, current_caller
from ..docs import CHANGE_EXAMPLE
from ..errors import IdentityNotFound, problem_body
from ..schemas import ChangeFeedArgsSchema, ChangeFeedSchema, ChangeListSchema
from .base import (
    IDENTITY_ID,
    NOT_FOUND,
    RATELIMIT_HEADERS,
    TOO_MANY,
    UNAUTHORIZED,
    UNAVAILABLE,
    alias,
    blp,
    operation,
    problem,
)


@blp.route("/identity/<identity_id>/changes", endpoint="identity_changes", parameters=[IDENTITY_ID])
@alias("/identities/<identity_id>/changes", endpoint="identity_changes_plural", of="/identity/<identity_id>/changes")
@auth.login_required
@limits.reads
@operation("listIdentityChanges")
@blp.response(200, ChangeListSchema, example={"data": [CHANGE_EXAMPLE]})
@problem(401, **UNAUTHORIZED)
@problem(404, NOT_FOUND)
@problem(429, TOO_MANY, headers=RATELIMIT_HEADERS)
@problem(503, **UNAVAILABLE)
def identity_changes(identity_id):
    """An Identity's change history, oldest first.

    Also served at /identities/{identity_id}/changes.
    """
    entries = history.changes_of(identity_id, full=current_caller().role == "Admin")
    if entries is None:
        raise IdentityNotFound()
    return {"data": entries}


@blp.route("/changes", endpoint="change_feed")
@auth.login_required
@limits.reads
@operation("listChanges")
@blp.arguments(ChangeFeedArgsSchema, location="query", unknown=RAISE, error_status_code=400)
@blp.response(200, ChangeFeedSchema, example={"data": [CHANGE_EXAMPLE], "next_after": CHANGE_EXAMPLE["seq"]})
@problem(
    400,
    "An unknown or invalid query parameter; errors names each.",
    example=problem_body(400, "Invalid query parameters: limit.", errors={"limit": ["Must be between 1 and 1000."]}),
)
@problem(401, **UNAUTHORIZED)
@problem(429, TOO_MANY, headers=RATELIMIT_HEADERS)
@problem(503, **UNAVAILABLE)
def change_feed(args):
    """Every Identity's changes after a sequence number, in order: poll with the last next_after."""
    return history.feed(args["after"], args["limit"], full=current_caller().role == "Admin")
