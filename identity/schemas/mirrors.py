"""Mirrors: the upstream instances this one follows (identity.data.mirrors, identity.data.follower)."""

import re

from marshmallow import RAISE, Schema, ValidationError, fields, validates_schema

from .fields import MAX_URL_LENGTH, BaseUrl, JsonBoolean, Text, Timestamp, TrimmedText
from .webhooks import MAX_SEQ

MIRROR_KEY_PATTERN = r"^[\x21-\x7e]{1,1024}$"
# It goes into a header of every request to the upstream: visible ASCII only, so no line break (not even
# one at its end, which `$` would let pass) can split the header.
_KEY = re.compile(r"[\x21-\x7e]{1,1024}")
MIRROR_URL_DESCRIPTION = (
    "The upstream's base URL, https or http (its feed is this URL followed by /changes), without user name, "
    "password, query or fragment. It may be a loopback or private address."
)


def _visible_ascii(value):
    if not _KEY.fullmatch(value):
        raise ValidationError("Must be 1 to 1024 visible ASCII characters, the key as the upstream issued it.")


def _key(**kwargs):
    return fields.String(
        validate=_visible_ascii,
        load_only=True,
        metadata={"description": "An API key of the upstream (read scope is enough), kept as given: it is sent to the "
                  "upstream and shown nowhere, never in an answer.", "pattern": MIRROR_KEY_PATTERN,
                  "example": "idsk_..."},
        **kwargs,
    )


class MirrorCreateSchema(Schema):
    class Meta:
        unknown = RAISE

    url = Text(
        required=True,
        raw_max_length=4 * MAX_URL_LENGTH,
        validate=BaseUrl(),
        metadata={"description": MIRROR_URL_DESCRIPTION, "maxLength": MAX_URL_LENGTH, "example": "https://identity.example.org"},
    )
    key = _key(required=True)
    name = Text(
        raw_max_length=4 * 128,
        validate=TrimmedText(1, 128),
        metadata={"description": "What the mirror is called, in its metrics too: unique; default, the upstream's host "
                  "(and port and path).", "example": "eu-west"},
    )


class MirrorPatchSchema(Schema):
    class Meta:
        unknown = RAISE

    active = JsonBoolean(
        metadata={"description": "false pauses the mirror; true resumes it where it stopped (or from the upstream's "
                  "start, after the upstream refused its position: see last_error)."}
    )
    key = _key()

    @validates_schema
    def refuse_nothing(self, data, **kwargs):
        if not data:
            raise ValidationError("Name at least one field to change: active, key.", field_name="body")


class MirrorSchema(Schema):
    """A mirror, without the upstream's key."""

    id = fields.String(required=True, metadata={"format": "uuid"})
    name = fields.String(required=True)
    url = fields.String(required=True)
    active = fields.Boolean(required=True, metadata={"description": "false: paused (by an operator, or by the follower "
                                                     "when the upstream refuses it: see last_error)."})
    position = fields.Integer(required=True, metadata={
        "minimum": 0, "maximum": MAX_SEQ, "description": "The upstream seq of the last entry handled here."})
    upstream_head = fields.Integer(required=True, metadata={
        "minimum": 0, "maximum": MAX_SEQ, "description": "The upstream's last seq, as last seen."})
    lag_entries = fields.Integer(required=True, metadata={
        "minimum": 0, "maximum": MAX_SEQ, "description": "upstream_head minus position (0 when caught up)."})
    lag_seconds = fields.Float(required=True, allow_none=True, metadata={
        "minimum": 0, "description": "While entries remain to handle: how long ago the upstream wrote the last one "
        "handled here; 0 when caught up; null before any is handled."})
    applied = fields.Integer(required=True, metadata={
        "minimum": 0, "maximum": MAX_SEQ, "description": "Entries that changed something here: identities stored, "
        "changes applied."})
    already_present = fields.Integer(required=True, metadata={
        "minimum": 0, "maximum": MAX_SEQ, "description": "Created entries whose content was here already."})
    rejected = fields.Integer(required=True, metadata={
        "minimum": 0, "maximum": MAX_SEQ, "description": "Entries that did not verify (content, ids, signature, "
        "shape) or could not be stored (out of order, a value out of the database's range or refused by it): "
        "counted, logged (a line per batch: the count and the first reasons), and skipped."})
    last_error = fields.String(required=True, allow_none=True, metadata={
        "description": "What last went wrong in following the upstream, and what to do; kept once it is past "
        "(see failing)."})
    last_error_at = Timestamp(required=True, allow_none=True)
    failing = fields.Boolean(required=True, metadata={
        "description": "true while last_error is the mirror's present state: the same failure repeats, or nothing "
        "has succeeded since it. false once the follower has read an answer of the upstream or applied a batch "
        "after it, or an operator changed the mirror (a new key, a resume: the follower then tries again at once); "
        "false too when there is no last_error."})
    created_at = Timestamp(required=True)
    updated_at = Timestamp(required=True)


class MirrorListSchema(Schema):
    data = fields.List(fields.Nested(MirrorSchema), required=True, metadata={"description": "Oldest first."})
