"""Signatures another way: the same signer's signature with s replaced by n - s, or with v written otherwise."""

from identity.core.signatures import SECP256K1_N


def variant(signature, *, flip_s=False, v=None):
    """signature with s replaced by n - s (and v by the other parity), or with v written another way."""
    raw = bytes.fromhex(signature[2:])
    r, s, recovery = raw[:32], int.from_bytes(raw[32:64], "big"), raw[64]
    if flip_s:
        s, recovery = SECP256K1_N - s, 55 - recovery
    return "0x" + (r + s.to_bytes(32, "big") + bytes([recovery if v is None else v])).hex()
