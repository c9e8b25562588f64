"""`make bench`, wallet proofs: a sign-in's server time, and a signed create's against an unsigned one.

1. A database migrated by the project; gunicorn serves it as `make run` does (gunicorn.conf.py, one gevent
   worker), with sign-in on and budgets the run cannot spend.
2. BENCH_SIGNINS nonces are fetched and their messages signed by eth-account in this process; then the
   BENCH_SIGNINS sign-ins (POST /auth/siwe) are sent one after another.
3. BENCH_CREATES creates of new content by the signed-in wallet without a signature and as many with the
   wallet's EIP-712 signature of their content id (made here beforehand), in alternating blocks of 20.

Server time is what the service's own access line says of each request (`duration_ms`: from the request
read to its answer, signature recovery and database writes included), found by its X-Request-ID. On a
busy machine it counts the time the worker waited for a core too; the worker's CPU per request
(/proc, over the requests of one kind alone) is its own doing. Goals (the contract): a sign-in under
5 ms of server time (median); a signed create at most 1.5 times an unsigned one (medians). Settings:
BENCH_SIGNINS (300), BENCH_CREATES (300); BENCH_QUICK=1 makes them 60; BENCH_KEEP=1 keeps the
temporary directory.
"""

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from eth_account import Account  # noqa: E402
from eth_account.messages import encode_defunct, encode_typed_data  # noqa: E402

from bench.run import (  # noqa: E402 - the same process handling as `make bench`
    BIN,
    HOST,
    QUICK,
    ROOT,
    _env_int,
    flask_cli,
    free_port,
    stop_process_group,
    usage_now,
    wait_until_ready,
    worker_pids,
)
from identity.core import authorship, content  # noqa: E402

SIGNIN_GOAL_MS = 5.0
BLOCK = 20
SIGNED_CREATE_GOAL = 1.5
SIGNINS = _env_int("BENCH_SIGNINS", 60 if QUICK else 300)
CREATES = _env_int("BENCH_CREATES", 60 if QUICK else 300)
KEEP = os.environ.get("BENCH_KEEP") == "1"
DOMAIN = "bench.identity.test"
UNSPENDABLE = {name: "100000000/minute" for name in (
    "IDENTITY_RATELIMIT_READ", "IDENTITY_RATELIMIT_CREATE", "IDENTITY_RATELIMIT_SIGNIN")}


def say(message):
    print(f"· {message}", flush=True)


def call(url, body=None, headers=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json", **(headers or {})})
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.status, json.loads(response.read())


def message_for(wallet, offered, number):
    return "\n".join([
        f"{offered['domain']} wants you to sign in with your Ethereum account:", wallet.address, "",
        "Sign in to the Identity service.", "", f"URI: {offered['uri']}", "Version: 1", "Chain ID: 1",
        f"Nonce: {offered['nonce']}", "Issued At: 2026-01-01T00:00:00.000Z", f"Request ID: bench-{number}",
    ])


class Worker:
    """The CPU seconds the server's workers spent on the requests sent within `measure()` blocks, by kind."""

    def __init__(self, process):
        self.pids = worker_pids(process)
        self.cpu = {}

    def measure(self, kind, send):
        before = usage_now(self.pids)
        send()
        after = usage_now(self.pids)
        if before is not None and after is not None:
            self.cpu[kind] = self.cpu.get(kind, 0.0) + (after - before).cpu_seconds


def sign_ins(url, wallet, worker):
    """SIGNINS sign-ins of `wallet`, with nonces fetched and messages signed first; returns the last key and
    the request ids."""
    bodies = []
    for number in range(SIGNINS):
        _, offered = call(f"{url}/auth/nonce")
        message = message_for(wallet, offered, number)
        bodies.append({"message": message, "signature": wallet.sign_message(encode_defunct(text=message)).signature.to_0x_hex()})
    ids, answers = [f"bench-signin-{number}" for number in range(SIGNINS)], []

    def send():
        for request_id, body in zip(ids, bodies, strict=True):
            answers.append(call(f"{url}/auth/siwe", body, {"X-Request-ID": request_id}))

    worker.measure("signin", send)
    assert all(status == 201 for status, _ in answers), answers[-1]
    return answers[-1][1]["key"], ids


def creates(url, wallet, key, worker):
    """CREATES creates of `wallet`'s key unsigned and as many signed, in alternating blocks; returns their ids."""
    bodies = {"unsigned": [], "signed": []}
    for number in range(CREATES):
        bodies["unsigned"].append({"display_name": f"Unsigned {number}", "description": "Created by bench/signin.py."})
        signed = {"display_name": f"Signed {number}", "description": "Created by bench/signin.py."}
        typed_data = authorship.typed_data(content.address(signed).content_id)
        signed["signature"] = wallet.sign_message(encode_typed_data(full_message=typed_data)).signature.to_0x_hex()
        bodies["signed"].append(signed)

    def send(request_id, body):
        status, answer = call(f"{url}/identity", body, {"x-api-key": key, "X-Request-ID": request_id})
        assert status == 201, answer

    return in_turns(worker, bodies, CREATES, send)


def in_turns(worker, bodies, count, send):
    """Send the first `count` bodies of each kind of `bodies` ({kind: [body, ...]}) by send(request_id, body), the
    kinds taking turns in blocks of BLOCK, each block measured by `worker` as its kind's; the request ids by kind."""
    ids = {kind: [] for kind in bodies}
    for start in range(0, count, BLOCK):
        for kind in bodies:
            block = [(f"bench-{kind}-{number}", body) for number, body in enumerate(bodies[kind][start:start + BLOCK], start)]

            def send_block(block=block):
                for request_id, body in block:
                    send(request_id, body)

            worker.measure(kind, send_block)
            ids[kind] += [request_id for request_id, _ in block]
    return ids


def server_times(log_path):
    """{request id: duration_ms} from the service's access lines."""
    times = {}
    for line in log_path.read_text().splitlines():
        if line.startswith("{") and '"identity.access"' in line:
            entry = json.loads(line)
            times[entry["request_id"]] = entry["duration_ms"]
    return times


def figures(times, ids):
    values = sorted(times[request_id] for request_id in ids)
    return statistics.median(values), values[int(len(values) * 0.9) - 1]


def serve(database, log_path, **settings):
    """gunicorn serving `database` as `make run` does (gunicorn.conf.py, one gevent worker), with sign-in on for
    DOMAIN, budgets the run cannot spend and `settings`, its log in `log_path`: (its process, its URL) once it
    answers."""
    port = free_port()
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{database}", "HOST": HOST, "PORT": str(port),
           "WEB_CONCURRENCY": "1", "IDENTITY_SIWE_DOMAIN": DOMAIN, "IDENTITY_LOG_LEVEL": "INFO", **settings,
           **UNSPENDABLE}
    with open(log_path, "ab") as log:
        process = subprocess.Popen([str(BIN / "gunicorn"), "-c", "gunicorn.conf.py", "app:app"], cwd=ROOT, env=env,
                                   stdout=log, stderr=log, start_new_session=True)
    url = f"http://{HOST}:{port}"
    try:
        wait_until_ready(process, url, log_path, "gunicorn", 60)
    except BaseException:
        stop_process_group(process)  # the caller never holds a process that did not start
        raise
    return process, url


