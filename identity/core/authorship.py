"""Signed authorship: a creator's EIP-712 signature of an identity's content id, and the wallet it came from.

The domain names no chain and no contract, so one signature holds on every instance and every chain;
anyone can check it with a stock library (ethers' verifyTypedData, eth-account's recover_message).
"""

from eth_account.messages import SignableMessage
from eth_utils import keccak

from identity.core import contract_wallets
from identity.core.signatures import canonical_signature, recover_signer

DOMAIN = {"name": "Identity", "version": "1"}
PRIMARY_TYPE = "Identity"
TYPES = {
    # What eth_signTypedData_v4 expects beside the primary type: the fields of DOMAIN, in their order.
    "EIP712Domain": [{"name": "name", "type": "string"}, {"name": "version", "type": "string"}],
    "Identity": [{"name": "contentId", "type": "string"}],
}


def typed_data(content_id):
    """Return the object a wallet signs with eth_signTypedData_v4 to claim authorship of content_id."""
    return {
        "types": {name: [dict(field) for field in fields] for name, fields in TYPES.items()},
        "primaryType": PRIMARY_TYPE,
        "domain": dict(DOMAIN),
        "message": {"contentId": content_id},
    }


# EIP-712's hashes of the fixed parts: the domain separator, and the type hash of Identity. What
# eth-account's encode_typed_data works out from typed_data() on every call (tests/core/test_authorship.py
# checks that both give the same), which was a third of a recovery's time and is most of an import's
# time per signed line.
DOMAIN_SEPARATOR = keccak(
    keccak(b"EIP712Domain(string name,string version)") + keccak(DOMAIN["name"].encode()) + keccak(DOMAIN["version"].encode())
)
IDENTITY_TYPE_HASH = keccak(b"Identity(string contentId)")


def signable(content_id):
    """What an EIP-712 signature of typed_data(content_id) signs: version 1, the domain separator, the struct hash."""
    return SignableMessage(b"\x01", DOMAIN_SEPARATOR, keccak(IDENTITY_TYPE_HASH + keccak(content_id.encode())))


def recover_author(content_id, signature_hex):
    """Return the EIP-55 address of the wallet whose key signed typed_data(content_id).

    Raises SignatureError (identity.core.signatures) for a malformed or unrecoverable signature.
    """
    return recover_signer(signable(content_id), signature_hex)


def check_author(content_id, creator, signature_hex, chain_id, endpoints):
    """(the signature as it is stored and served, the chain it holds on) when `creator` signed
    typed_data(content_id): an ordinary wallet's, recovered here (its chain is None: it holds on every chain),
    or a contract wallet's, accepted by it on chain `chain_id` (EIP-1271, EIP-6492), asked only when the
    signature does not recover to `creator`.

    Raises contract_wallets' NotSigned, NoEndpoint or ChainUnavailable (contract_wallets.check).
    """
    signable_message = signable(content_id)
    if contract_wallets.check(creator, signable_message, signature_hex, chain_id, endpoints):
        return "0x" + contract_wallets.signature_data(signature_hex).hex(), chain_id
    return canonical_signature(signature_hex), None
