"""Real EVM nodes (anvil, from npm: tests/wallets/package-lock.json pins it) with real contract wallets deployed on
them, and viem (tests/wallets/chain.mjs) to deploy, sign and verify as a wallet's SDK does."""

import json
import shutil
import subprocess
import time

import orjson
import urllib3

from tests.common.live import free_port
from tests.wallets import HERE, private_key

# HOME, where the contract wallets are deployed, and OTHER, a chain where none is.
HOME_CHAIN, OTHER_CHAIN = 31337, 31338

ANVIL = HERE / "node_modules" / "@foundry-rs" / "anvil-linux-amd64" / "bin" / "anvil"
# The wallets' owners: owners[0] alone owns the 1-of-1 Safe and the OwnerWallet.sol wallets; owners[0..2] the
# 2-of-3 Safe. STRANGER owns nothing.
OWNER_KEYS = [private_key(f"contract wallet owner {n}") for n in range(3)]
STRANGER_KEY = private_key("contract wallet stranger")


class Anvil:
    """An anvil node on a free loopback port, with chain id `chain_id`; stop() ends it."""

    def __init__(self, chain_id):
        self.chain_id = chain_id
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process = subprocess.Popen(
            [str(ANVIL), "--host", "127.0.0.1", "--port", str(self.port), "--chain-id", str(chain_id), "--silent"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )
        self._wait()

    def _wait(self):
        deadline = time.monotonic() + 30
        body = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "eth_chainId", "params": []})
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"anvil exited: {self.process.stderr.read().decode(errors='replace')[-2000:]}")
            try:
                answer = urllib3.request("POST", self.url, body=body, headers={"Content-Type": "application/json"},
                                         timeout=2, retries=False)
                if answer.status == 200 and int(answer.json()["result"], 16) == self.chain_id:
                    return
            except (urllib3.exceptions.HTTPError, OSError):
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError("anvil did not answer within 30 s")

    def stop(self):
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def viem(self, requests):
        """Run chain.mjs against this node over a list of requests (see its header); its answers, in order."""
        result = subprocess.run([shutil.which("node"), "chain.mjs", self.url], cwd=HERE, input=json.dumps(requests),
                                capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stderr[-3000:]
        answers = json.loads(result.stdout)
        assert len(answers) == len(requests)
        assert not any("error" in answer for answer in answers), answers
        return answers
