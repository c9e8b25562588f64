"""What every resource shares: the problem details of every error, the health status, and the user
that an identity's creator and a key's owner both are."""

from marshmallow import Schema, fields

from .fields import IDENTITY_ID_PATTERN, MAX_SAFE_INTEGER, WALLET_PATTERN, Timestamp


class RecordSchema(Schema):
    """A schema whose objects are mostly dicts (service.identity_record and the like).

    marshmallow's accessor, for each field, tries an object's attribute, its key and dotted paths;
    for a dict, the key alone says the same (the fields' names have no dots, and none is an attribute of
    dict). get_attribute is the schema's documented hook for how values are pulled. A dump of an identity
    makes 27 of these lookups; any other object goes through marshmallow's own.
    """

    def get_attribute(self, obj, attr, default):
        if type(obj) is dict:
            return obj.get(attr, default)
        return super().get_attribute(obj, attr, default)


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
    feed_end = fields.Integer(
        metadata={
            "minimum": 0,
            "maximum": MAX_SAFE_INTEGER,
            "description": "409 of the change feed: the highest seq the feed ever issued, below the position asked for.",
        }
    )
    request_id = fields.String(metadata={"description": "5xx only: the request id that the logs carry."})


class UserSchema(RecordSchema):
    id = fields.String(required=True, metadata={"format": "uuid", "description": "Opaque internal identifier."})
    created_at = Timestamp(required=True)
    updated_at = Timestamp(required=True)
    last_login = Timestamp(
        required=True, allow_none=True,
        metadata={"description": "The user's last sign-in (POST /auth/siwe, or into the console); a request made with a "
                  "key is not one. Null when the user never signed in."},
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
