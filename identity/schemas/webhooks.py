"""Webhooks and their deliveries (identity.feed.webhooks, identity.feed.delivery)."""

from marshmallow import RAISE, Schema, ValidationError, fields, validate, validates_schema

from .fields import MAX_URL_LENGTH, JsonBoolean, Text, Timestamp, TrimmedText, Url, WholeNumber

MAX_SEQ = 2**53 - 1  # a sequence number is a JSON integer every client reads exactly
WEBHOOK_URL_DESCRIPTION = (
    "Where each entry is POSTed: https or http, at most 2048 characters. A host that is or resolves to a "
    "loopback, private, link-local, multicast or reserved address is refused (unless the service allows "
    "private addresses); redirects are not followed."
)


def _webhook_url(**kwargs):
    return Text(
        raw_max_length=4 * MAX_URL_LENGTH,
        validate=Url({"https", "http"}),
        metadata={"description": WEBHOOK_URL_DESCRIPTION, "maxLength": MAX_URL_LENGTH,
                  "example": "https://hooks.example.com/identity"},
        **kwargs,
    )


def _webhook_description(**kwargs):
    return Text(
        raw_max_length=4 * 1024,
        allow_none=True,
        validate=TrimmedText(0, 1024),
        metadata={"description": "A note for people: at most 1024 characters.", "example": "Search index"},
        **kwargs,
    )


class WebhookCreateSchema(Schema):
    class Meta:
        unknown = RAISE

    url = _webhook_url(required=True)
    description = _webhook_description()
    after = WholeNumber(
        validate=validate.Range(0, MAX_SEQ),
        metadata={"description": "Deliver the entries with a seq above this one (default: the log's head, so "
                  "only entries to come). 0 delivers the whole log.", "example": 0},
    )


class WebhookPatchSchema(Schema):
    class Meta:
        unknown = RAISE

    url = _webhook_url()
    description = _webhook_description()
    active = JsonBoolean(
        metadata={"description": "false pauses deliveries; true resumes them where they stopped (after a "
                  "give-up too), retry state cleared."}
    )

    @validates_schema
    def refuse_nothing(self, data, **kwargs):
        if not data:
            raise ValidationError("Name at least one field to change: url, description, active.", field_name="body")


class WebhookSchema(Schema):
    """A webhook, without its secret."""

    id = fields.String(required=True, metadata={"format": "uuid"})
    url = fields.String(required=True)
    description = fields.String(required=True, allow_none=True)
    active = fields.Boolean(required=True, metadata={"description": "false: paused, or given up after failing."})
    position = fields.Integer(
        required=True,
        metadata={"minimum": 0, "maximum": MAX_SEQ, "description": "The seq of the last entry delivered."},
    )
    attempts = fields.Integer(
        required=True, metadata={"minimum": 0, "maximum": MAX_SEQ, "description": "Failed attempts at the next entry."}
    )
    failing_since = Timestamp(required=True, allow_none=True, metadata={"description": "First failure of the streak."})
    next_attempt_at = Timestamp(required=True, allow_none=True, metadata={"description": "When the next retry is due."})
    stalled = fields.String(
        required=True, allow_none=True,
        metadata={"description": "Why deliveries cannot go on, or null: a position beyond the feed's end (a restore "
                  "of an older backup that did not raise the feed's sequence) says so, and what to do."},
    )
    created_at = Timestamp(required=True)
    updated_at = Timestamp(required=True)


class WebhookCreatedSchema(WebhookSchema):
    secret = fields.String(
        required=True,
        metadata={"pattern": "^whsec_[A-Za-z0-9+/]{43}=$",
                  "description": "Signs every delivery (Standard Webhooks). Shown this once: store it now."},
    )


class WebhookListSchema(Schema):
    data = fields.List(fields.Nested(WebhookSchema), required=True, metadata={"description": "Oldest first."})


class DeliverySchema(Schema):
    seq = fields.Integer(required=True, metadata={"minimum": 1, "maximum": MAX_SEQ})
    attempt = fields.Integer(required=True, metadata={"minimum": 1, "maximum": MAX_SEQ})
    at = Timestamp(required=True)
    duration_ms = fields.Integer(required=True, metadata={"minimum": 0, "maximum": MAX_SEQ})
    status = fields.Integer(
        required=True, allow_none=True, metadata={"minimum": 100, "maximum": 999, "description": "null: no answer."}
    )
    error = fields.String(required=True, allow_none=True, metadata={"description": "null: delivered (a 2xx)."})


class DeliveryListSchema(Schema):
    data = fields.List(fields.Nested(DeliverySchema), required=True, metadata={"description": "Newest first."})
