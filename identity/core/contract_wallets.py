"""Contract wallets' signatures (EIP-1271, EIP-6492): whether a wallet signed a hash, recovered locally first and
asked on its chain only when that fails, so that ordinary wallets never wait on an RPC.

A Safe, a smart account or a passkey wallet is a contract: deployed, it signs by answering
isValidSignature(bytes32 hash, bytes signature) with 0x1626ba7e (EIP-1271); not yet deployed, it signs with
an EIP-6492 wrapper (its factory, the factory's call data and the signature, then the magic suffix), which
EIP-6492's universal validator checks in one deployless eth_call: the validator's creation code with its
constructor's arguments, run with no `to`, deploys the wallet within the call and asks it. A call that
reverts is the wallet's no, as viem reads it. Nothing here is cached: each check asks its chain again.
"""

import logging
from dataclasses import dataclass

from eth_abi import encode
from eth_account.messages import SignableMessage
from eth_utils import keccak

from . import eth_rpc
from .signatures import SignatureError, recover_signer

log = logging.getLogger(__name__)
# isValidSignature(bytes32,bytes)'s selector, and the value a wallet answers when it signed: the same 4 bytes.
IS_VALID_SIGNATURE = bytes.fromhex("1626ba7e")
ERC1271_MAGIC = IS_VALID_SIGNATURE
ERC6492_SUFFIX = bytes.fromhex("6492" * 16)
# The longest signature taken (bytes): a Safe's of many owners, or a wrapper carrying a factory's call data.
MAX_SIGNATURE_BYTES = 16 * 1024
RPC_SETTING = "IDENTITY_ETH_RPC_URLS"
# EIP-6492's universal validator ("ValidateSigOffchain"): its creation code, whose constructor takes
# (address signer, bytes32 hash, bytes signature) and returns one byte, 0x01 when the signature is valid.
# Vendored from viem 2.57.20 (MIT), src/constants/contracts.ts, erc6492SignatureValidatorByteCode, which is
# what viem's verifyMessage and verifyTypedData run; the EIP gives its Solidity source.
UNIVERSAL_VALIDATOR_BYTECODE = bytes.fromhex(
    "608060405234801561001057600080fd5b506040516106ad3803806106ad83398101604081905261002f91610537565b60006100"
    "3c848484610048565b9050806000526001601ff35b60007f64926492649264926492649264926492649264926492649264926492"
    "6492649261007483610425565b036101e7576000606080848060200190518101906100929190610590565b604051929550909350"
    "91506000906001600160a01b038516906100b69085906105f6565b6000604051808303816000865af19150503d80600081146100"
    "f3576040519150601f19603f3d011682016040523d82523d6000602084013e6100f8565b606091505b50509050876001600160a0"
    "1b03163b60000361016057806101605760405162461bcd60e51b815260206004820152601e60248201527f5369676e6174757265"
    "56616c696461746f723a206465706c6f796d656e74000060448201526064015b60405180910390fd5b604051630b135d3f60e11b"
    "808252906001600160a01b038a1690631626ba7e90610190908b908790600401610612565b602060405180830381865afa158015"
    "6101ad573d6000803e3d6000fd5b505050506040513d601f19601f820116820180604052508101906101d1919061064c565b6001"
    "600160e01b0319161494505050505061041e565b6001600160a01b0384163b1561027a57604051630b135d3f60e11b8082529060"
    "01600160a01b03861690631626ba7e906102279087908790600401610612565b602060405180830381865afa158015610244573d"
    "6000803e3d6000fd5b505050506040513d601f19601f82011682018060405250810190610268919061064c565b6001600160e01b"
    "03191614905061041e565b81516041146102df5760405162461bcd60e51b815260206004820152603a6024820152600080516020"
    "61068d83398151915260448201527f3a20696e76616c6964207369676e6174757265206c656e6774680000000000006064820152"
    "608401610157565b6102e761043e565b5060208201516040808401518451859392600091859190811061030c5761030c61067656"
    "5b016020015160f81c9050601b811480159061032b57508060ff16601c14155b1561038c5760405162461bcd60e51b8152602060"
    "04820152603b602482015260008051602061068d83398151915260448201527f3a20696e76616c6964207369676e617475726520"
    "762076616c756500000000006064820152608401610157565b604080516000808252602082018084528a905260ff841692820192"
    "909252606081018590526080810184905260019060a0016020604051602081039080840390855afa1580156103e0573d6000803e"
    "3d6000fd5b5050604051601f1901519150506001600160a01b038116158015906104165750886001600160a01b03168160016001"
    "60a01b0316145b955050505050505b9392505050565b600060208251101561043657600080fd5b508051015190565b6040518060"
    "6001604052806003906020820280368337509192915050565b6001600160a01b038116811461047157600080fd5b50565b634e48"
    "7b7160e01b600052604160045260246000fd5b60005b838110156104a557818101518382015260200161048d565b505060009101"
    "52565b600082601f8301126104bf57600080fd5b81516001600160401b038111156104d8576104d8610474565b604051601f8201"
    "601f19908116603f011681016001600160401b038111828210171561050657610506610474565b60405281815283820160200185"
    "101561051e57600080fd5b61052f82602083016020870161048a565b949350505050565b60008060006060848603121561054c57"
    "600080fd5b83516105578161045c565b6020850151604086015191945092506001600160401b0381111561057a57600080fd5b61"
    "0586868287016104ae565b9150509250925092565b6000806000606084860312156105a557600080fd5b83516105b08161045c56"
    "5b60208501519093506001600160401b038111156105cc57600080fd5b6105d8868287016104ae565b6040860151909350905060"
    "01600160401b0381111561057a57600080fd5b6000825161060881846020870161048a565b9190910192915050565b8281526040"
    "60208201526000825180604084015261063781606085016020870161048a565b601f01601f191691909101606001939250505056"
    "5b60006020828403121561065e57600080fd5b81516001600160e01b03198116811461041e57600080fd5b634e487b7160e01b60"
    "0052603260045260246000fdfe5369676e617475726556616c696461746f72237265636f7665725369676e6572"
)


