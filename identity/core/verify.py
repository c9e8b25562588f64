"""Checking an identity that came from elsewhere (an import's line, a mirror's upstream) by its own
addresses: its content, recomputed from its fields, must hash to the content id that its identity_id
and identity_hash name; and its creator's signature, when it has one, must recover to its creator.
Nothing that fails is stored."""

from . import content
from .authorship import recover_author
from .signatures import SignatureError


class Unverified(ValueError):
    """An identity that is not what its addresses or its signature say; the message says why."""


def verified_content_id(fields):
    """The content id of `fields`' content (their content fields, normalized already), after checking
    that `fields`' identity_id and identity_hash are its addresses; raises Unverified.

    The identity_id may name any DID namespace: an identity keeps the id it was created under.
    """
    check = content.check_address(fields, fields["identity_id"], fields["identity_hash"])
    if not check.id_matches:
        raise Unverified(f"identity_id {fields['identity_id']} is not the address of this content, which is "
                         f"{check.content_id}")
    if not check.hash_matches:
        raise Unverified(f"identity_hash {fields['identity_hash']} is not the hash of this content's address, "
                         f"which is {check.identity_hash}")
    return check.content_id


def check_creator_signature(content_id, creator, signature):
    """Raise Unverified unless `signature` (None: the create was not signed) is `creator`'s EIP-712
    signature of `content_id` (identity.core.authorship)."""
    if signature is None:
        return
    try:
        signer = recover_author(content_id, signature)
    except SignatureError as error:
        raise Unverified(f"creator_signature is not a valid signature: {error.detail}") from None
    if signer != creator:
        raise Unverified(f"creator_signature is not the creator's: it recovers to {signer}, not to {creator}; its "
                         "signature belongs to another wallet or to other content")
