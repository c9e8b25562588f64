"""The change log: one identity's history, and the feed of every identity's changes."""

import math
import time

from flask import current_app, request
from marshmallow import RAISE

from ..core import history
from ..core.errors import IdentityNotFound
from ..core.keys import caller_of
from ..feed import live, streams
from ..schemas import ChangeFeedArgsSchema, ChangeFeedSchema, ChangeListSchema, LastEventIdSchema
from ..storage.database import db
from . import blp, budgets
from .answers import answers
from .auth import HEADER, access, current_caller
from .openapi import CHANGE_EXAMPLE, EVENT_STREAM_DOC, IDENTITY_ID


@blp.route("/identity/<identity_id>/changes", endpoint="identity_changes", parameters=[IDENTITY_ID])
@access(budgets.reads)
@blp.doc(operationId="listIdentityChanges", responses=answers("IdentityNotFound"))
@blp.response(200, ChangeListSchema, example={"data": [CHANGE_EXAMPLE]})
def identity_changes(identity_id):
    """An Identity's change history, oldest first.

    Also served at /identities/{identity_id}/changes.
    """
    entries = history.changes_of(identity_id, full=current_caller().role == "Admin")
    if entries is None:
        raise IdentityNotFound()
    return {"data": entries}


# The seq of the feed's last entry as the answer was made: how far behind its end a follower is.
FEED_HEAD = "Feed-Head"
FEED_HEAD_DOC = {
    "description": "The seq of the feed's last entry when the answer was made (0 for an empty feed); for a stream, "
    "when it started. A follower is this far behind minus its position (a mirror's lag).",
    "schema": {"type": "string", "pattern": "^(0|[1-9][0-9]{0,15})$"},
}
@blp.route("/changes", endpoint="change_feed")
@access(budgets.reads)
@blp.doc(operationId="listChanges", responses=answers(
    {200: EVENT_STREAM_DOC}, "InvalidFeedQuery", "BeyondFeedEnd", "TooManyStreams"))
# Each arguments' values reach the view by name (webargs' arg_name), so neither's place among the decorators matters.
@blp.arguments(ChangeFeedArgsSchema(), location="query", unknown=RAISE, error_status_code=400, arg_name="args")
@blp.arguments(LastEventIdSchema(), location="headers", error_status_code=400, arg_name="headers")
@blp.response(200, ChangeFeedSchema, example={"data": [CHANGE_EXAMPLE], "next_after": CHANGE_EXAMPLE["seq"]},
              headers={FEED_HEAD: FEED_HEAD_DOC})
def change_feed(args, headers):
    """Every Identity's changes after a sequence number, in order: poll with the last next_after, long-poll
    (feed=longpoll), or follow them as Server-Sent Events (feed=eventsource, or Accept: text/event-stream);
    include_docs=true adds each entry's Identity."""
    return _answer(args, headers.get("last_event_id"), current_caller())


EVENT_STREAM = "text/event-stream"
LONGPOLL_TIMEOUT_MS = 30_000


def _answer(args, last_event_id, caller):
    """GET /changes: the feed that `args` (ChangeFeedArgsSchema) and the Accept header ask for."""
    feed = args.get("feed") or ("eventsource" if request.accept_mimetypes.best == EVENT_STREAM else "normal")
    full = caller.role == "Admin"
    docs = args["include_docs"]
    if feed == "normal":
        page = history.feed(args["after"], args["limit"], full, streams.shown_with_docs if docs else None)
        return page, 200, {FEED_HEAD: str(history.head())}
    # A stream resumes after Last-Event-ID when its client sends one (SSE's reconnection).
    resumed = feed == "eventsource" and last_event_id is not None
    start = last_event_id if resumed else args["after"]
    # Never left waiting for numbers that will not come: a position beyond the feed's end is told so at once.
    history.check_position(start, "Last-Event-ID" if resumed else "after")
    # The key's lookup left the request's session in a transaction: its connection goes back to the
    # pool now, not when the long poll answers or the stream ends.
    db.session.commit()
    hub = live.hub_of(current_app)
    cap = budgets.open_streams(current_app).hold(caller.key_id, current_app.config["IDENTITY_MAX_STREAMS_PER_KEY"])
    # The stream follows its key as it is now: it ends when the key no longer gives what it was opened
    # with (revoked or expired, its user's role or its scope changed), and the client reconnects to what
    # it may read then. Streams of one key opened with different views are different holders.
    holder = view_of(caller)
    key = request.headers[HEADER]
    unfollow = hub.follow(holder, lambda: view_of(caller_of(key)) == holder)

    def release():
        unfollow()
        cap()

    gone = streams.client_gone(request.environ)
    if feed == "longpoll":
        try:
            follower = streams.Follower(hub, start, args["limit"], full, holder, gone, docs)
            page = follower.longpoll(_seconds(args.get("timeout"), LONGPOLL_TIMEOUT_MS))
            return page, 200, {FEED_HEAD: str(max(history.head(), page["next_after"]))}
        finally:
            release()
    follower = streams.Follower(hub, start, args["limit"], full, holder, gone, docs)
    until = time.monotonic() + _seconds(args.get("timeout"), math.inf)
    return streams.event_stream(follower, until, args["heartbeat"] / 1000, release,
                                {FEED_HEAD: str(follower.fresh_from)})


def view_of(caller):
    """What a stream of `caller` may show, which decides its holder in the hub: the key's id, its user's role
    and its scope; None for no caller (a key revoked or expired)."""
    return None if caller is None else (caller.key_id, caller.role, caller.scope)


def _seconds(milliseconds, default):
    return default if milliseconds is None else milliseconds / 1000
