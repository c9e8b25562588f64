"""`make bench`: the project against the floor of the stack, side by side from one run on this machine.

1. A database migrated by the project (`flask db upgrade`), a User key issued by its CLI, and
   BENCH_IDENTITIES identities created through its own service code; each floor gets a copy.
2. gunicorn serves the project (app:app), plain Flask doing the floor's work (bench.plain:app) and
   the bare floor (bench.floor:app) with the same settings: gunicorn.conf.py when the repository has
   one, and 2 sync workers forced on the command line.
3. wrk (one thread, BENCH_CONNECTIONS connections, loopback only) warms both up, then runs
   BENCH_ROUNDS rounds of GET of random seeded ids and POST of unique bodies, alternating the order
   of the targets so that drift of the machine hits all alike.
4. Memory: resident memory of each worker after each round (each round is a run of GET + POST load).
5. Scale: the project's GET at BENCH_IDENTITIES and at BENCH_SCALE_IDENTITIES (bulk-inserted with
   the project's content addressing), in BENCH_SCALE_ROUNDS alternating rounds, and the database
   bytes per identity of each.

It prints figures; the exit status is non-zero only when a response was not the expected one.

Settings (environment): BENCH_SECONDS (5) per measured run, BENCH_ROUNDS (3), BENCH_WARMUP (3)
seconds, BENCH_CONNECTIONS (8), BENCH_IDENTITIES (10000), BENCH_SCALE_IDENTITIES (1000000),
BENCH_SCALE_ROUNDS (2), BENCH_SKIP_1M=1 skips the scale part, BENCH_KEEP=1 keeps the temporary directory.
BENCH_QUICK=1: 2 rounds of 2 s, 2,000 identities, no scale part (each setting given still wins).
"""

import json
import multiprocessing
import os
import platform
import random
import secrets
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from dataclasses import astuple, dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # bench.floor
BIN = Path(sys.executable).parent
LOAD_SCRIPT = ROOT / "bench" / "load.lua"
HOST = "127.0.0.1"  # the benchmark never sends a request anywhere else
WALLET = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"
GUNICORN_FLAGS = ["--workers", "2", "--worker-class", "sync", "--threads", "1"]
# Rate limits stay on, as in production, with budgets the load cannot spend: the benchmark measures
# what checking a limit costs, not the 429s of a spent one.
PRODUCTION_LIMITS = {"IDENTITY_RATELIMIT_READ": "100000000/minute", "IDENTITY_RATELIMIT_CREATE": "100000000/minute"}
SCALE_SAMPLE = 100_000  # ids the 1M GET picks from, spread over the whole table
BULK_CHUNK = 50_000


def _env_int(name, default):
    return int(os.environ.get(name) or default)


# BENCH_QUICK=1: a minute or two, for a first look; each setting given explicitly still wins.
QUICK = os.environ.get("BENCH_QUICK") == "1"
SECONDS = _env_int("BENCH_SECONDS", 2 if QUICK else 5)
ROUNDS = _env_int("BENCH_ROUNDS", 2 if QUICK else 3)
WARMUP = _env_int("BENCH_WARMUP", 1 if QUICK else 3)
CONNECTIONS = _env_int("BENCH_CONNECTIONS", 8)
IDENTITIES = _env_int("BENCH_IDENTITIES", 2_000 if QUICK else 10_000)
SCALE_IDENTITIES = _env_int("BENCH_SCALE_IDENTITIES", 1_000_000)
SCALE_ROUNDS = _env_int("BENCH_SCALE_ROUNDS", 2)
SKIP_SCALE = QUICK or os.environ.get("BENCH_SKIP_1M") == "1"
KEEP = os.environ.get("BENCH_KEEP") == "1"


def say(message):
    print(f"· {message}", flush=True)


def identity_body(number):
    """The body of a seeded identity: every content field, like the POST bodies of bench/load.lua."""
    return {
        "display_name": f"Identity {number}",
        "description": f"Identity {number}, made by the benchmark.",
        "image": f"https://example.org/avatars/{number}.png",
        "external_reference": f"https://example.org/people/{number}",
    }


# -- databases ---------------------------------------------------------------------------------


