"""Following the change feed: a client's long poll or event stream, which gives each entry once, in
sequence order, with the polling feed's redaction (the contract's "Live changes").

The long poll and the stream wait on this process's hub (identity.feed.live), holding no database
connection while they wait; they read their entries from the hub, or from the database when they are
further behind than the hub keeps.

With include_docs, each entry carries `doc`, its identity as the client's key may read it now: read
at the moment the entries are sent, one query per batch of entries, and encoded for this client alone
(a doc changes after its entry: it is not kept with the hub's entries).
"""

import logging
import select
import socket
import time

from flask import current_app, stream_with_context
from sqlalchemy.exc import SQLAlchemyError

from ..core import history, identities
from ..schemas import ChangeSchema
from . import live

log = logging.getLogger(__name__)

# Why a wait ended.
ENTRY, TIME, CLOSED, REVOKED, GONE = "entry", "time", "closed", "revoked", "gone"
# How often a waiting client is looked at, to let one that went away free its place soon.
CLIENT_CHECK_SECONDS = 1.0

_change_schema = ChangeSchema()


def _text(entry, data):
    return f"id: {entry.seq}\nevent: change\ndata: {data}\n\n"


def event(entry, status, full):
    """One entry as an SSE event: `id:` its seq, `event: change`, `data:` its JSON (on one line)."""
    redacted = history.redacted(status, full)
    text = entry.encoded.get(redacted)
    if text is None:  # encoded once per process for all the clients that see it alike
        data = current_app.json.dumps(_change_schema.dump(history.shown(entry.whole, status, full)))
        text = entry.encoded[redacted] = _text(entry, data)
    return text


def event_stream(follower, until, heartbeat, on_close, headers=None):
    """The response that streams `follower`'s events (Follower.events) until `until`, a comment every `heartbeat`
    seconds meanwhile; `on_close` runs when it ends, whether or not it ever started."""
    response = current_app.response_class(
        stream_with_context(follower.events(until, heartbeat)),
        mimetype="text/event-stream",
        # No cache keeps it, and nginx passes each event on at once rather than buffer the stream.
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no", **(headers or {})},
    )
    response.call_on_close(on_close)
    return response


def client_gone(environ):
    """Whether the client of a waiting stream or long poll has closed its connection: its socket reads as
    at its end. gunicorn hands the connection's socket to the app in the environ (gunicorn.socket); under
    another server nothing can tell (None), and a closed stream ends at its next write."""
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


def shown_with_docs(pairs, full):
    """The (entry, status) `pairs` (entry a whole entry's mapping) as a `full` (Admin) or other key may see
    them, each with `doc`, its identity as that key may read it now: one query for them all. An entry
    shown redacted has none; nor has one whose identity was removed since, for a non-Admin key."""
    docs = identities.identities_by_id(entry["identity_id"] for entry, status in pairs if not history.redacted(status, full))
    shown = []
    for entry, status in pairs:
        visible = history.shown(entry, status, full)
        doc = None if history.redacted(status, full) else docs.get(entry["identity_id"])
        shown.append(visible if doc is None or history.redacted(doc["status"], full) else {**visible, "doc": doc})
    return shown


def events_with_docs(pairs, full):
    """The (Entry, status) `pairs` as SSE events whose entries carry their docs (see shown_with_docs)."""
    shown = shown_with_docs([(entry.whole, status) for entry, status in pairs], full)
    dumps = current_app.json.dumps
    return "".join(_text(entry, dumps(_change_schema.dump(each))) for (entry, _), each in zip(pairs, shown, strict=True))


class Follower:
    """One client following the feed after `position`: it reads its entries and waits for more, until the
    hub closes or finds its holder (the key's id, or the console session's: see live.Hub.follow) no
    longer valid."""

    def __init__(self, hub, position, limit, full, holder, client_gone=None, docs=False):
        self.hub, self.position, self.limit, self.full, self.docs = hub, position, limit, full, docs
        self.holder = holder
        # Whether the client has gone (closed its connection), where the server can tell; else never.
        self.client_gone = client_gone or (lambda: False)
        # The log's end as the client arrived. The hub keeps each buffered entry with its identity's status
        # as of its last fetch; until it has fetched this far, a change committed just before (a take-down)
        # may not be in it yet, and its entries are read from the database, with the status of now.
        self.fresh_from = history.head()

    def next_entries(self):
        """The (Entry, status) pairs after the position, at most `limit`; moves the position past them."""
        pairs = self.hub.read(self.position, self.limit) if self.hub.head >= self.fresh_from else None
        if pairs is None:  # further behind than the hub keeps, or the hub not yet where the log was
            pairs = [(live.Entry(whole), status) for whole, status in history.entries_after(self.position, self.limit)]
        if pairs:
            self.position = pairs[-1][0].seq
        return pairs

    def wait(self, until):
        """Wait for an entry after the position until `until` (monotonic); returns why the wait ended."""
        while True:
            if self.hub.closed:
                return CLOSED
            if self.holder in self.hub.revoked:  # the hub checks the holders of the clients it holds
                return REVOKED
            if self.client_gone():
                return GONE
            remaining = until - time.monotonic()
            if remaining <= 0:
                return TIME
            if self.hub.wait(self.position, min(remaining, CLIENT_CHECK_SECONDS), self.holder):
                return ENTRY

    def longpoll(self, seconds):
        """The page after the position; when there is none, the first that commits within `seconds`."""
        after = self.position
        until = time.monotonic() + seconds
        pairs = self.next_entries()
        while not pairs and self.wait(until) == ENTRY:
            pairs = [] if self.holder in self.hub.revoked else self.next_entries()
        if self.docs:
            return history.page(shown_with_docs([(entry.whole, status) for entry, status in pairs], self.full), after)
        return history.page([history.shown(entry.whole, status, self.full) for entry, status in pairs], after)

    def events(self, until, heartbeat):
        """The event stream: the entries after the position as they commit, a comment every `heartbeat`
        seconds, until `until`, its holder's end (the key revoked or expired, its role or scope changed; the
        console session ended), or the server's shutdown."""
        # Comment lines without the blank line that would end an event: some clients (httpx-sse) would
        # make an empty event of it. The first one sends the headers now, not with the first entry.
        yield ": ok\n"
        next_beat = time.monotonic() + heartbeat
        try:
            while True:
                if self.holder in self.hub.revoked:  # nothing more of a view its holder lost, even queued
                    return
                pairs = self.next_entries()
                if pairs:
                    if self.docs:
                        yield events_with_docs(pairs, self.full)
                    else:
                        yield "".join(event(entry, status, self.full) for entry, status in pairs)
                    continue
                why = self.wait(min(until, next_beat))
                if why in (CLOSED, REVOKED, GONE) or time.monotonic() >= until:
                    return
                if why == TIME:
                    yield ": heartbeat\n"
                    next_beat = time.monotonic() + heartbeat
        except SQLAlchemyError as error:
            # The headers are sent: the stream ends, and the client resumes with Last-Event-ID.
            log.warning("change stream ended: database %s", type(error).__name__)
