"""The contract wallets' cases and steps: signatures made with viem, the create bodies a case signs, a URL on which
nothing listens."""

import socket

from tests.common.chain import HOME_CHAIN, OTHER_CHAIN, OWNER_KEYS, STRANGER_KEY


def sign(chains, requests):
    """Signatures for each (wallet name, chain id, how, hash), made with viem."""
    w = chains.wallets
    made = []
    for name, chain, how, hash_ in requests:
        kind, spec = how
        if kind == "safe":
            made.append({"op": "signSafe", "safe": getattr(w, name), "chainId": chain, "hash": hash_, "privateKeys": spec})
        else:
            made.append({"op": "signHash", "privateKey": spec, "hash": hash_})
    signatures = [answer["signature"] for answer in chains.home.viem(made)]
    wrap = [{"op": "wrap6492", "factory": w.factory, "factoryData": w.factoryData, "signature": signature}
            for signature, (_, _, how, _) in zip(signatures, requests, strict=True) if how[0] == "6492"]
    wrapped = iter(answer["signature"] for answer in chains.home.viem(wrap)) if wrap else iter(())
    return [next(wrapped) if how[0] == "6492" else signature
            for signature, (_, _, how, _) in zip(signatures, requests, strict=True)]


def closed_port_url():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


OWNER0, OWNER1, OWNER2 = OWNER_KEYS


LIMITS = {"IDENTITY_RATELIMIT_CREATE": "100000/minute", "IDENTITY_RATELIMIT_READ": "100000/minute"}


# (case, wallet, the chain signature_chain_id names, how it is signed (as in test_signin), whether it is valid).
CASES = [
    ("1-of-1 Safe, its owner", "safe1of1", HOME_CHAIN, ("safe", [OWNER0]), True),
    ("2-of-3 Safe, two owners", "safe2of3", HOME_CHAIN, ("safe", [OWNER1, OWNER2]), True),
    ("EIP-1271 wallet, its owner", "wallet", HOME_CHAIN, ("hash", OWNER0), True),
    ("counterfactual wallet, its owner (EIP-6492)", "counterfactual", HOME_CHAIN, ("6492", OWNER0), True),
    ("1-of-1 Safe, another owner's signature", "safe1of1", HOME_CHAIN, ("safe", [STRANGER_KEY]), False),
    ("2-of-3 Safe below its threshold", "safe2of3", HOME_CHAIN, ("safe", [OWNER2]), False),
    ("EIP-1271 wallet, a wrong hash", "wallet", HOME_CHAIN, ("other", ("hash", OWNER0)), False),
    ("a wallet whose isValidSignature answers 0xffffffff", "wrongAnswer", HOME_CHAIN, ("hash", OWNER0), False),
    ("counterfactual wallet, a stranger's signature", "counterfactual", HOME_CHAIN, ("6492", STRANGER_KEY), False),
    ("2-of-3 Safe on the wrong chain", "safe2of3", OTHER_CHAIN, ("safe", [OWNER0, OWNER1]), False),
]


def preview(client, key, body):
    response = client.post("/identity/preview", json=body, headers={"x-api-key": key})
    assert response.status_code == 200, response.text
    return response.get_json()


def signed_bodies(client, admin_key, chains, cases, label="Case"):
    """For each case: the create's body for its wallet, its preview's typed data, and the case's signature of it."""
    bodies = [{"display_name": f"{label} {number}: {case}", "creator": getattr(chains.wallets, name)}
              for number, (case, name, _, _, _) in enumerate(cases)]
    typed = [preview(client, admin_key, body)["typed_data"] for body in bodies]
    other = preview(client, admin_key, {"display_name": "Other content", "creator": chains.wallets.wallet})["typed_data"]
    hashes = [answer["hash"] for answer in chains.home.viem(
        [{"op": "hashTypedData", "typedData": other if how[0] == "other" else data}
         for data, (_, _, _, how, _) in zip(typed, cases, strict=True)])]
    signatures = sign(chains, [(name, chain, how[1] if how[0] == "other" else how, hash_)
                               for hash_, (_, name, chain, how, _) in zip(hashes, cases, strict=True)])
    return bodies, typed, signatures
