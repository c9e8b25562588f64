"""Contract wallets sign in (EIP-1271, EIP-6492), against real wallets on a real node (anvil): Safes, an
owner-checked wallet and a counterfactual one, each case also verified by viem's verifyMessage, which must agree
with the service; and the endpoint's faults, answered as the contract says. On SQLite and on PostgreSQL."""


import pytest
from eth_account import Account
from eth_account.messages import encode_defunct

from tests.common.chain import HOME_CHAIN, OTHER_CHAIN, OWNER_KEYS, STRANGER_KEY
from tests.common.contract_wallets import closed_port_url, sign
from tests.common.faulty_rpc import FaultyRpc
from tests.wallets import address_of, siwe_message

DOMAIN = "identity.example.com"
OWNER0, OWNER1, OWNER2 = OWNER_KEYS
SETTING = "IDENTITY_ETH_RPC_URLS"

# (case, wallet, chain the message names, how it is signed, whether the wallet signed it).
# How: ("safe", keys) the owners' SafeMessage signatures; ("hash", key) the key's signature of the message's
# hash, as OwnerWallet.sol checks it; ("6492", key) that, wrapped for the counterfactual wallet; ("other", how)
# the signature `how` makes of another message (a wrong hash).
CASES = [
    ("1-of-1 Safe, its owner", "safe1of1", HOME_CHAIN, ("safe", [OWNER0]), True),
    ("2-of-3 Safe, two owners", "safe2of3", HOME_CHAIN, ("safe", [OWNER0, OWNER2]), True),
    ("EIP-1271 wallet, its owner", "wallet", HOME_CHAIN, ("hash", OWNER0), True),
    ("counterfactual wallet, its owner (EIP-6492)", "counterfactual", HOME_CHAIN, ("6492", OWNER0), True),
    ("1-of-1 Safe, another owner's signature", "safe1of1", HOME_CHAIN, ("safe", [STRANGER_KEY]), False),
    ("2-of-3 Safe below its threshold", "safe2of3", HOME_CHAIN, ("safe", [OWNER1]), False),
    ("EIP-1271 wallet, a stranger's signature", "wallet", HOME_CHAIN, ("hash", STRANGER_KEY), False),
    ("EIP-1271 wallet, a wrong hash", "wallet", HOME_CHAIN, ("other", ("hash", OWNER0)), False),
    ("2-of-3 Safe, a wrong hash", "safe2of3", HOME_CHAIN, ("other", ("safe", [OWNER0, OWNER1])), False),
    ("a wallet whose isValidSignature answers 0xffffffff", "wrongAnswer", HOME_CHAIN, ("hash", OWNER0), False),
    ("counterfactual wallet, a stranger's signature", "counterfactual", HOME_CHAIN, ("6492", STRANGER_KEY), False),
    ("1-of-1 Safe on the wrong chain", "safe1of1", OTHER_CHAIN, ("safe", [OWNER0]), False),
    ("counterfactual wallet on the wrong chain", "counterfactual", OTHER_CHAIN, ("6492", OWNER0), False),
]


@pytest.fixture
def app_config(chains):
    return {"IDENTITY_SIWE_DOMAIN": DOMAIN, "IDENTITY_RATELIMIT_SIGNIN": "100000/minute",
            SETTING: dict(chains.urls), "IDENTITY_ETH_RPC_TIMEOUT_SECONDS": 5.0}


def new_nonce(client):
    response = client.get("/auth/nonce")
    assert response.status_code == 200, response.text
    return response.get_json()["nonce"]


def sign_in(client, message, signature):
    return client.post("/auth/siwe", json={"message": message, "signature": signature})




def viem_verdicts(chains, checks):
    """viem's verifyMessage of each (chain id, address, message, signature), on that chain's node."""
    verdicts = {}
    for chain, node in ((HOME_CHAIN, chains.home), (OTHER_CHAIN, chains.other)):
        mine = [(i, check) for i, check in enumerate(checks) if check[0] == chain]
        answers = node.viem([{"op": "verifyMessage", "address": address, "message": message, "signature": signature}
                             for _, (_, address, message, signature) in mine]) if mine else []
        verdicts.update({i: answer["valid"] for (i, _), answer in zip(mine, answers, strict=True)})
    return [verdicts[i] for i in range(len(checks))]


def test_contract_wallets_sign_in_where_they_signed_and_viem_agrees_on_every_case(client, chains):
    messages = [siwe_message(DOMAIN, getattr(chains.wallets, name), new_nonce(client), chain_id=chain)
                for _, name, chain, _, _ in CASES]
    hashes = [answer["hash"] for answer in chains.home.viem(
        [{"op": "hashMessage", "message": message + (" (another)" if how[0] == "other" else "")}
         for message, (_, _, _, how, _) in zip(messages, CASES, strict=True)])]
    signatures = sign(chains, [(name, chain, how[1] if how[0] == "other" else how, hash_)
                               for hash_, (_, name, chain, how, _) in zip(hashes, CASES, strict=True)])
    viem = viem_verdicts(chains, [(chain, getattr(chains.wallets, name), message, signature) for
                                  message, signature, (_, name, chain, _, _) in zip(messages, signatures, CASES, strict=True)])
    for (case, name, chain, _, valid), message, signature, viem_valid in zip(CASES, messages, signatures, viem, strict=True):
        response = sign_in(client, message, signature)
        assert viem_valid is valid, case
        if valid:
            assert response.status_code == 201, (case, response.text)
            body = response.get_json()
            assert body["wallet"] == getattr(chains.wallets, name) and body["user"]["wallet"] == body["wallet"], case
            assert client.get("/me", headers={"x-api-key": body["key"]}).status_code == 200, case
        else:
            assert response.status_code == 401, (case, response.text)
            detail = response.get_json()["detail"]
            assert detail.startswith("Sign-in refused at check 6 (signature)"), (case, detail)
            assert f"chain {chain}" in detail, (case, detail)


