"""The code docs/keys.md and docs/curation-and-feed.md show runs as written, against a real server: the browser's
sign-in and signed create (run by node, its `window.ethereum` an ethers wallet, as a browser's wallet would
answer), the sign-in in Python with eth-account, the check of authorship with ethers and with eth-account, and the TypeScript client, which `tsc
--strict` compiles against the types openapi-typescript generates from the live document."""

import json
import os
import re
import shutil
import subprocess

import pytest
import requests

from tests import wallets
from tests.common.clients import TS, run
from tests.common.live import ROOT, LiveServer, prepare_database

KEYS_DOC = ROOT / "docs" / "keys.md"
FEED_DOC = ROOT / "docs" / "curation-and-feed.md"
DOCUMENTED_BASE = '"http://127.0.0.1:8000"'
# What a browser's wallet (EIP-1193) answers, played by an ethers wallet: accounts in lower case, as
# MetaMask gives them, personal_sign of the text, eth_signTypedData_v4 of the JSON it is given.
WINDOW_ETHEREUM = """
import { Wallet as DocsTestWallet } from "ethers";
const docsTestWallet = new DocsTestWallet(process.env.PRIVATE_KEY);
globalThis.window = { ethereum: { async request({ method, params }) {
  if (method === "eth_requestAccounts") return [docsTestWallet.address.toLowerCase()];
  if (method === "eth_chainId") return "0x1";
  if (method === "personal_sign") {
    if (params[1] !== docsTestWallet.address.toLowerCase()) throw new Error("personal_sign: not this account");
    return docsTestWallet.signMessage(params[0]);
  }
  if (method === "eth_signTypedData_v4") {
    const typed = JSON.parse(params[1]);
    const { EIP712Domain, ...types } = typed.types;
    return docsTestWallet.signTypedData(typed.domain, types, typed.message);
  }
  throw new Error(`unexpected ${method}`);
} } };
"""


def blocks(path, language):
    return re.findall(rf"^```{language}\n(.*?)^```", path.read_text(), flags=re.S | re.M)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    database_url = f"sqlite:///{tmp_path_factory.mktemp('docs') / 'identity.db'}"
    api_key = prepare_database(database_url, wallets.address_of(wallets.private_key("docs admin")))
    server = LiveServer(database_url, workers=1, env={"IDENTITY_SIWE_DOMAIN": "identity.test"}).start()
    server.api_key = api_key
    yield server
    server.stop()


@pytest.fixture(scope="module")
def browser_run(server):
    """The three JavaScript blocks of docs/keys.md in one module, run by node: sign in, create signed, check."""
    wallets.install()
    key = wallets.private_key("docs browser")
    script = "\n".join(blocks(KEYS_DOC, "js")).replace(DOCUMENTED_BASE, json.dumps(server.url))
    script += WINDOW_ETHEREUM + """
const apiKey = await signIn();
const identity = await createSigned(apiKey, { display_name: "Signed in a browser" });
const fetched = await (await fetch(`${BASE}/identity/${identity.identity_id}`, { headers: { "x-api-key": apiKey } })).json();
console.log(JSON.stringify({ apiKey, identity: fetched, signer: signerOf(fetched) }));
"""
    module = wallets.HERE / f"docs-example-{os.getpid()}.mjs"  # one per xdist worker
    module.write_text(script)
    try:
        result = subprocess.run(["node", str(module)], cwd=wallets.HERE, capture_output=True, text=True, timeout=120,
                                env={**os.environ, "PRIVATE_KEY": key})
    finally:
        module.unlink()
    assert result.returncode == 0, result.stderr[-3000:]
    return {**json.loads(result.stdout), "wallet": wallets.address_of(key)}


def test_the_browser_sign_in_gets_a_working_key_of_the_wallet(server, browser_run):
    me = requests.get(f"{server.url}/me", headers={"x-api-key": browser_run["apiKey"]}, timeout=10).json()
    assert me["user"]["wallet"] == browser_run["wallet"] and me["key"]["created_by"] == "siwe"


def test_the_browser_creates_a_signed_identity_and_ethers_checks_it_as_documented(browser_run):
    identity = browser_run["identity"]
    assert identity["creator"]["wallet"] == browser_run["wallet"]
    assert identity["creator_signature"] and browser_run["signer"] == browser_run["wallet"]


def test_the_python_sign_in_gets_a_working_key_of_the_wallet_and_a_read_key_when_asked(server):
    sign_in_example, _ = blocks(KEYS_DOC, "python")
    namespace = {}
    example = sign_in_example.replace(DOCUMENTED_BASE, json.dumps(server.url))
    exec(compile(example, str(KEYS_DOC), "exec"), namespace)  # noqa: S102 - the documentation's own example
    key = wallets.private_key("docs python")
    for scope, expected in ((None, "write"), ("read", "read")):
        api_key = namespace["sign_in"](key, scope)
        me = requests.get(f"{server.url}/me", headers={"x-api-key": api_key}, timeout=10).json()
        assert me["user"]["wallet"] == wallets.address_of(key)
        assert (me["key"]["created_by"], me["key"]["scope"]) == ("siwe", expected)


def test_the_eth_account_check_gives_the_creator_and_none_for_an_unsigned_identity(server, browser_run):
    _, python = blocks(KEYS_DOC, "python")
    namespace = {}
    exec(compile(python, str(KEYS_DOC), "exec"), namespace)  # noqa: S102 - the documentation's own example
    assert namespace["signer_of"](browser_run["identity"]) == browser_run["wallet"]
    unsigned = requests.post(f"{server.url}/identity", json={"display_name": "Not signed"},
                             headers={"x-api-key": server.api_key}, timeout=10).json()
    assert namespace["signer_of"](unsigned) is None


def test_the_documented_typescript_client_type_checks_strictly_and_reads_the_feed(server, npm_tools, tmp_path):  # noqa: F811
    [example] = blocks(FEED_DOC, "ts")
    assert "createClient<paths, `${string}/${string}json`>" in example
    requests.post(f"{server.url}/identity", json={"display_name": "In the feed"}, headers={"x-api-key": server.api_key},
                  timeout=10)
    project = tmp_path / "docs-client"
    project.mkdir()
    (project / "node_modules").symlink_to(TS / "node_modules")
    (project / "package.json").write_text('{"type": "module"}')
    shutil.copy(TS / "tsconfig.json", project / "tsconfig.json")
    tsconfig = json.loads((project / "tsconfig.json").read_text())
    tsconfig["include"] = ["example.ts", "schema.d.ts"]
    (project / "tsconfig.json").write_text(json.dumps(tsconfig))
    run([str(npm_tools / "openapi-typescript"), server.url + "/openapi.json", "-o", str(project / "schema.d.ts")])
    (project / "example.ts").write_text(
        example.replace(DOCUMENTED_BASE, json.dumps(server.url)).replace('"idsk_…"', json.dumps(server.api_key))
    )
    run([str(npm_tools / "tsc"), "-p", str(project)], cwd=project)
    result = run(["node", str(project / "build" / "example.js")], cwd=project)
    assert re.search(r"^1 created did:identity:ipfs:bafkrei", result.stdout, flags=re.M), result.stdout
    assert re.search(r"^next_after [1-9]", result.stdout, flags=re.M)
