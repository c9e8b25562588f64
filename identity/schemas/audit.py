"""The audit log (identity.core.audit, identity.web.audit): an entry, a page of them, the listing's filters."""

from datetime import UTC

from marshmallow import RAISE, Schema, ValidationError, fields, post_load, validate

from .fields import WALLET_PATTERN
from .identities import CURSOR_PATTERN, MAX_CURSOR_LENGTH

HASH_PATTERN = r"^[0-9a-f]{64}$"
ACTION_PATTERN = r"^[a-z_]+(\.[a-z_]+)*$"
MOMENT_ERROR = "Not a date and time: give one as RFC 3339 writes it, e.g. 2026-11-21T09:30:00Z."


class AuditActorSchema(Schema):
    user_id = fields.String(required=True, allow_none=True, metadata={"description": "The acting user's id."})
    wallet = fields.String(required=True, allow_none=True, metadata={
        "description": "The acting wallet; null for the command line (without --by) and the service itself."})
    role = fields.String(required=True, allow_none=True, metadata={"description": "Its role when it acted."})
    key_id = fields.String(required=True, allow_none=True, metadata={"description": "The id of the key it used."})
    key_hint = fields.String(required=True, allow_none=True, metadata={
        "description": "The first characters of that key, as GET /keys shows them; never the key."})
    via = fields.String(required=True, metadata={"enum": ["api", "console", "cli", "service"]})


class AuditTargetSchema(Schema):
    kind = fields.String(required=True, metadata={
        "description": "key, user, webhook, mirror, identity, signin, session, route, database or audit."})
    id = fields.String(required=True, allow_none=True, metadata={"description": "Its id (a key's, a wallet, a route)."})


class AuditEntrySchema(Schema):
    """One entry of the audit log, with the hashes that chain it to the one before."""

    seq = fields.Integer(required=True, metadata={"minimum": 1, "description": "Its number: the chain has no gaps."})
    at = fields.String(required=True, metadata={"format": "date-time", "description": "RFC 3339, UTC, microseconds."})
    actor = fields.Nested(AuditActorSchema, required=True)
    action = fields.String(required=True, metadata={"example": "key.revoke"})
    target = fields.Nested(AuditTargetSchema, required=True)
    outcome = fields.String(required=True, metadata={"enum": ["ok", "refused", "failed"]})
    detail = fields.String(required=True, allow_none=True, metadata={"description": "Why it was refused, or a note."})
    request_id = fields.String(required=True, allow_none=True, metadata={
        "description": "The request's X-Request-ID (a command's own id on the command line)."})
    client_address = fields.String(required=True, allow_none=True)
    user_agent = fields.String(required=True, allow_none=True)
    before = fields.Dict(required=True, allow_none=True, metadata={"description": "The fields changed, as they were."})
    after = fields.Dict(required=True, allow_none=True, metadata={"description": "The fields changed, as they are."})
    prev_hash = fields.String(required=True, metadata={"pattern": HASH_PATTERN, "description": "The previous entry's hash."})
    hash = fields.String(required=True, metadata={
        "pattern": HASH_PATTERN,
        "description": "SHA-256 of this entry's canonical JSON (RFC 8785) without `hash`, prev_hash included."})


class AuditListArgsSchema(Schema):
    """The query parameters of GET /audit."""

    class Meta:
        unknown = RAISE

    actor = fields.String(
        validate=validate.Regexp(WALLET_PATTERN, error="Not an Ethereum address: expected 0x and 40 hex digits."),
        metadata={"pattern": WALLET_PATTERN, "description": "A wallet, in any case: only what it did."},
    )
    action = fields.String(
        validate=[validate.Length(1, 64), validate.Regexp(ACTION_PATTERN, error="Not an action: e.g. key.revoke.")],
        metadata={"pattern": ACTION_PATTERN, "maxLength": 64, "description": "Only this action, e.g. key.revoke."},
    )
    target = fields.String(
        validate=[validate.Length(1, 128), validate.Regexp(r"^[^\x00-\x1f\x7f]+$", error="Not an id: it has a "
                                                           "control character.")],
        metadata={"maxLength": 128, "description": "Only what was done to this target id (a key's id, a wallet ...)."},
    )
    since = fields.AwareDateTime(default_timezone=UTC, error_messages={"invalid": MOMENT_ERROR},
                                 metadata={"description": "Only entries at or after this time (RFC 3339)."})
    until = fields.AwareDateTime(default_timezone=UTC, error_messages={"invalid": MOMENT_ERROR},
                                 metadata={"description": "Only entries at or before this time (RFC 3339)."})
    limit = fields.Integer(
        validate=validate.Range(1, 100),
        metadata={"description": "Entries per page, 1 to 100 (default 20; with a cursor, the cursor's).", "example": 20},
    )
    cursor = fields.String(
        validate=[
            validate.Length(1, MAX_CURSOR_LENGTH),
            validate.Regexp(CURSOR_PATTERN, error="Not a cursor this service issued; use the next of a page."),
        ],
        metadata={"pattern": CURSOR_PATTERN, "description": "The `next` of a previous page: continues that listing."},
    )


    @post_load
    def in_utc(self, data, **kwargs):
        """The times in UTC, as the log keeps them; one that has no UTC equivalent (year 1 or 9999 off UTC) is
        refused, naming it."""
        for name in ("since", "until"):
            if name in data:
                try:
                    data[name] = data[name].astimezone(UTC)
                except OverflowError:
                    raise ValidationError({name: [MOMENT_ERROR]}) from None
        return data


class AuditPageSchema(Schema):
    limit = fields.Integer(required=True, metadata={"minimum": 1, "maximum": 100})
    data = fields.List(fields.Nested(AuditEntrySchema), required=True, metadata={"description": "Newest first."})
    next = fields.String(
        required=True, allow_none=True, metadata={"description": "Cursor of the next page; null on the last page."}
    )