def clean_up(process, workdir):
    """Stop gunicorn (if it runs) and remove the temporary directory, unless BENCH_KEEP=1 keeps it."""
    stop_process_group(process)
    if KEEP:
        say(f"kept {workdir}")
    else:
        shutil.rmtree(workdir, ignore_errors=True)


def main():
    workdir = Path(tempfile.mkdtemp(prefix="identity-bench-signin-"))
    database = workdir / "identity.db"
    log_path = workdir / "gunicorn.log"
    process = None
    try:
        flask_cli(database, "db", "upgrade")
        process, url = serve(database, log_path)
        wallet, worker = Account.create(), Worker(process)
        say(f"{SIGNINS} sign-ins, then {CREATES} unsigned and {CREATES} signed creates, one at a time")
        key, signin_ids = sign_ins(url, wallet, worker)
        create_ids = creates(url, wallet, key, worker)
        stop_process_group(process)  # every access line is written
        cpu_ms = {kind: seconds / (SIGNINS if kind == "signin" else CREATES) * 1e3 for kind, seconds in worker.cpu.items()}
        times = server_times(log_path)
        signin_median, signin_p90 = figures(times, signin_ids)
        unsigned_median, unsigned_p90 = figures(times, create_ids["unsigned"])
        signed_median, signed_p90 = figures(times, create_ids["signed"])
        ratio = signed_median / unsigned_median
        print(f"sign-in (POST /auth/siwe), server time: median {signin_median:.2f} ms, p90 {signin_p90:.2f} ms; worker "
              f"CPU {cpu_ms.get('signin', float('nan')):.2f} ms a sign-in (goal: median under {SIGNIN_GOAL_MS:g} ms) "
              f"{'met' if signin_median < SIGNIN_GOAL_MS else 'MISSED'}")
        print(f"create, server time: unsigned median {unsigned_median:.2f} ms (p90 {unsigned_p90:.2f}), signed median "
              f"{signed_median:.2f} ms (p90 {signed_p90:.2f}): {ratio:.2f} times (goal: at most {SIGNED_CREATE_GOAL:g}) "
              f"{'met' if ratio <= SIGNED_CREATE_GOAL else 'MISSED'}; worker CPU a create: unsigned "
              f"{cpu_ms.get('unsigned', float('nan')):.2f} ms, signed {cpu_ms.get('signed', float('nan')):.2f} ms")
    finally:
        clean_up(process, workdir)


if __name__ == "__main__":
    main()
