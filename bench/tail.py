"""`make bench`, part two: the default server's tail, beside the floor, under 8 concurrent clients.

The default server is what `make run` starts: `gunicorn -c gunicorn.conf.py app:app` with nothing
forced (gunicorn.conf.py picks the worker class and count), rate limits raised so that the load
cannot spend them. Plain Flask doing the floor's work (bench.plain:app) is served the same way, so
that the server's share of the tail shows apart from the app's; the floor (bench.floor:app) is served
as bench/run.py serves it. Halfway through each run, it counts the clients each worker of the default
server holds (a keep-alive connection stays with the worker that accepted it). wrk (one thread,
BENCH_CONNECTIONS connections, 8 by default, loopback only) runs GET and POST rounds on each,
alternating which goes first; the p99 of each is the median over the rounds. The goals: the default
server's GET p99 at most 10 ms, its POST p99 within 3x the floor's.

Settings: BENCH_SECONDS (5), BENCH_ROUNDS (3), BENCH_WARMUP (3), BENCH_CONNECTIONS (8),
BENCH_TAIL_IDENTITIES (2000).
"""

import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.run import (  # noqa: E402 - the same seeding, servers and wrk runs as `make bench`
    BIN,
    CONNECTIONS,
    HOST,
    PRODUCTION_LIMITS,
    ROOT,
    ROUNDS,
    SECONDS,
    WALLET,
    WARMUP,
    Server,
    checkpoint,
    clients_per_worker,
    combined,
    cpu_ms_per_request,
    flask_cli,
    free_port,
    load_with_usage,
    say,
    seed_through_the_project,
    stop_process_group,
    wait_until_ready,
    warm,
    worker_pids,
    write_ids,
)

IDENTITIES = int(os.environ.get("BENCH_TAIL_IDENTITIES") or 2000)
GOAL = 3.0  # POST: the default server's p99 within this many times the floor's
GET_GOAL_MS = 10.0  # GET: the default server's p99 at most this


class DefaultServer:
    """gunicorn as `make run` starts it: the project's gunicorn.conf.py deciding everything, serving
    `app_spec` (the project, or plain Flask doing the floor's work, to tell the server's share of the
    tail from the app's)."""

    def __init__(self, name, app_spec, database, log_dir):
        self.name, self.app_spec = name, app_spec
        self.database, self.log_path = database, log_dir / f"{name}-server.log"
        self.process, self.port = None, None

    @property
    def url(self):
        return f"http://{HOST}:{self.port}"

    def start(self, timeout=60):
        self.port = free_port()
        env = {name: value for name, value in os.environ.items()
               if not name.startswith(("GUNICORN_", "WEB_CONCURRENCY"))}
        env.update({"DATABASE_URL": f"sqlite:///{self.database}", "HOST": HOST, "PORT": str(self.port),
                    **PRODUCTION_LIMITS})
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen([str(BIN / "gunicorn"), "-c", "gunicorn.conf.py", self.app_spec], cwd=ROOT,
                                            env=env, stdout=log, stderr=log, start_new_session=True)
        wait_until_ready(self.process, self.url, self.log_path, f"the default server for {self.name}", timeout)
        return self

    def workers(self):
        return worker_pids(self.process)

    def worker_class(self):
        for line in self.log_path.read_text().splitlines():
            if "Using worker:" in line:
                return line.split("Using worker:")[1].split('"')[0].strip()
        return "?"

    def stop(self):
        stop_process_group(self.process)


def load_and_split(server, operation, key, ids_file, seconds, tag):
    """A wrk run, and how its clients were split among the server's workers halfway through it."""
    split = []
    timer = threading.Timer(seconds / 2, lambda: split.extend(clients_per_worker(server.port, server.workers())))
    timer.start()
    try:
        return load_with_usage(server, operation, key, ids_file, seconds, tag), split
    finally:
        timer.cancel()


