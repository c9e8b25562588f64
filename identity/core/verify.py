"""Checking an identity that came from elsewhere (an import's line, a mirror's upstream) by its own
addresses: its content, recomputed from its fields, must hash to the content id that its identity_id
and identity_hash name; and its creator's signature, when it has one, must be its creator's: recovered to it, or
accepted by its contract wallet on the chain the identity names.
Nothing that fails is stored."""

from . import authorship, content, contract_wallets


class Unverified(ValueError):
    """An identity that is not what its addresses or its signature say; the message says why."""


class Unverifiable(Unverified):
    """An identity whose contract wallet's signature cannot be checked here (its chain has no endpoint, or the
    endpoint fails); the message says why and what to do. Refused as Unverified is: nothing unverified is stored."""


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


def check_creator_signature(content_id, creator, signature, chain_id, endpoints):
    """(the signature as stored, its chain) when `signature` (None: the create was not signed) is `creator`'s EIP-712
    signature of `content_id` (identity.core.authorship): an ordinary wallet's, or a contract wallet's accepted on
    chain `chain_id`. Raises Unverified when it is not, Unverifiable when it cannot be checked here (no endpoint
    for the chain, or its endpoint failing): never stored unverified."""
    if signature is None:
        if chain_id is not None:
            raise Unverified("creator_signature_chain_id names a chain but there is no creator_signature")
        return None, None
    try:
        return authorship.check_author(content_id, creator, signature, chain_id, endpoints)
    except contract_wallets.NotSigned as error:
        if error.contract:
            raise Unverified(f"creator_signature is not the creator's: it does not recover to {creator}, and the "
                             f"contract at {creator} on chain {chain_id} does not accept it") from None
        if error.problem is not None:
            raise Unverified(f"creator_signature is not a valid signature: {error.problem}") from None
        raise Unverified(f"creator_signature is not the creator's: it recovers to {error.signer}, not to {creator}; "
                         "its signature belongs to another wallet or to other content") from None
    except contract_wallets.NoEndpoint:
        raise Unverifiable(f"creator_signature is a contract wallet's on chain {chain_id}, and this service has no "
                           f"endpoint for chain {chain_id} to check it: name one in {contract_wallets.RPC_SETTING}, "
                           "then bring it again") from None
    except contract_wallets.ChainUnavailable as error:
        raise Unverifiable(f"creator_signature is a contract wallet's on chain {chain_id}, and chain {chain_id}'s "
                           f"endpoint ({contract_wallets.RPC_SETTING}) gave no answer: {error.reason}; bring it again "
                           "when it answers") from None
