"""Export and import (identity.data.imports): an exported Identity, as `identities import` reads it."""

from marshmallow import fields, validate

from .fields import (
    IDENTITY_HASH_PATTERN,
    IDENTITY_ID_PATTERN,
    MAX_SAFE_INTEGER,
    SIGNATURE_MAX_LENGTH,
    SIGNATURE_PATTERN,
    CurationText,
    UInt256String,
    Wallet,
    WholeNumber,
)
from .identities import STATUSES, IdentityCreateSchema


class IdentityImportSchema(IdentityCreateSchema):
    """A line of `identities import`: an exported Identity. The content fields are validated and
    normalized as a create's are; the ids are checked against the content, and creator_signature against
    the creator, by identity.data.imports. A line without creator_signature (an export made before it
    existed) is unsigned."""

    class Meta(IdentityCreateSchema.Meta):
        exclude = ("signature", "signature_chain_id")  # a create's; an exported identity carries creator_signature*

    id = fields.UUID(required=True)
    identity_id = fields.String(required=True, validate=validate.Regexp(IDENTITY_ID_PATTERN))
    identity_hash = fields.String(required=True, validate=validate.Regexp(IDENTITY_HASH_PATTERN))
    creator = Wallet(required=True)
    creator_signature = fields.String(allow_none=True, load_default=None, validate=[
        validate.Length(max=SIGNATURE_MAX_LENGTH), validate.Regexp(SIGNATURE_PATTERN)])
    creator_signature_chain_id = WholeNumber(allow_none=True, load_default=None,
                                             validate=validate.Range(1, MAX_SAFE_INTEGER))
    vault_id = UInt256String(required=True)
    corpora_id = fields.String(required=True, allow_none=True, validate=CurationText())
    semantic = fields.String(required=True, allow_none=True, validate=CurationText())
    created_at = fields.AwareDateTime(required=True)
    updated_at = fields.AwareDateTime(required=True)
    num_positions = WholeNumber(required=True, validate=validate.Range(0, MAX_SAFE_INTEGER))
    assets_sum = UInt256String(required=True)
    conviction_sum = UInt256String(required=True)
    conviction_price = UInt256String(required=True)
    status = fields.String(required=True, validate=validate.OneOf(STATUSES))
    isUser = fields.Boolean(attribute="is_user", required=True, truthy={True}, falsy={False})
    user_conviction = UInt256String(required=True)
    user_conviction_value = UInt256String(required=True)


identity_import_schema = IdentityImportSchema()
