"""One Ethereum JSON-RPC call, bounded: `eth_call` at the latest block, as contract wallets' signatures need
(identity.core.contract_wallets).

An answer is bounded in time (the caller's timeout, for the connection, each read and the whole answer),
in size (MAX_ANSWER_BYTES) and in where it comes from: a redirect is not followed. What goes wrong is an
RpcUnavailable whose `reason` says what, short and printable; a call the node ran and that reverted is a
Reverted, the contract's own answer. Connections are kept alive between calls, one pool per endpoint.
"""

import re
import time

import orjson
import urllib3

# An eth_call's answer is its return data as hex: a wallet's answer is 32 bytes, a validator's one byte.
MAX_ANSWER_BYTES = 64 * 1024
USER_AGENT = "identity-service/1 (contract wallet signatures)"
# EIP-1474's code for a call that reverted; geth, anvil, Erigon, Reth and Nethermind answer it so.
REVERTED_CODE = 3
_HEX_DATA = re.compile(r"0x(?:[0-9a-fA-F]{2})*")
_UNPRINTABLE = re.compile(r"[^\x20-\x7e]")
# One pool manager per process, made on its first call (in the worker, after any fork): thread-safe, and
# keeping a few connections per endpoint alive between calls, so that a sign-in does not pay a TLS handshake.
_POOLS = None


class RpcUnavailable(Exception):
    """The endpoint gave no usable answer: down, slow, an HTTP error, a redirect, too large, not JSON-RPC,
    or an error other than a revert. `reason` says which."""

    def __init__(self, reason):
        super().__init__(reason)
        self.reason = reason


class Reverted(Exception):
    """The node ran the call and it reverted: the contract's answer, not the endpoint's fault."""


def eth_call(url, call, timeout):
    """The return data (bytes) of `call` ({"to"?, "data"}: hex strings) run by the endpoint at `url` at its
    latest block, within `timeout` seconds. Raises Reverted or RpcUnavailable."""
    body = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "eth_call", "params": [call, "latest"]})
    deadline = time.monotonic() + timeout
    try:
        response = _pools().request(
            "POST", url, body=body, headers={"Content-Type": "application/json", "User-Agent": USER_AGENT},
            redirect=False, retries=False, preload_content=False,
            timeout=urllib3.Timeout(connect=timeout, read=timeout),
        )
    except (urllib3.exceptions.HTTPError, OSError, ValueError) as error:
        raise RpcUnavailable(_describe(error)) from None
    try:
        if 300 <= response.status < 400:
            raise RpcUnavailable(f"it answered HTTP {response.status}, a redirect, which is not followed")
        if response.status != 200:
            raise RpcUnavailable(f"it answered HTTP {response.status}")
        answer = _read(response, deadline)
    except (urllib3.exceptions.HTTPError, OSError) as error:
        raise RpcUnavailable(_describe(error)) from None
    finally:
        response.release_conn()
    return _result(answer)


def _read(response, deadline):
    """The answer's bytes, at most MAX_ANSWER_BYTES, read before `deadline`."""
    chunks, size = [], 0
    while chunk := response.read1(MAX_ANSWER_BYTES + 1 - size):
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_ANSWER_BYTES:
            raise RpcUnavailable(f"its answer is larger than {MAX_ANSWER_BYTES} bytes")
        if time.monotonic() > deadline:
            raise RpcUnavailable("no complete answer in time")
    return b"".join(chunks)


def _result(answer):
    """The return data of a JSON-RPC answer to eth_call; Reverted or RpcUnavailable when it has none."""
    try:
        reply = orjson.loads(answer)
    except orjson.JSONDecodeError:
        raise RpcUnavailable("its answer is not JSON") from None
    if not isinstance(reply, dict) or reply.get("id") != 1:
        raise RpcUnavailable("its answer is not a JSON-RPC answer to the call")
    error = reply.get("error")
    if error is not None:
        if not isinstance(error, dict):
            raise RpcUnavailable("its answer's error is not a JSON-RPC error")
        code, message = error.get("code"), error.get("message")
        message = message if isinstance(message, str) else ""
        if code == REVERTED_CODE or message.lower().startswith("execution reverted"):
            raise Reverted(printable(message))
        raise RpcUnavailable(f"it answered the JSON-RPC error {printable(code, 20)}: {printable(message)}")
    result = reply.get("result")
    if not isinstance(result, str) or not _HEX_DATA.fullmatch(result):
        raise RpcUnavailable("its answer's result is not hex data")
    return bytes.fromhex(result[2:])


def printable(text, limit=200):
    """Text from an endpoint as a message or a log line may carry it."""
    return _UNPRINTABLE.sub("?", str(text))[:limit]


def _describe(error):
    reason = getattr(error, "reason", None) or error
    if isinstance(reason, urllib3.exceptions.TimeoutError) or isinstance(error, urllib3.exceptions.TimeoutError):
        return "no answer in time"
    if isinstance(reason, urllib3.exceptions.NewConnectionError):
        return "could not connect"
    return printable(f"{type(reason).__name__}: {reason}")


def _pools():
    global _POOLS
    if _POOLS is None:
        _POOLS = urllib3.PoolManager(num_pools=32, maxsize=4, block=False, retries=False)
    return _POOLS