def test_an_ordinary_wallets_signature_is_still_checked_locally_and_refused_by_the_65_byte_rule(client, chains):
    """An ordinary wallet signs in without a call (its endpoint is a closed port below); a short signature that
    is not a contract's is refused at check 6."""
    key = OWNER0
    message = siwe_message(DOMAIN, address_of(key), new_nonce(client), chain_id=HOME_CHAIN)
    signature = Account.sign_message(encode_defunct(text=message), key).signature.hex()
    signature = signature if signature.startswith("0x") else "0x" + signature
    assert sign_in(client, message, signature).status_code == 201
    message = siwe_message(DOMAIN, address_of(key), new_nonce(client), chain_id=HOME_CHAIN)
    response = sign_in(client, message, signature[:-2])
    assert response.status_code == 401
    assert "check 6" in response.get_json()["detail"]


# --- faults ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def faulty(chains):
    server = FaultyRpc(target=chains.home.url)
    yield server
    server.stop()




def safe_signature(chains, message):
    hash_ = chains.home.viem([{"op": "hashMessage", "message": message}])[0]["hash"]
    return sign(chains, [("safe1of1", HOME_CHAIN, ("safe", [OWNER0]), hash_)])[0]


def app_with_endpoint(make, database_url, url):
    return make(database_url, IDENTITY_SIWE_DOMAIN=DOMAIN, IDENTITY_RATELIMIT_SIGNIN="100000/minute",
                IDENTITY_ETH_RPC_URLS={HOME_CHAIN: url}, IDENTITY_ETH_RPC_TIMEOUT_SECONDS=0.5)


def test_no_endpoint_for_the_chain_is_a_401_at_check_6_naming_the_chain_and_the_setting(database_url, chains):
    from tests.common.apps import make_app
    app = make_app(database_url, IDENTITY_SIWE_DOMAIN=DOMAIN, IDENTITY_RATELIMIT_SIGNIN="100000/minute",
                   IDENTITY_ETH_RPC_URLS={OTHER_CHAIN: chains.other.url})
    client = app.test_client()
    message = siwe_message(DOMAIN, chains.wallets.safe1of1, new_nonce(client), chain_id=HOME_CHAIN)
    response = sign_in(client, message, safe_signature(chains, message))
    assert response.status_code == 401
    detail = response.get_json()["detail"]
    assert detail.startswith("Sign-in refused at check 6 (signature)")
    assert f"chain {HOME_CHAIN}" in detail and SETTING in detail


@pytest.mark.parametrize("fault", ["closed", "/slow", "/error", "/redirect", "/huge", "/notjson", "/rpcerror",
                                   "/noresult"])
def test_an_endpoint_that_fails_is_a_503_with_retry_after_naming_the_chain_never_a_sign_in(database_url, chains,
                                                                                          faulty, fault):
    from tests.common.apps import make_app
    url = closed_port_url() if fault == "closed" else faulty.url + fault
    client = app_with_endpoint(make_app, database_url, url).test_client()
    message = siwe_message(DOMAIN, chains.wallets.safe1of1, new_nonce(client), chain_id=HOME_CHAIN)
    signature = safe_signature(chains, message)
    response = sign_in(client, message, signature)
    assert response.status_code == 503, response.text
    assert response.mimetype == "application/problem+json"
    assert int(response.headers["Retry-After"]) >= 1
    assert f"chain {HOME_CHAIN}" in response.get_json()["detail"]
    # The same signature is valid where the chain answers (the redirect's target): the fault alone refused it.
    good = app_with_endpoint(make_app, database_url, chains.home.url).test_client()
    message = siwe_message(DOMAIN, chains.wallets.safe1of1, new_nonce(good), chain_id=HOME_CHAIN)
    assert sign_in(good, message, safe_signature(chains, message)).status_code == 201


def test_an_ordinary_wallet_signs_in_while_its_chains_endpoint_is_down(database_url):
    from tests.common.apps import make_app
    client = app_with_endpoint(make_app, database_url, closed_port_url()).test_client()
    message = siwe_message(DOMAIN, address_of(OWNER1), new_nonce(client), chain_id=HOME_CHAIN)
    signature = "0x" + Account.sign_message(encode_defunct(text=message), OWNER1).signature.hex().removeprefix("0x")
    assert sign_in(client, message, signature).status_code == 201


@pytest.mark.parametrize("revert", ["/revert", "/revert-32000"])
def test_a_call_that_reverts_is_the_wallets_no_a_401_not_a_fault(database_url, chains, faulty, revert):
    from tests.common.apps import make_app
    client = app_with_endpoint(make_app, database_url, faulty.url + revert).test_client()
    message = siwe_message(DOMAIN, chains.wallets.safe1of1, new_nonce(client), chain_id=HOME_CHAIN)
    response = sign_in(client, message, safe_signature(chains, message))
    assert response.status_code == 401, response.text
    assert response.get_json()["detail"].startswith("Sign-in refused at check 6 (signature)")