def main():
    if shutil.which("wrk") is None:
        sys.exit("wrk is missing: install it with apt-get install wrk")
    work = Path(tempfile.mkdtemp(prefix="identity-tail-"))
    servers = []
    try:
        database = work / "default.db"
        flask_cli(database, "db", "upgrade")
        key = flask_cli(database, "keys", "create", "--wallet", WALLET, "--role", "User").strip().splitlines()[-1]
        ids = seed_through_the_project(database, key, IDENTITIES)
        checkpoint(database)
        floor_database, plain_database = work / "floor.db", work / "plain.db"
        shutil.copy(database, floor_database)
        shutil.copy(database, plain_database)
        ids_file = write_ids(work / "ids.txt", ids)
        targets = {"default": DefaultServer("default", "app:app", database, work),
                   "plain": DefaultServer("plain", "bench.plain:app", plain_database, work),
                   "floor": Server("floor", "bench.floor:app", floor_database, work)}
        servers += targets.values()
        for server in targets.values():
            server.start()
        say(f"tail: default server ({targets['default'].worker_class()} worker, as `make run`) vs floor, "
            f"wrk -t1 -c{CONNECTIONS}, {ROUNDS} rounds x {SECONDS} s, {IDENTITIES:,} identities")
        for name, server in targets.items():
            for operation in ("get", "post"):
                warm(server, operation, key, ids_file, WARMUP, f"warm-{name}")
        results = {(name, operation): [] for name in targets for operation in ("get", "post")}
        splits = {(name, operation): [] for name in ("default", "plain") for operation in ("get", "post")}
        for round_number in range(ROUNDS):
            order = list(targets) if round_number % 2 == 0 else list(reversed(targets))
            for operation in ("get", "post"):
                for name in order:
                    run, split = load_and_split(targets[name], operation, key, ids_file, SECONDS, f"tail-{round_number}")
                    results[name, operation].append(run)
                    if (name, operation) in splits:
                        splits[name, operation].append(split)
        errors = sum(run.errors for runs in results.values() for run in runs)
        print()
        print(f"Default server's tail (as `make run` serves: {targets['default'].worker_class()} worker) vs floor, "
              f"{CONNECTIONS} concurrent clients; goals: GET p99 <= {GET_GOAL_MS:g} ms, "
              f"POST p99 within {GOAL:g}x the floor's")
        print(f"{'op':<5} {'default p50/p99 ms':>18} {'floor p50/p99 ms':>16} {'p99 ratio':>9}   "
              f"{'default req/s':>13} {'floor req/s':>11}   goal")
        for operation, label in (("get", "GET"), ("post", "POST")):
            default, floor = combined(results["default", operation]), combined(results["floor", operation])
            ratio = default.p99_ms / floor.p99_ms if floor.p99_ms else float("inf")
            met = default.p99_ms <= GET_GOAL_MS if operation == "get" else ratio <= GOAL
            goal = f"p99 <= {GET_GOAL_MS:g} ms" if operation == "get" else f"p99 <= {GOAL:g}x floor's"
            print(f"{label:<5} {default.p50_ms:>7.2f} / {default.p99_ms:>7.2f} {floor.p50_ms:>6.2f} / {floor.p99_ms:>7.2f}"
                  f" {ratio:>8.2f}x   {default.rate:>13.1f} {floor.rate:>11.1f}   {goal}: {'met' if met else 'NOT met'}")
            print(f"      p99 per round: default {', '.join(f'{run.p99_ms:.2f}' for run in results['default', operation])}"
                  f";  floor {', '.join(f'{run.p99_ms:.2f}' for run in results['floor', operation])}")
            # The p99 follows the rate, and the rate the machine's minute: each round's rate beside its p99.
            print(f"      req/s per round: default {_rates(results['default', operation])};  "
                  f"floor {_rates(results['floor', operation])}")
            print(f"      default's clients per worker, per round: {', '.join(map(_split, splits['default', operation]))}")
            # The p99 is some requests' worth of the workers' CPU: how much CPU each request cost them.
            print(f"      workers' CPU per request (user + system): default {_cpu(results['default', operation])}, "
                  f"plain Flask on the default server {_cpu(results['plain', operation])}, "
                  f"floor {_cpu(results['floor', operation])}")
            plain_runs = results["plain", operation]
            plain = combined(plain_runs)
            print(f"      plain Flask on the default server: p50/p99 {plain.p50_ms:.2f} / {plain.p99_ms:.2f}"
                  f" ms, {plain.rate:.1f} req/s; p99 per round {', '.join(f'{run.p99_ms:.2f}' for run in plain_runs)}"
                  f"; req/s per round {_rates(plain_runs)}"
                  f"; clients per worker {', '.join(map(_split, splits['plain', operation]))}")
        print("      (A keep-alive client stays with the worker that accepted it: see docs/performance.md.)")
        if errors:
            print(f"unexpected responses or socket errors: {errors}")
            return 1
        return 0
    finally:
        for server in servers:
            server.stop()
        shutil.rmtree(work, ignore_errors=True)


def _rates(runs):
    return ", ".join(f"{run.rate:.0f}" for run in runs)


def _cpu(runs):
    cpu = cpu_ms_per_request(combined(runs))
    return "n/a" if cpu is None else f"{cpu:.3f} ms"


def _split(counts):
    return "+".join(map(str, counts)) or "?"


if __name__ == "__main__":
    sys.exit(main())
