"""ethers, run by node: a wallet written by others that signs and verifies for the tests; and the EIP-4361
message a wallet signs to sign in. (The same package holds viem, anvil, Safe's contracts and solc, which
tests/contract_wallets runs through chain.mjs.)

package.json and package-lock.json pin them exactly; `npm ci` installs it into node_modules once,
reused while the lock is unchanged. sign.mjs takes a batch of requests per run, so a test module
starts node once or twice, not once a signature.
"""

import json
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path

from eth_account import Account
from eth_utils import keccak

from tests.common.npm import npm_ci

HERE = Path(__file__).resolve().parent


def install():
    """Install the pinned packages unless this lock's install is there; skip the test without node and npm."""
    npm_ci(HERE)


def ethers(requests):
    """Run sign.mjs over a list of requests (see its header) and return its answers, in order."""
    result = subprocess.run([shutil.which("node"), "sign.mjs"], cwd=HERE, input=json.dumps(requests),
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    answers = json.loads(result.stdout)
    assert len(answers) == len(requests)
    return answers


def private_key(name):
    """A wallet's private key made from `name`, so that a failure can be replayed."""
    return "0x" + keccak(f"tests/wallets {name}".encode()).hex()


def address_of(key):
    return Account.from_key(key).address


def sign_messages(pairs):
    """ethers' personal_sign signatures of each (private key, message text), in one run of node."""
    return _signatures([{"op": "signMessage", "privateKey": key, "message": text} for key, text in pairs])


def sign_typed_data(pairs):
    """ethers' eth_signTypedData_v4 signatures of each (private key, typed data), in one run of node."""
    return _signatures([{"op": "signTypedData", "privateKey": key, "typedData": typed} for key, typed in pairs])


def _signatures(requests):
    answers = ethers(requests)
    assert all("signature" in answer for answer in answers), answers
    return [answer["signature"] for answer in answers]


def rfc3339(moment):
    """A time as wallets' libraries write it in a message (JavaScript's toISOString): milliseconds and Z."""
    moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def siwe_message(domain, address, nonce, *, uri=None, statement="Sign in to the Identity service.", chain_id=1,
                 issued_at=None, expiration_time=None, not_before=None, scheme=None):
    """An EIP-4361 message, laid out as the EIP's grammar says (a statement has an empty line on each side)."""
    lines = [f"{scheme + '://' if scheme else ''}{domain} wants you to sign in with your Ethereum account:", address, ""]
    lines += [statement, ""] if statement is not None else [""]
    lines += [f"URI: {uri or 'https://' + domain}", "Version: 1", f"Chain ID: {chain_id}", f"Nonce: {nonce}",
              f"Issued At: {rfc3339(issued_at or datetime.now(UTC))}"]
    if expiration_time is not None:
        lines.append(f"Expiration Time: {rfc3339(expiration_time)}")
    if not_before is not None:
        lines.append(f"Not Before: {rfc3339(not_before)}")
    return "\n".join(lines)
