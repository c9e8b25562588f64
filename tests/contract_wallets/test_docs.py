"""docs/keys.md's contract-wallet examples run as written, against real wallets on anvil: the Safe's signature
(safeSignature) signs a Safe in, and viem's check of authorship (authoredBy) tells a contract wallet's signed
identity from a forged and an unsigned one."""

import json
import os
import re
import subprocess

import pytest

from tests.common.chain import HOME_CHAIN, OWNER_KEYS
from tests.common.contract_wallets import CASES, LIMITS, signed_bodies
from tests.common.live import ROOT
from tests.wallets import HERE, siwe_message

KEYS_DOC = ROOT / "docs" / "keys.md"
DOMAIN = "identity.example.com"


@pytest.fixture
def app_config(chains):
    return {"IDENTITY_ETH_RPC_URLS": dict(chains.urls), **LIMITS}


def block(defining):
    """The JavaScript block of docs/keys.md that defines `defining`."""
    [found] = [code for code in re.findall(r"^```js\n(.*?)^```", KEYS_DOC.read_text(), flags=re.S | re.M)
               if f"function {defining}(" in code]
    return found


def run_node(script, **env):
    module = HERE / f"docs-contract-wallets-{os.getpid()}.mjs"
    module.write_text(script)
    try:
        result = subprocess.run(["node", str(module)], cwd=HERE, capture_output=True, text=True, timeout=120,
                                env={**os.environ, **env})
    finally:
        module.unlink()
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)


def test_the_documented_safe_signature_signs_a_safe_in(database_url, chains):
    from tests.common.apps import make_app
    client = make_app(database_url, IDENTITY_SIWE_DOMAIN=DOMAIN, IDENTITY_ETH_RPC_URLS=dict(chains.urls)).test_client()
    nonce = client.get("/auth/nonce").get_json()["nonce"]
    message = siwe_message(DOMAIN, chains.wallets.safe2of3, nonce, chain_id=HOME_CHAIN)
    script = block("safeSignature") + """
import { privateKeyToAccount } from "viem/accounts";
const { safe, chainId, message, keys } = JSON.parse(process.env.REQUEST);
console.log(JSON.stringify(await safeSignature(safe, chainId, message, keys.map((key) => privateKeyToAccount(key)))));
"""
    signature = run_node(script, REQUEST=json.dumps({"safe": chains.wallets.safe2of3, "chainId": HOME_CHAIN,
                                                     "message": message, "keys": OWNER_KEYS[1:]}))
    response = client.post("/auth/siwe", json={"message": message, "signature": signature})
    assert response.status_code == 201, response.text
    assert response.get_json()["wallet"] == chains.wallets.safe2of3


def test_the_documented_viem_check_tells_a_contract_wallets_identity_from_a_forged_and_an_unsigned_one(
        client, admin_key, chains):
    bodies, _, signatures = signed_bodies(client, admin_key, chains, [CASES[0]], label="Documented")
    created = client.post("/identity", json={**bodies[0], "signature": signatures[0], "signature_chain_id": HOME_CHAIN},
                          headers={"x-api-key": admin_key})
    assert created.status_code == 201, created.text
    identity = created.get_json()
    other = client.post("/identity", json={"display_name": "Unsigned", "creator": chains.wallets.safe1of1},
                        headers={"x-api-key": admin_key}).get_json()
    forged = {**other, "creator_signature": identity["creator_signature"]}  # the Safe's signature of other content
    script = block("authoredBy") + """
const { identities, rpcUrl } = JSON.parse(process.env.REQUEST);
const verdicts = [];
for (const identity of identities) verdicts.push(await authoredBy(identity, rpcUrl));
console.log(JSON.stringify(verdicts));
"""
    verdicts = run_node(script, REQUEST=json.dumps({"identities": [identity, forged, other], "rpcUrl": chains.home.url}))
    assert verdicts == [True, False, False]
