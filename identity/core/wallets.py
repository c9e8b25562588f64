"""Ethereum wallet addresses as the service accepts and stores them."""

import functools
import re

from eth_utils import is_checksum_address, to_checksum_address

_ADDRESS = re.compile(r"0x[0-9a-fA-F]{40}")


def checksum_wallet(value):
    """Return the EIP-55 form of an address, or raise ValueError saying what is wrong.

    All-lower and all-upper hex carry no checksum and are accepted; mixed case must pass EIP-55.
    """
    if not isinstance(value, str) or not _ADDRESS.fullmatch(value):
        raise ValueError("Not an Ethereum address: expected 0x and 40 hex digits.")
    return _checksummed(value)


# Keccak costs tens of microseconds; an import names the same few creators on a million lines.
@functools.lru_cache(maxsize=4096)
def _checksummed(value):
    digits = value[2:]
    if digits != digits.lower() and digits != digits.upper() and not is_checksum_address(value):
        raise ValueError("Mixed-case address fails its EIP-55 checksum.")
    return to_checksum_address(value)