def flask_cli(database, *args):
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{database}"}
    result = subprocess.run([str(BIN / "flask"), "--app", "app", *args], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        raise RuntimeError(f"flask {' '.join(args)} failed:\n{result.stderr[-2000:]}")
    return result.stdout


def seed_through_the_project(database, key, count):
    """Create `count` identities with the project's own key check, schema and service; returns their ids.

    One process: two writers would queue on SQLite's busy handler, which sleeps in whole milliseconds.
    """
    from identity import create_app
    from identity.core import identities as service
    from identity.core.keys import caller_of
    from identity.schemas import IdentityCreateSchema
    from identity.storage.database import db

    app = create_app({"DATABASE_URL": f"sqlite:///{database}"})
    schema = IdentityCreateSchema()
    with app.app_context():
        caller = caller_of(key)
        ids = [service.create_identity(schema.load(identity_body(n)), caller)["identity_id"] for n in range(count)]
        db.session.remove()
        db.engine.dispose()
    return ids


def checkpoint(database):
    with sqlite3.connect(database) as connection:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    connection.close()


def bytes_per_identity(database):
    checkpoint(database)
    with sqlite3.connect(database) as connection:
        (count,) = connection.execute("SELECT count(*) FROM identities").fetchone()
    connection.close()
    wal = Path(f"{database}-wal")
    size = database.stat().st_size + (wal.stat().st_size if wal.exists() else 0)
    return size / count, count, size


def _bulk_rows(span, creator_id, now):
    """Rows for identities number span[0] .. span[1]-1, addressed by the project's pure content module."""
    from identity.core import content

    rows = []
    for number in range(*span):
        address = content.address(identity_body(number))
        given = address.content
        rows.append((
            str(uuid.uuid4()), address.identity_id, address.content_id, address.identity_hash, "0",
            given["display_name"], given["description"], given["image"], given["external_reference"],
            None, None, creator_id, now, now, 0, "0", "0", "0", "complete", 0, "0", "0",
        ))
    return rows


def bulk_insert(database, start, stop):
    """Grow the table to `stop` identities in big transactions; returns a sample of all ids."""
    from bench.floor import INSERT_IDENTITY

    connection = sqlite3.connect(database, isolation_level=None)
    connection.execute("PRAGMA journal_mode = WAL")
    connection.execute("PRAGMA synchronous = OFF")  # a lost bulk load is simply made again
    connection.execute("PRAGMA cache_size = -1000000")
    (creator_id,) = connection.execute("SELECT id FROM users WHERE wallet = ?", (WALLET,)).fetchone()
    ids = [row[0] for row in connection.execute("SELECT identity_id FROM identities")]
    # The project's SQLite DATETIME text, as in the rows it wrote itself.
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    spans = [(low, min(low + BULK_CHUNK, stop)) for low in range(start, stop, BULK_CHUNK)]
    with multiprocessing.Pool(2) as pool:
        for rows in pool.imap(partial(_bulk_rows, creator_id=creator_id, now=now), spans):
            connection.execute("BEGIN")
            connection.executemany(INSERT_IDENTITY, rows)
            connection.execute("COMMIT")
            ids.extend(row[1] for row in rows)
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    connection.close()
    return random.sample(ids, min(SCALE_SAMPLE, len(ids)))


def write_ids(path, ids):
    path.write_text("\n".join(ids) + "\n")
    return path


# -- servers -----------------------------------------------------------------------------------


def free_port():
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def wait_until_ready(process, url, log_path, name, timeout, ready=lambda: True):
    """Poll `url`/readyz until it answers 200 and `ready()` holds; fail with the log's end if `process` exits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{name} exited:\n{log_path.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(url + "/readyz", timeout=5) as response:
                if response.status == 200 and ready():
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{name} did not become ready")


def stop_process_group(process, timeout=30):
    """SIGTERM gunicorn's master and workers (a process group of their own); SIGKILL what outlives `timeout`."""
    if process is None or process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


def gunicorn_config():
    """The project's production gunicorn settings, when the repository has them."""
    return ["-c", "gunicorn.conf.py"] if (ROOT / "gunicorn.conf.py").exists() else []


class Server:
    """gunicorn serving `app_spec` on a free loopback port, with the project's settings and 2 sync workers."""

    def __init__(self, name, app_spec, database, log_dir):
        self.name, self.app_spec, self.database = name, app_spec, database
        self.log_path = log_dir / f"{name}-{database.stem}.log"
        self.process = None
        self.port = None

    @property
    def url(self):
        return f"http://{HOST}:{self.port}"

    def start(self, timeout=60):
        self.port = free_port()
        env = {**os.environ, "DATABASE_URL": f"sqlite:///{self.database}", "WEB_CONCURRENCY": "2", **PRODUCTION_LIMITS}
        command = [str(BIN / "gunicorn"), *gunicorn_config(), "--bind", f"{HOST}:{self.port}", *GUNICORN_FLAGS,
                   self.app_spec]
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=log,
                                            start_new_session=True)
        wait_until_ready(self.process, self.url, self.log_path, f"gunicorn for {self.name}", timeout,
                         lambda: len(self.workers()) == 2)
        return self

    def workers(self):
        return worker_pids(self.process)

    def rss_kib(self):
        """{worker pid: VmRSS in KiB}."""
        sizes = {}
        for pid in self.workers():
            try:
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        sizes[pid] = int(line.split()[1])
            except OSError:
                pass
        return sizes

    def stop(self):
        stop_process_group(self.process)


