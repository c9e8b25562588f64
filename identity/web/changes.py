"""The change log: one identity's history, and the feed of every identity's changes."""

import math
import select
import socket
import time

from flask import current_app, request, stream_with_context
from marshmallow import RAISE

from ..core import history
from ..core.errors import IdentityNotFound
from ..feed import live, streams
from ..schemas import ChangeFeedArgsSchema, ChangeFeedSchema, ChangeListSchema, LastEventIdSchema
from ..storage.database import db
from . import alias, blp, limits
from .auth import HEADER, auth, current_caller
from .openapi import CHANGE_EXAMPLE, EVENT_STREAM_DOC, IDENTITY_ID, NOT_FOUND, PROBLEMS, operation, problems
from .problems import problem_body


@blp.route("/identity/<identity_id>/changes", endpoint="identity_changes", parameters=[IDENTITY_ID])
@alias("/identities/<identity_id>/changes", of="/identity/<identity_id>/changes")
@auth.login_required
@limits.reads
@operation("listIdentityChanges")
@blp.response(200, ChangeListSchema, example={"data": [CHANGE_EXAMPLE]})
@problems(404, _404=NOT_FOUND["identity"])
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
STREAM_QUERY = {
    "description": "An unknown or invalid query parameter or Last-Event-ID; errors names each.",
    "example": problem_body(400, "Invalid query parameters: limit.", errors={"limit": ["Must be between 1 and 1000."]}),
}
TOO_MANY_STREAMS = {
    **PROBLEMS[429],
    "description": PROBLEMS[429]["description"] + " Or the key holds IDENTITY_MAX_STREAMS_PER_KEY streams and "
    "long polls already.",
}


@blp.route("/changes", endpoint="change_feed")
@auth.login_required
@limits.reads
@operation("listChanges", responses={200: EVENT_STREAM_DOC})
@blp.arguments(ChangeFeedArgsSchema, location="query", unknown=RAISE, error_status_code=400)
@blp.arguments(LastEventIdSchema, location="headers", error_status_code=400)
@blp.response(200, ChangeFeedSchema, example={"data": [CHANGE_EXAMPLE], "next_after": CHANGE_EXAMPLE["seq"]},
              headers={FEED_HEAD: FEED_HEAD_DOC})
@problems(400, 429, _400=STREAM_QUERY, _429=TOO_MANY_STREAMS)
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
        if docs:
            page = history.page(streams.shown_with_docs(history.entries_after(args["after"], args["limit"]), full), args["after"])
        else:
            page = history.feed(args["after"], args["limit"], full)
        return page, 200, {FEED_HEAD: str(history.head())}
    # The key's lookup left the request's session in a transaction: its connection goes back to the
    # pool now, not when the long poll answers or the stream ends.
    db.session.commit()
    hub = live.hub_of(current_app)
    cap = limits.open_streams(current_app).hold(caller.key_id, current_app.config["IDENTITY_MAX_STREAMS_PER_KEY"])
    unfollow = hub.follow(request.headers[HEADER], caller.key_id)

    def release():
        unfollow()
        cap()

    gone = _client_gone(request.environ)
    if feed == "longpoll":
        try:
            follower = streams.Follower(hub, args["after"], args["limit"], full, caller, gone, docs)
            page = follower.longpoll(_seconds(args.get("timeout"), LONGPOLL_TIMEOUT_MS))
            return page, 200, {FEED_HEAD: str(max(history.head(), page["next_after"]))}
        finally:
            release()
    start = args["after"] if last_event_id is None else last_event_id
    follower = streams.Follower(hub, start, args["limit"], full, caller, gone, docs)
    until = time.monotonic() + _seconds(args.get("timeout"), math.inf)
    response = current_app.response_class(
        stream_with_context(follower.events(until, args["heartbeat"] / 1000)),
        mimetype=EVENT_STREAM,
        # No cache keeps it, and nginx passes each event on at once rather than buffer the stream.
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no", FEED_HEAD: str(follower.fresh_from)},
    )
    response.call_on_close(release)  # whether or not the stream ever started
    return response


def _client_gone(environ):
    """Whether the client of a waiting stream or long poll has closed its connection: its socket reads as
    at its end. gunicorn hands the connection's socket to the app in the environ (gunicorn.socket); under
    another server nothing can tell, and a closed stream ends at its next write."""
    connection = environ.get("gunicorn.socket")
    if connection is None:
        return None

    def gone():
        try:
            readable, _, _ = select.select([connection], [], [], 0)  # gevent's, cooperative, under its worker
            return bool(readable) and connection.recv(1, socket.MSG_PEEK) == b""
        except (OSError, ValueError):  # closed under us
            return True

    return gone


def _seconds(milliseconds, default):
    return default if milliseconds is None else milliseconds / 1000
