"""The wallet behind a signature: 65 bytes (r, s, v) in hex, recovered with eth-account.

Sign-in (EIP-191 personal_sign) and authorship (EIP-712) signatures have this one form, so both are
checked here, before any curve arithmetic, and every way a signature can be wrong is a SignatureError.
"""

import re

from eth_account import Account
from eth_account.messages import SignableMessage
from eth_keys.exceptions import BadSignature
from eth_utils import ValidationError

SIGNATURE_DIGITS = 130
# The longest signature taken (bytes), a contract wallet's (identity.core.contract_wallets): a Safe's of many
# owners, or an EIP-6492 wrapper carrying a factory's call data.
MAX_SIGNATURE_BYTES = 16 * 1024
# The order of secp256k1's group: r and s lie in 1..n-1.
SECP256K1_N = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141
# personal_sign and eth_signTypedData_v4 give 27 or 28; some hardware wallets give the recovery id itself.
RECOVERY_VS = frozenset({0, 1, 27, 28})

_HEX_DIGITS = re.compile(r"[0-9a-fA-F]*")


class SignatureError(ValueError):
    """A signature that is not 65 bytes in hex, or that no key can have made; `detail` says which."""

    def __init__(self, detail):
        super().__init__(detail)
        self.detail = detail


def signature_bytes(signature_hex):
    """Return the 65 bytes that `0x` and 130 hex digits spell, or raise SignatureError saying what is wrong.

    s must lie in the lower half of the group's order (EIP-2), as every wallet signs: of the two
    signatures that recover to one wallet, only that one is accepted, and ethers' verifiers accept it.
    """
    form = f"0x and {SIGNATURE_DIGITS} hex digits (65 bytes: r, s and v)"
    if not isinstance(signature_hex, str):
        raise SignatureError(f"Expected the signature as text: {form}.")
    if not signature_hex.startswith("0x"):
        raise SignatureError(f"The signature does not start with 0x: expected {form}.")
    digits = signature_hex[2:]
    if len(digits) != SIGNATURE_DIGITS:
        raise SignatureError(f"The signature has {len(digits)} characters after 0x: expected {form}.")
    if not _HEX_DIGITS.fullmatch(digits):
        raise SignatureError(f"The signature has a character that is not a hex digit: expected {form}.")
    raw = bytes.fromhex(digits)
    r, s, v = int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:64], "big"), raw[64]
    if v not in RECOVERY_VS:
        raise SignatureError(f"The signature's v is {v}: expected 27 or 28 (or 0 or 1).")
    if not 0 < r < SECP256K1_N:
        raise SignatureError("The signature's r is 0 or not below secp256k1's order.")
    if not 0 < s <= SECP256K1_N // 2:
        raise SignatureError("The signature's s is 0 or in the upper half of secp256k1's order, "
                             "which EIP-2 rules out: wallets sign with the lower s.")
    return raw


def canonical_signature(signature_hex):
    """The one form a signature is stored and served in: 0x, lower-case hex, v as 27 or 28 (every verifier reads it)."""
    raw = signature_bytes(signature_hex)
    v = raw[64] if raw[64] >= 27 else raw[64] + 27
    return "0x" + raw[:64].hex() + format(v, "02x")


def recover_signer(signable: SignableMessage, signature_hex):
    """Return the EIP-55 address of the wallet whose key made signature_hex over signable.

    Raises SignatureError for a signature of the wrong form or one that no key can have made. Any
    well-formed signature recovers to some wallet: whether it is the expected one is the caller's check.
    """
    raw = signature_bytes(signature_hex)
    try:
        return Account.recover_message(signable, signature=raw)
    # BadSignature: r is not the x of a point on the curve. The others are eth-account's own checks
    # of what signature_bytes has checked already; they stay SignatureErrors should those differ.
    except (BadSignature, ValidationError, ValueError) as error:
        raise SignatureError("No key can have made this signature (its r is not a point of secp256k1).") from error
