"""Signed authorship: a creator's EIP-712 signature of an identity's content id, and the wallet it came from.

The domain names no chain and no contract, so one signature holds on every instance and every chain;
anyone can check it with a stock library (ethers' verifyTypedData, eth-account's recover_message).
"""

from eth_account.messages import encode_typed_data

from identity.core.signatures import recover_signer

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


def recover_author(content_id, signature_hex):
    """Return the EIP-55 address of the wallet whose key signed typed_data(content_id).

    Raises SignatureError (identity.core.signatures) for a malformed or unrecoverable signature.
    """
    return recover_signer(encode_typed_data(full_message=typed_data(content_id)), signature_hex)