def worker_pids(process):
    """The pids of a gunicorn master's workers (its child processes)."""
    pid = process.pid
    try:
        return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def clients_per_worker(port, pids):
    """How many established TCP connections on local `port` each process of `pids` holds, fewest first.

    A keep-alive client stays with the worker that accepted its connection: the split is what each
    worker process serves. (From /proc: the connections on the port, and whose descriptors they are.)
    """
    sockets = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if fields[3] == "01" and int(fields[1].rsplit(":", 1)[1], 16) == port:  # ESTABLISHED
                sockets.add(f"socket:[{fields[9]}]")
    counts = []
    for pid in pids:
        held = 0
        try:
            descriptors = list(Path(f"/proc/{pid}/fd").iterdir())
        except OSError:
            continue
        for descriptor in descriptors:
            try:
                held += os.readlink(descriptor) in sockets
            except OSError:
                pass  # closed meanwhile
        counts.append(held)
    return sorted(counts)


# -- load --------------------------------------------------------------------------------------


@dataclass
class Run:
    requests: int
    seconds: float
    p50_ms: float
    p99_ms: float
    errors: int
    # Where the time went (see Usage): the server's workers' CPU and what their write calls wrote, and
    # the machine's idle and I/O-wait time, during the run; None where /proc could not tell.
    usage: "Usage | None" = None

    @property
    def rate(self):
        return self.requests / self.seconds


@dataclass
class Usage:
    """What a server's workers and the machine did over a span of time, from /proc (Linux).

    A throughput ratio alone does not say whether the project lost to the CPU its requests cost or to
    the machine (its disk, another process's load): the same code's CPU per request moved by half
    from one round to the next on a shared machine. Beside each ratio, `make bench` prints the CPU per
    request, which is the project's own doing, and the share of the machine left idle or waiting
    for the disk, which is not.
    """

    cpu_seconds: float  # the workers' user + system time
    written_bytes: int  # what the workers' write calls wrote: the database, its WAL, the log (wchar, /proc/<pid>/io)
    machine_seconds: float  # all cores' time
    idle_seconds: float
    iowait_seconds: float

    def __sub__(self, earlier):
        return Usage(*(mine - theirs for mine, theirs in zip(astuple(self), astuple(earlier), strict=True)))

    def __add__(self, other):
        return Usage(*(mine + theirs for mine, theirs in zip(astuple(self), astuple(other), strict=True)))


CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def usage_now(pids):
    """The Usage of processes `pids` and of the machine so far, or None where /proc cannot tell."""
    try:
        cpu, written = 0, 0
        for pid in pids:
            # proc(5): the fields after the command's closing parenthesis; utime and stime are 14th and 15th.
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            cpu += int(fields[11]) + int(fields[12])
            io = dict(line.split(": ") for line in Path(f"/proc/{pid}/io").read_text().splitlines())
            written += int(io["wchar"])
        # The first line of /proc/stat: user nice system idle iowait irq softirq steal, in ticks.
        machine = [int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError, KeyError, IndexError):
        return None
    return Usage(cpu / CLOCK_TICKS, written, sum(machine[:8]) / CLOCK_TICKS, machine[3] / CLOCK_TICKS,
                 machine[4] / CLOCK_TICKS)


