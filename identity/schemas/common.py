"""What every resource shares: the problem details of every error, the health status, and the user
that an identity's creator and a key's owner both are."""

from marshmallow import Schema, fields

from ..fields import IDENTITY_ID_PATTERN, WALLET_PATTERN, Timestamp


class StatusSchema(Schema):
    status = fields.String(required=True, metadata={"enum": ["ok"]})


class ProblemSchema(Schema):
    """RFC 9457 problem details."""

    type = fields.String(required=True, metadata={"example": "about:blank"})
    title = fields.String(required=True)
    status = fields.Integer(required=True, metadata={"minimum": 100, "maximum": 599})
    detail = fields.String(required=True)
    errors = fields.Dict(
        keys=fields.String(),
        values=fields.List(fields.String()),
        metadata={"description": "422 and a 400 for query parameters: the messages for each invalid field or parameter."},
    )
    identity_id = fields.String(
        metadata={
            "pattern": IDENTITY_ID_PATTERN,
            "description": "409: the identity that holds this content; 410: the removed identity.",
        }
    )
    request_id = fields.String(metadata={"description": "5xx only: the request id that the logs carry."})


class UserSchema(Schema):
    id = fields.String(required=True, metadata={"format": "uuid", "description": "Opaque internal identifier."})
    created_at = Timestamp(required=True)
    updated_at = Timestamp(required=True)
    last_login = Timestamp(
        required=True, allow_none=True, metadata={"description": "Last time the user's key authenticated."}
    )
    api_key = fields.Constant(
        "",
        required=True,
        metadata={"type": "string", "enum": [""], "description": "Always empty: keys are never returned."},
    )
    wallet = fields.String(
        required=True, metadata={"description": "EIP-55 checksum address.", "pattern": WALLET_PATTERN}
    )
    role = fields.String(required=True, metadata={"enum": ["User", "Admin"]})
