"""The change log: one identity's history, and the feed of every identity's changes."""

from marshmallow import RAISE

from .. import feeds, history, limits
from ..auth import auth, current_caller
from ..docs import CHANGE_EXAMPLE, EVENT_STREAM_DOC
from ..errors import IdentityNotFound, problem_body
from ..schemas import ChangeFeedArgsSchema, ChangeFeedSchema, ChangeListSchema, LastEventIdSchema
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
    shared_problems,
)


@blp.route("/identity/<identity_id>/changes", endpoint="identity_changes", parameters=[IDENTITY_ID])
@alias("/identities/<identity_id>/changes", endpoint="identity_changes_plural", of="/identity/<identity_id>/changes")
@auth.login_required
@limits.reads
@operation("listIdentityChanges")
@blp.response(200, ChangeListSchema, example={"data": [CHANGE_EXAMPLE]})
@shared_problems
@problem(404, NOT_FOUND)
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
@operation("listChanges", responses={200: EVENT_STREAM_DOC})
@blp.arguments(ChangeFeedArgsSchema, location="query", unknown=RAISE, error_status_code=400)
@blp.arguments(LastEventIdSchema, location="headers", error_status_code=400)
@blp.response(200, ChangeFeedSchema, example={"data": [CHANGE_EXAMPLE], "next_after": CHANGE_EXAMPLE["seq"]})
@problem(
    400,
    "An unknown or invalid query parameter or Last-Event-ID; errors names each.",
    example=problem_body(400, "Invalid query parameters: limit.", errors={"limit": ["Must be between 1 and 1000."]}),
)
@problem(401, **UNAUTHORIZED)
@problem(429, TOO_MANY + " Or the key holds IDENTITY_MAX_STREAMS_PER_KEY streams and long polls already.",
         headers=RATELIMIT_HEADERS)
@problem(503, **UNAVAILABLE)
def change_feed(args, headers):
    """Every Identity's changes after a sequence number, in order: poll with the last next_after, long-poll
    (feed=longpoll), or follow them as Server-Sent Events (feed=eventsource, or Accept: text/event-stream)."""
    return feeds.answer(args, headers.get("last_event_id"), current_caller())