def wrk(server, operation, key, source, seconds, check=False, host=None):
    """One bounded wrk run of `operation` ("get", "post" or "patch") against `server`; with `check`, every
    response's status is checked, not only told 2xx/3xx from the others (see bench/load.lua); `host`, the Host
    header the requests name (a proxy's server_name)."""
    assert server.url.startswith(f"http://{HOST}:")
    command = ["wrk", "-t1", f"-c{CONNECTIONS}", f"-d{seconds}s", "--timeout", "5s", "--latency",
               "-s", str(LOAD_SCRIPT), server.url, "--", operation, key, str(source), str(secrets.randbits(30)),
               "check" if check else "-", *([host] if host else [])]
    result = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 60)
    lines = [line for line in result.stdout.splitlines() if line.startswith("BENCH_JSON ")]
    if result.returncode != 0 or not lines:
        raise RuntimeError(f"wrk failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    figures = json.loads(lines[-1].removeprefix("BENCH_JSON "))
    socket_errors = sum(figures[name] for name in ("connect", "read", "write", "timeout"))
    return Run(
        requests=figures["requests"],
        seconds=figures["duration_us"] / 1e6,
        p50_ms=figures["p50_us"] / 1000,
        p99_ms=figures["p99_us"] / 1000,
        # Every non-2xx/3xx is also unexpected; unexpected adds the 2xx/3xx that are not 200/201.
        errors=socket_errors + max(figures["unexpected"], figures["status"]),
    )


def load(server, operation, key, ids_file, seconds, tag, check=False):
    """GET picks ids from `ids_file`; POST sends bodies made unique by `tag` and a random part."""
    source = ids_file if operation == "get" else f"{tag}-{secrets.token_hex(4)}"
    return wrk(server, operation, key, source, seconds, check)


def load_with_usage(server, operation, key, ids_file, seconds, tag):
    """load(), with the Usage of the server's workers and of the machine over the run (None where it
    cannot be read, or a worker was replaced meanwhile)."""
    pids = server.workers()
    before = usage_now(pids)
    run = load(server, operation, key, ids_file, seconds, tag)
    after = usage_now(pids)
    if before is not None and after is not None:
        run.usage = after - before
    return run


def cpu_ms_per_request(run):
    """The workers' CPU per request of `run` (see Usage), in ms; None where it is not known."""
    return None if run.usage is None or not run.requests else run.usage.cpu_seconds / run.requests * 1e3


def warm(server, operation, key, ids_file, seconds, tag):
    """A load run before the measured ones, which checks every response's status: the measured runs
    tell only 2xx/3xx from the others, which costs wrk less CPU (bench/load.lua)."""
    run = load(server, operation, key, ids_file, seconds, tag, check=True)
    if run.errors:
        raise RuntimeError(f"{server.name}: {run.errors} of {run.requests} {operation.upper()}s in the warm-up "
                           f"failed or had another status than {200 if operation == 'get' else 201}; "
                           f"see {server.log_path}")
    return run


def combined(runs):
    """Requests/s over all rounds; p50 and p99 as the median of the rounds' figures."""
    return Run(
        requests=sum(run.requests for run in runs),
        seconds=sum(run.seconds for run in runs),
        p50_ms=statistics.median(run.p50_ms for run in runs),
        p99_ms=statistics.median(run.p99_ms for run in runs),
        errors=sum(run.errors for run in runs),
        usage=None if any(run.usage is None for run in runs) else sum((run.usage for run in runs[1:]), runs[0].usage),
    )


# -- report ------------------------------------------------------------------------------------


def machine():
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    wrk_version = subprocess.run(["wrk", "-v"], capture_output=True, text=True).stdout.split("\n")[0].strip()
    return (f"{os.cpu_count()} cores ({model}), Python {platform.python_version()}, "
            f"{wrk_version.split(' [')[0] or 'wrk'}, gunicorn {' '.join([*gunicorn_config(), *GUNICORN_FLAGS])}")


# The project's throughput as a share of plain Flask's, Flask doing the floor's work (issue 48's goals): through
# public APIs only, with rate limits, logs and metrics on, every statement through SQLAlchemy's engine.
GOALS = {"GET": 0.5, "POST": 0.8}
# The targets, as the table names them: the bare floor, plain Flask doing its work, the project.
TARGETS = {"floor": "bare WSGI + sqlite3 + orjson (bench.floor:app)",
           "plain": "plain Flask doing the floor's work (bench.plain:app)",
           "project": "the project (app:app)"}


def print_table(results):
    print()
    print(f"Side by side: wrk -t1 -c{CONNECTIONS}, {ROUNDS} rounds x {SECONDS} s per target and operation after "
          f"{WARMUP} s warm-up, {IDENTITIES:,} seeded identities, 2 sync workers each")
    header = (f"{'target':<52} {'GET req/s':>9} {'GET p50/p99 ms':>15} {'POST req/s':>10} {'POST p50/p99 ms':>16}"
              f" {'errors':>6}")
    print(header)
    print("-" * len(header))
    for name, label in TARGETS.items():
        get, post = combined(results["GET"][name]), combined(results["POST"][name])
        print(f"{label:<52} {get.rate:>9.1f} {get.p50_ms:>6.2f} / {get.p99_ms:>6.2f} {post.rate:>10.1f} "
              f"{post.p50_ms:>6.2f} / {post.p99_ms:>7.2f} {get.errors + post.errors:>6}")
    print()
    for operation in ("GET", "POST"):
        project, plain, floor = (combined(results[operation][name]) for name in ("project", "plain", "floor"))
        # The ratio of each round, beside the pooled one: the rounds interleave, so each is a fair pair.
        rounds = ", ".join(f"{mine.rate / theirs.rate:.2f}"
                           for mine, theirs in zip(results[operation]["project"], results[operation]["plain"],
                                                   strict=True))
        print(f"{operation:<5} project / plain Flask {project.rate / plain.rate:5.2f} (goal >= {GOALS[operation]:.2f}; "
              f"per round {rounds});  project / floor {project.rate / floor.rate:5.2f};  "
              f"plain Flask / floor {plain.rate / floor.rate:5.2f}")
    print_usage(results)
    print()
    print("Per round (req/s, p50 ms, p99 ms):")
    for operation in ("GET", "POST"):
        for name in TARGETS:
            cells = "  ".join(f"{run.rate:7.1f} {run.p50_ms:6.2f} {run.p99_ms:7.2f}" for run in results[operation][name])
            print(f"  {operation:<5} {name:<8} {cells}")


def print_usage(results):
    """The workers' CPU and writes per request, and how busy the machine was, for each target (see Usage)."""
    print()
    print("Where the time went: the workers' CPU per request (user + system) and bytes their write calls wrote per")
    print("request (database, WAL, log); the machine's cores idle, or waiting for the disk, while each target ran:")
    for operation in ("GET", "POST"):
        usages = {name: combined(results[operation][name]) for name in TARGETS}
        if any(cpu_ms_per_request(run) is None for run in usages.values()):
            print(f"  {operation:<5} n/a (no /proc to read, or no request answered)")
            continue
        for name, run in usages.items():
            usage = run.usage
            print(f"  {operation:<5} {name:<8} CPU {cpu_ms_per_request(run):6.3f} ms   "
                  f"written {usage.written_bytes / run.requests / 1024:6.1f} KiB   "
                  f"idle {100 * usage.idle_seconds / usage.machine_seconds:4.1f}%   "
                  f"I/O wait {100 * usage.iowait_seconds / usage.machine_seconds:4.1f}%")
        project, plain = (cpu_ms_per_request(usages[name]) for name in ("project", "plain"))
        if plain:
            print(f"  {operation:<5} CPU per request, project / plain Flask: {project / plain:.2f}")


def print_memory(snapshots):
    print()
    print("Resident memory per worker (KiB), after the warm-up and after each round of GET + POST load:")
    for name in TARGETS:
        pids = sorted(snapshots[0][name])
        for pid in pids:
            sizes = [snapshot[name].get(pid) for snapshot in snapshots]
            cells = "  ".join(f"{size:>8}" if size is not None else f"{'gone':>8}" for size in sizes)
            measured = [size for size in sizes[1:] if size is not None]
            growth = f"{measured[-1] - measured[0]:+d}" if len(measured) > 1 else "n/a"
            print(f"  {name:<8} worker {pid:<8} {cells}   growth from round 1 to round {len(measured)}: {growth} KiB")


def warm_up(targets, ids_files, key, operations):
    for operation in operations:
        for name, server in targets.items():
            warm(server, operation.lower(), key, ids_files[name], WARMUP, f"warmup-{name}")


def alternate(targets, ids_files, key, operations, rounds, after_round=None):
    """Rounds of each operation on every target; which target goes first alternates, so drift hits all alike."""
    results = {operation: {name: [] for name in targets} for operation in operations}
    names = list(targets)
    for number in range(rounds):
        order = names if number % 2 == 0 else names[::-1]
        say(f"round {number + 1}/{rounds}: {' then '.join(order)}")
        for operation in operations:
            for name in order:
                run = load_with_usage(targets[name], operation.lower(), key, ids_files[name], SECONDS,
                                      f"{name}-r{number}")
                results[operation][name].append(run)
        if after_round:
            after_round()
    return results


def print_scale(results, small, large):
    print(f"Scale, project GET ({SCALE_ROUNDS} alternating rounds x {SECONDS} s after {WARMUP} s warm-up; "
          f"p50/p99: median of rounds):")
    runs = results["GET"]
    for label, count in (("small", small[1]), ("large", large[1])):
        run = combined(runs[label])
        rounds = ", ".join(f"{each.p50_ms:.2f}" for each in runs[label])
        print(f"  {count:>9,} identities: p50 {run.p50_ms:6.2f} ms, p99 {run.p99_ms:6.2f} ms, "
              f"{run.rate:7.1f} req/s, errors {run.errors}   (p50 per round: {rounds})")
    ratio = combined(runs["large"]).p50_ms / combined(runs["small"]).p50_ms
    print(f"  p50 ratio {large[1]:,} / {small[1]:,}: {ratio:.2f} (goal <= 1.30)")


def all_errors(*results):
    return sum(run.errors for result in results for by_target in result.values()
               for runs in by_target.values() for run in runs)


def main():
    if shutil.which("wrk") is None:
        sys.exit("wrk is missing: install it with apt-get install wrk")
    started = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="identity-bench-"))
    servers = []
    try:
        say(f"machine: {machine()}")
        say(f"working in {work}")
        project_db = work / "project.db"
        flask_cli(project_db, "db", "upgrade")
        key = flask_cli(project_db, "keys", "create", "--wallet", WALLET, "--role", "User").strip().splitlines()[-1]
        clock = time.monotonic()
        ids = seed_through_the_project(project_db, key, IDENTITIES)
        say(f"seeded {len(ids):,} identities through identity.core.identities.create_identity "
            f"in {time.monotonic() - clock:.1f} s")
        checkpoint(project_db)
        floor_db, plain_db, pristine_db = work / "floor.db", work / "plain.db", work / "pristine.db"
        for copy in (floor_db, plain_db, pristine_db):
            shutil.copy(project_db, copy)
        ids_file = write_ids(work / "ids.txt", ids)

        targets = {"project": Server("project", "app:app", project_db, work),
                   "plain": Server("plain", "bench.plain:app", plain_db, work),
                   "floor": Server("floor", "bench.floor:app", floor_db, work)}
        servers += targets.values()
        for server in targets.values():
            server.start()
        ids_files = {name: ids_file for name in targets}
        say(f"warm-up: {WARMUP} s of GET and of POST on each target")
        warm_up(targets, ids_files, key, ("GET", "POST"))
        snapshots = []

        def snapshot():
            snapshots.append({name: server.rss_kib() for name, server in targets.items()})

        snapshot()
        results = alternate(targets, ids_files, key, ("GET", "POST"), ROUNDS, after_round=snapshot)
        for server in targets.values():
            server.stop()

        scale_results = {}
        if not SKIP_SCALE:
            scale_db = work / "scale.db"
            shutil.copy(pristine_db, scale_db)
            clock = time.monotonic()
            say(f"bulk-inserting up to {SCALE_IDENTITIES:,} identities")
            sample = bulk_insert(scale_db, IDENTITIES, SCALE_IDENTITIES)
            say(f"bulk insert took {time.monotonic() - clock:.1f} s")
            scale_targets = {"small": Server("project", "app:app", pristine_db, work),
                             "large": Server("project", "app:app", scale_db, work)}
            servers += scale_targets.values()
            for server in scale_targets.values():
                server.start()
            scale_ids = {"small": ids_file, "large": write_ids(work / "scale-ids.txt", sample)}
            say(f"scale: project GET at {IDENTITIES:,} and at {SCALE_IDENTITIES:,} identities")
            warm_up(scale_targets, scale_ids, key, ("GET",))
            scale_results = alternate(scale_targets, scale_ids, key, ("GET",), SCALE_ROUNDS)
            for server in scale_targets.values():
                server.stop()

        print_table(results)
        print_memory(snapshots)
        print()
        small = bytes_per_identity(pristine_db)
        print(f"Database bytes per identity: {small[0]:,.0f} at {small[1]:,} identities ({small[2]:,} bytes)")
        if scale_results:
            large = bytes_per_identity(scale_db)
            print(f"Database bytes per identity: {large[0]:,.0f} at {large[1]:,} identities ({large[2]:,} bytes)")
            print()
            print_scale(scale_results, small, large)
        else:
            print("Scale: skipped (BENCH_SKIP_1M=1)")

        errors = all_errors(results, scale_results)
        print()
        print(f"Errors (socket errors and responses not 2xx/3xx; each warm-up found only 200s and 201s): {errors}")
        print(f"Benchmark took {time.monotonic() - started:.0f} s")
    finally:
        for server in servers:
            server.stop()
        if KEEP:
            say(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