class NotSigned(Exception):
    """No valid signature of `address`: `signer` is the wallet it recovers to (None when it recovers to none),
    `problem` why it does not recover (None when it does), and `contract` whether the chain was asked."""

    def __init__(self, signer=None, problem=None, contract=False):
        super().__init__(problem or f"recovers to {signer}")
        self.signer = signer
        self.problem = problem
        self.contract = contract


class NoEndpoint(Exception):
    """The signature needs its chain's answer and IDENTITY_ETH_RPC_URLS names no endpoint for `chain_id`."""

    def __init__(self, chain_id, signer=None, problem=None):
        super().__init__(f"no endpoint for chain {chain_id}")
        self.chain_id = chain_id
        self.signer = signer
        self.problem = problem


class ChainUnavailable(Exception):
    """The chain's endpoint gave no usable answer (eth_rpc.RpcUnavailable); `reason` says what."""

    def __init__(self, chain_id, reason):
        super().__init__(f"the endpoint of chain {chain_id}: {reason}")
        self.chain_id = chain_id
        self.reason = reason


@dataclass(frozen=True)
class Endpoints:
    """IDENTITY_ETH_RPC_URLS ({chain id: URL}) and IDENTITY_ETH_RPC_TIMEOUT_SECONDS."""

    urls: dict
    timeout: float

    @classmethod
    def of(cls, config):
        """The endpoints of an app's config (a mapping)."""
        return cls(config.get("IDENTITY_ETH_RPC_URLS") or {}, config.get("IDENTITY_ETH_RPC_TIMEOUT_SECONDS", 5.0))


def digest(signable: SignableMessage):
    """The 32-byte hash a wallet signs for `signable`: EIP-191's, of which EIP-712's digest is version 1."""
    return keccak(b"\x19" + signable.version + signable.header + signable.body)


def signature_data(signature_hex):
    """The bytes of `0x` and an even number of hex digits (at most MAX_SIGNATURE_BYTES), or None when it is not that."""
    if not isinstance(signature_hex, str) or not signature_hex.startswith("0x"):
        return None
    digits = signature_hex[2:]
    if len(digits) % 2 or len(digits) > 2 * MAX_SIGNATURE_BYTES or not digits.isascii():
        return None
    try:
        return bytes.fromhex(digits)
    except ValueError:
        return None


def check(address, signable, signature_hex, chain_id, endpoints):
    """Return whether `address` signed `signable` through its contract: False when the signature recovers to
    `address` locally (no RPC made), True when the wallet on chain `chain_id` accepts it.

    Raises NotSigned when neither holds (or when `chain_id` is None and the signature does not recover to
    `address`), NoEndpoint when the chain has no endpoint, ChainUnavailable when its endpoint fails.
    """
    signer = problem = None
    try:
        signer = recover_signer(signable, signature_hex)
    except SignatureError as error:
        problem = error.detail
    if signer == address:
        return False
    data = signature_data(signature_hex)
    if chain_id is None or data is None:
        raise NotSigned(signer, problem)
    url = endpoints.urls.get(chain_id)
    if url is None:
        raise NoEndpoint(chain_id, signer, problem)
    if not accepted(url, endpoints.timeout, address, digest(signable), data, chain_id):
        raise NotSigned(signer, problem, contract=True)
    return True


def accepted(url, timeout, address, hash_, signature, chain_id):
    """Whether the wallet at `address` accepts `signature` of `hash_`, asked of the endpoint `url`: through
    EIP-6492's validator when the signature ends with its suffix, else by the wallet's isValidSignature."""
    try:
        if signature.endswith(ERC6492_SUFFIX):
            arguments = encode(["address", "bytes32", "bytes"], [address, hash_, signature])
            answer = eth_rpc.eth_call(url, {"data": _hex(UNIVERSAL_VALIDATOR_BYTECODE + arguments)}, timeout)
            return answer == b"\x01"
        arguments = encode(["bytes32", "bytes"], [hash_, signature])
        answer = eth_rpc.eth_call(url, {"to": address, "data": _hex(IS_VALID_SIGNATURE + arguments)}, timeout)
        # The answer is an ABI-encoded bytes4: its first 4 bytes are the value, as viem decodes it.
        return len(answer) >= 32 and answer[:4] == ERC1271_MAGIC
    except eth_rpc.Reverted:
        return False
    except eth_rpc.RpcUnavailable as error:
        # The operator's to fix: the endpoint is theirs. The URL is not logged (it may hold a provider's key).
        log.warning("chain %s's JSON-RPC endpoint (IDENTITY_ETH_RPC_URLS) gave no answer: %s", chain_id, error.reason,
                    extra={"chain_id": chain_id})
        raise ChainUnavailable(chain_id, error.reason) from None


def _hex(data):
    return "0x" + data.hex()
