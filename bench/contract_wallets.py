"""`make bench`, contract wallets: a Safe's sign-in against the round trip of the call it costs, and an ordinary
wallet's sign-in beside it.

1. anvil (tests/wallets' pinned npm package) on a free loopback port, with a 1-of-1 Safe deployed by viem
   (tests/wallets/chain.mjs, as the tests deploy it); a database migrated by the project, served by gunicorn as
   `make run` does (one gevent worker), with sign-in on and IDENTITY_ETH_RPC_URLS naming the node.
2. BENCH_CONTRACT_SIGNINS nonces are fetched and their messages signed by the Safe's owner (viem, one run of node);
   as many by an ordinary wallet (eth-account, here). Then the sign-ins are sent one after another, the Safe's and
   the ordinary wallet's in alternating blocks of 20.
3. The round trip of the Safe's check alone: as many eth_calls of its isValidSignature, the call the service makes,
   sent from this process to the node over one kept-alive connection.

Server time is what the service's access line says of each request (`duration_ms`), found by its X-Request-ID;
on a busy machine it counts the time the worker waited for a core too, which the worker's CPU per sign-in (/proc,
over the sign-ins of one kind alone) does not.
Goal (the contract): a contract wallet's sign-in costs its RPC round trip plus under 5 ms of the server's time
(medians: the sign-in's server time less the call's round trip). An ordinary wallet's sign-in makes no call: its
figure is bench/signin.py's, measured here beside the Safe's. Settings: BENCH_CONTRACT_SIGNINS (200; 40 with
BENCH_QUICK=1), BENCH_KEEP=1 keeps the temporary directory. Skipped, saying so, without node.
"""

import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import urllib3  # noqa: E402
from eth_abi import encode  # noqa: E402
from eth_account import Account  # noqa: E402
from eth_account.messages import encode_defunct  # noqa: E402

from bench.run import HOST, QUICK, _env_int, flask_cli, stop_process_group  # noqa: E402
from bench.signin import Worker, call, clean_up, in_turns, message_for, say, serve, server_times  # noqa: E402
from identity.core import contract_wallets  # noqa: E402

GOAL_MS = 5.0
CHAIN = 31337
SIGNINS = _env_int("BENCH_CONTRACT_SIGNINS", 40 if QUICK else 200)


def contract_message(address, offered, number):
    """The bench's sign-in message, on the node's chain."""
    return message_for(type("Wallet", (), {"address": address}), offered, number).replace("Chain ID: 1", f"Chain ID: {CHAIN}")


def safe_bodies(url, node, safe, owner_key):
    """SIGNINS sign-in bodies of the Safe, its owner's signatures made by viem in one run."""
    messages = [contract_message(safe, call(f"{url}/auth/nonce")[1], number) for number in range(SIGNINS)]
    hashes = ["0x" + contract_wallets.digest(encode_defunct(text=message)).hex() for message in messages]
    answers = node.viem([{"op": "signSafe", "safe": safe, "chainId": CHAIN, "hash": hash_, "privateKeys": [owner_key]}
                         for hash_ in hashes])
    return [{"message": message, "signature": answer["signature"]} for message, answer in zip(messages, answers, strict=True)]


def ordinary_bodies(url, wallet):
    bodies = []
    for number in range(SIGNINS):
        message = contract_message(wallet.address, call(f"{url}/auth/nonce")[1], SIGNINS + number)
        bodies.append({"message": message, "signature": wallet.sign_message(encode_defunct(text=message)).signature.to_0x_hex()})
    return bodies


def round_trips(node_url, safe, body):
    """SIGNINS round trips (ms) of the eth_call that checks the Safe's signature of `body`'s message."""
    hash_ = contract_wallets.digest(encode_defunct(text=body["message"]))
    data = contract_wallets.IS_VALID_SIGNATURE + encode(["bytes32", "bytes"], [hash_, bytes.fromhex(body["signature"][2:])])
    payload = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "eth_call",
                          "params": [{"to": safe, "data": "0x" + data.hex()}, "latest"]}).encode()
    pool = urllib3.HTTPConnectionPool(HOST, int(node_url.rsplit(":", 1)[1]), maxsize=1)
    times = []
    for _ in range(SIGNINS):
        started = time.perf_counter()
        answer = pool.request("POST", "/", body=payload, headers={"Content-Type": "application/json"})
        times.append((time.perf_counter() - started) * 1e3)
        assert answer.json()["result"].startswith("0x1626ba7e"), answer.data
    pool.close()
    return times


def main():
    if not shutil.which("node") or not shutil.which("npm"):
        print("contract wallets: skipped: node and npm are missing (install Debian's nodejs and npm)")
        return
    from tests import wallets
    from tests.common.chain import OWNER_KEYS, Anvil

    wallets.install()
    workdir = Path(tempfile.mkdtemp(prefix="identity-bench-contract-wallets-"))
    database, log_path = workdir / "identity.db", workdir / "gunicorn.log"
    node = process = None
    try:
        node = Anvil(CHAIN)
        safe = node.viem([{"op": "deploy", "owners": [wallets.address_of(key) for key in OWNER_KEYS]}])[0]["safe1of1"]
        flask_cli(database, "db", "upgrade")
        process, url = serve(database, log_path, IDENTITY_ETH_RPC_URLS=f"{CHAIN}={node.url}")
        say(f"{SIGNINS} sign-ins of a 1-of-1 Safe and {SIGNINS} of an ordinary wallet, one at a time, on anvil")
        bodies = {"safe": safe_bodies(url, node, safe, OWNER_KEYS[0]), "ordinary": ordinary_bodies(url, Account.create())}
        worker = Worker(process)

        def send(request_id, body):
            status, answer = call(f"{url}/auth/siwe", body, {"X-Request-ID": request_id})
            assert status == 201, answer

        ids = in_turns(worker, bodies, SIGNINS, send)
        trips = round_trips(node.url, safe, bodies["safe"][0])
        stop_process_group(process)  # every access line is written
        times = server_times(log_path)
        safe_ms = statistics.median(times[request_id] for request_id in ids["safe"])
        ordinary_ms = statistics.median(times[request_id] for request_id in ids["ordinary"])
        trip_ms = statistics.median(trips)
        own = safe_ms - trip_ms
        print(f"contract wallet sign-in (1-of-1 Safe, EIP-1271), server time: median {safe_ms:.2f} ms; its eth_call's "
              f"round trip to anvil: median {trip_ms:.2f} ms; the server's own time: {own:.2f} ms "
              f"(goal: under {GOAL_MS:g} ms) {'met' if own < GOAL_MS else 'MISSED'}")
        cpu = {kind: worker.cpu.get(kind, float("nan")) / SIGNINS * 1e3 for kind in ("safe", "ordinary")}
        print(f"ordinary wallet sign-in beside it (no call), server time: median {ordinary_ms:.2f} ms; the Safe's costs "
              f"{safe_ms - ordinary_ms:.2f} ms more, its round trip included; worker CPU a sign-in: Safe "
              f"{cpu['safe']:.2f} ms, ordinary wallet {cpu['ordinary']:.2f} ms")
    finally:
        stop_process_group(process)
        if node is not None:
            node.stop()
        clean_up(process, workdir)


if __name__ == "__main__":
    main()
