"""The change feed: the latest entries, listed by the page itself (so it works with JavaScript off), then
followed live by the page's script through an event stream of the console's own, authenticated by the
session cookie, that waits on the same hub and Follower as GET /changes?feed=eventsource.

The stream follows its session as it is now: the hub asks the session again every second, as it asks an
API key, and the stream ends when the session does (sign-out, its key revoked or expired, its 12 hours),
or when its user is no longer an Admin or its key's scope changed (the page's script reconnects, and the
guard then lets only an Admin's live session in).
"""

import math

from flask import current_app, g, request

from ..core import history, sessions
from ..feed import live, streams
from ..schemas import MAX_SEQ
from ..storage.database import db
from . import bp
from .guard import COOKIE
from .pages import render

LATEST = 50
HEARTBEAT_SECONDS = 15.0


def _seq(text):
    """A sequence number given as text (Last-Event-ID, after), or None for none or a malformed one."""
    if text and text.isdigit() and len(text) <= 16 and int(text) <= MAX_SEQ:
        return int(text)
    return None


@bp.route("/changes")
def changes_page():
    """The latest entries of the change feed, newest first; the page's script adds the next ones as they
    commit."""
    head = history.head()
    entries = [whole for whole, _ in history.entries_after(max(head - LATEST, 0), LATEST)]
    return render("changes.html", entries=list(reversed(entries)), head=head)


@bp.route("/changes/stream")
def change_stream():
    """The feed after `after` as Server-Sent Events, whole entries (an Admin's view), for the page's script."""
    positions = (_seq(request.headers.get("Last-Event-ID")), _seq(request.args.get("after")))
    start = next((seq for seq in positions if seq is not None), None)
    if start is None:
        start = history.head()
    token = request.cookies.get(COOKIE)
    holder = "console session " + g.session.id  # the hub lets its clients go when the session ends
    # The session's lookup left the request's session in a transaction: its connection goes back now.
    db.session.commit()
    hub = live.hub_of(current_app)
    opened_with = (g.session.caller.role, g.session.caller.scope)  # an Admin's (the guard lets no other in)

    def still_valid():
        session = sessions.session_of(token)
        return session is not None and (session.caller.role, session.caller.scope) == opened_with

    unfollow = hub.follow(holder, still_valid)
    follower = streams.Follower(hub, start, LATEST, True, holder, streams.client_gone(request.environ))
    return streams.event_stream(follower, math.inf, HEARTBEAT_SECONDS, unfollow)
