"""Wallet proofs: sign-in with Ethereum (identity.core.signin, identity.web.signin) and the typed data of an
identity's signed authorship (identity.core.authorship, POST /identity/preview)."""

from marshmallow import RAISE, Schema, fields, validate

from ..core import siwe
from .common import UserSchema
from .fields import (
    CONTENT_ID_PATTERN,
    IDENTITY_HASH_PATTERN,
    IDENTITY_ID_PATTERN,
    SIGNATURE_MAX_LENGTH,
    SIGNATURE_PATTERN,
    CurationText,
    Timestamp,
)
from .identities import IdentityContentSchema
from .keys import SCOPES, IssuedKeySchema

NONCE_PATTERN = f"^[A-Za-z0-9]{{{siwe.NONCE_LENGTH}}}$"


class SigninNonceSchema(Schema):
    nonce = fields.String(required=True, metadata={
        "pattern": NONCE_PATTERN, "description": "The message's Nonce: single use, valid until expires_at, on every node.",
    })
    expires_at = Timestamp(required=True, metadata={"description": "A sign-in naming the nonce after this is refused."})
    domain = fields.String(required=True, metadata={
        "description": "What the message's first line names: the host users sign in to (IDENTITY_SIWE_DOMAIN)."
    })
    uri = fields.String(required=True, metadata={"description": "A URI for the message's URI line (IDENTITY_SIWE_URI)."})


class SigninMessageSchema(SigninNonceSchema):
    """The message the console's wallet button has a wallet sign, with its nonce (identity.core.signin.wallet_message)."""

    message = fields.String(required=True, metadata={
        "description": "The EIP-4361 message to sign with personal_sign, exactly as it is: lines ended by LF."
    })
    address = fields.String(required=True, metadata={"description": "The wallet's address in its EIP-55 form."})


class SigninSchema(Schema):
    class Meta:
        unknown = RAISE

    message = fields.String(required=True, metadata={
        "maxLength": siwe.MAX_MESSAGE_LENGTH,
        "description": "The EIP-4361 message, exactly as the wallet signed it: lines ended by LF, no final LF. Its "
        "first line names the domain, its Nonce comes from GET /auth/nonce; its address is EIP-55 checksummed.",
    })
    signature = fields.String(required=True, metadata={
        "pattern": SIGNATURE_PATTERN, "maxLength": SIGNATURE_MAX_LENGTH,
        "description": "The wallet's personal_sign (EIP-191) signature of the message: 65 bytes, 0x and 130 hex "
        "digits. A contract wallet's (a Safe, a smart account) is the bytes its contract accepts for the message's "
        "EIP-191 hash on the message's chain (EIP-1271), or an EIP-6492 wrapper for one not yet deployed.",
    })
    # No default in the schema: the document would then carry one, which openapi-typescript reads as a field
    # every request must send. identity.core.signin writes write when it is left out.
    scope = fields.String(validate=validate.OneOf(SCOPES), metadata={
        "description": "The issued key's scope: write (default) or read."
    })
    label = fields.String(
        allow_none=True, validate=[validate.Length(1, 128), CurationText(128)],
        metadata={"maxLength": 128, "description": "The issued key's label (default sign-in)."},
    )


class SignedInSchema(IssuedKeySchema):
    """The key a sign-in issued, as POST /keys answers it, with its user."""

    user = fields.Nested(UserSchema, required=True, metadata={"description": "The wallet's user; last_login is now."})


class TypedFieldSchema(Schema):
    name = fields.String(required=True)
    type = fields.String(required=True, metadata={"enum": ["string"]})


class TypedDataTypesSchema(Schema):
    EIP712Domain = fields.List(fields.Nested(TypedFieldSchema), required=True, metadata={
        "description": "name and version, both string: the fields of domain."
    })
    Identity = fields.List(fields.Nested(TypedFieldSchema), required=True, metadata={
        "description": "contentId, a string."
    })


class TypedDataDomainSchema(Schema):
    name = fields.String(required=True, metadata={"enum": ["Identity"]})
    version = fields.String(required=True, metadata={"enum": ["1"]})


class TypedDataMessageSchema(Schema):
    contentId = fields.String(required=True, metadata={"pattern": f"^{CONTENT_ID_PATTERN}$"})


class TypedDataSchema(Schema):
    """What a wallet signs with eth_signTypedData_v4 to claim authorship of a content_id (no chain, no contract:
    the claim holds on every instance and chain)."""

    types = fields.Nested(TypedDataTypesSchema, required=True)
    primaryType = fields.String(required=True, metadata={"enum": ["Identity"]})
    domain = fields.Nested(TypedDataDomainSchema, required=True)
    message = fields.Nested(TypedDataMessageSchema, required=True)


class IdentityPreviewSchema(Schema):
    """What a create of the same body would make, and the typed data its creator signs."""

    content = fields.Nested(IdentityContentSchema, required=True, metadata={
        "description": "The normalized content: what the content_id is the address of."
    })
    content_id = fields.String(required=True, metadata={"pattern": f"^{CONTENT_ID_PATTERN}$"})
    identity_id = fields.String(required=True, metadata={
        "pattern": IDENTITY_ID_PATTERN, "description": "The identity this content is (the existing one's when exists).",
    })
    identity_hash = fields.String(required=True, metadata={"pattern": IDENTITY_HASH_PATTERN})
    exists = fields.Boolean(required=True, metadata={"description": "Whether this content is an identity here already "
                                                                    "(a create would be 409)."})
    typed_data = fields.Nested(TypedDataSchema, required=True)


# The body's schema as one instance: webargs makes an instance of a class for every request it parses.
signin_schema = SigninSchema()
