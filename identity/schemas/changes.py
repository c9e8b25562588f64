"""The change log: its entries, and the polls and streams that read it (identity.feed.streams)."""

from marshmallow import RAISE, Schema, fields, validate

from .fields import IDENTITY_ID_PATTERN, MAX_SAFE_INTEGER, Timestamp
from .identities import IdentitySchema

FEEDS = ("normal", "longpoll", "eventsource")


class ChangeSchema(Schema):
    """An entry of the change log. Entries of removed identities shown to a non-Admin key carry only
    seq, identity_id, at and kind."""

    seq = fields.Integer(required=True, metadata={"minimum": 1, "maximum": MAX_SAFE_INTEGER})
    identity_id = fields.String(required=True, metadata={"pattern": IDENTITY_ID_PATTERN})
    at = Timestamp(required=True)
    wallet = fields.String(
        metadata={"description": "Who acted: the calling key's wallet, `cli` for the command line, or `mirror` for "
                  "an entry a mirror copied from its upstream."}
    )
    kind = fields.String(required=True, metadata={"enum": ["created", "changed"]})
    fields_ = fields.Dict(
        data_key="fields",
        attribute="fields",
        allow_none=True,
        keys=fields.String(),
        values=fields.Dict(),
        metadata={
            "description": "For a change: each field changed, as {\"before\": value, \"after\": value}; "
            "null for a create.",
            "example": {"status": {"before": "complete", "after": "removed"}},
        },
    )
    doc = fields.Nested(
        IdentitySchema,
        metadata={
            "description": "include_docs=true: the entry's Identity as the calling key may read it now (not as it "
            "was at this entry). Absent from an entry shown redacted, and for a removed identity to a non-Admin key."
        },
    )


class ChangeListSchema(Schema):
    data = fields.List(fields.Nested(ChangeSchema), required=True, metadata={"description": "Oldest first."})


class ChangeFeedSchema(ChangeListSchema):
    next_after = fields.Integer(
        required=True,
        metadata={"minimum": 0, "maximum": MAX_SAFE_INTEGER, "description": "The `after` of the next poll."},
    )


class ChangeFeedArgsSchema(Schema):
    class Meta:
        unknown = RAISE

    after = fields.Integer(
        load_default=0,
        validate=validate.Range(0, MAX_SAFE_INTEGER),
        metadata={"description": "Entries with a sequence number above this one (default 0)."},
    )
    limit = fields.Integer(
        load_default=100, validate=validate.Range(1, 1000), metadata={"description": "At most this many."}
    )
    feed = fields.String(
        validate=validate.OneOf(FEEDS),
        metadata={
            "description": "`normal`: the page at once. `longpoll`: the page, waiting up to `timeout` for a first "
            "entry when there is none. `eventsource`: Server-Sent Events, one per entry, as they commit. "
            "Default: `eventsource` when Accept asks for text/event-stream, else `normal`."
        },
    )
    timeout = fields.Integer(
        validate=validate.Range(0, 60_000),
        metadata={
            "description": "Milliseconds. `longpoll`: the longest wait for a first entry (default 30,000), then an "
            "empty page. `eventsource`: the stream ends after this long (default: it stays open)."
        },
    )
    include_docs = fields.Boolean(
        load_default=False,
        metadata={
            "description": "true: each entry carries `doc`, its Identity as the calling key may read it now "
            "(CouchDB's name), so that a follower gets every entry with its identity in one feed."
        },
    )
    heartbeat = fields.Integer(
        load_default=15_000,
        validate=validate.Range(1_000, 60_000),
        metadata={"description": "`eventsource`: milliseconds between two comment lines that keep the stream alive."},
    )


class LastEventIdSchema(Schema):
    """The header with which an SSE client resumes a stream where it stopped."""

    last_event_id = fields.Integer(
        data_key="Last-Event-ID",
        validate=validate.Range(0, MAX_SAFE_INTEGER),
        metadata={
            "description": "`eventsource`: the `id` of the last event received; the stream starts after it "
            "(and `after` is ignored). SSE clients send it when they reconnect."
        },
    )
