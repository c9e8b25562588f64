"""`make bench` for identities as data: export, import, snapshot and their peak memory at 1,000,000 identities.

Each step runs as its own `flask` process on a fresh SQLite database (import fills it from generated
export lines), and is measured by its wall time and its peak RSS (the children's ru_maxrss). Goals
(the contract): export 50,000/s, import 10,000/s on SQLite, snapshot 20,000/s, peak RSS under 200 MB.
BENCH_PORTABLE_N sets the number of identities; BENCH_SKIP_1M=1 or BENCH_QUICK=1 makes it 20,000.
"""

import os
import resource
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.run import SKIP_SCALE  # noqa: E402 - BENCH_QUICK=1 or BENCH_SKIP_1M=1: no 1,000,000 part
from identity.core import content  # noqa: E402
from identity.core.wallets import checksum_wallet  # noqa: E402

GOALS = {"export": 50_000, "import": 10_000, "snapshot": 20_000}
MAX_RSS_MB = 200
# A step's CPU less the start-up's counts only when it is more than this share of the start-up's.
STARTUP_NOISE = 0.25
WALLETS = [checksum_wallet(f"0x{n:040x}") for n in range(1, 101)]
START = datetime(2026, 1, 1, tzinfo=UTC)


def export_lines(count, first=0, namespace=content.DEFAULT_NAMESPACE):
    """`count` lines as `identities export` writes them, of identities numbered from `first`: valid,
    each id the address of its content, oldest first."""
    for number in range(first, first + count):
        fields = {"display_name": f"Identity {number}", "description": f"Number {number} of a generated set."}
        if number % 3 == 0:
            fields["image"] = f"https://example.org/{number}.png"
        content_id = content.content_id_of(content.canonical_bytes(fields))
        at = (START + timedelta(microseconds=number)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        yield orjson.dumps({
            "id": f"00000000-0000-4000-8000-{number:012d}",
            "identity_id": f"did:{namespace}:ipfs:{content_id}",
            "identity_hash": content.identity_hash_of(content_id),
            "vault_id": "0",
            "display_name": fields["display_name"],
            "description": fields["description"],
            "image": fields.get("image"),
            "corpora_id": None,
            "semantic": None,
            "external_reference": None,
            "creator": WALLETS[number % len(WALLETS)],
            "creator_signature": None,
            "creator_signature_chain_id": None,
            "created_at": at,
            "updated_at": at,
            "num_positions": number % 7,
            "assets_sum": str(number * 10**18),
            "conviction_sum": "0",
            "conviction_price": "0",
            "status": ("complete", "pending", "removed", "error")[number % 4],
            "isUser": False,
            "user_conviction": "0",
            "user_conviction_value": "0",
        }) + b"\n"


# `flask --app app ARGS` that prints its peak RSS (VmHWM, KiB) last on stderr.
FLASK_WITH_PEAK = """
import sys
from flask.cli import main
sys.argv = ["flask", "--app", "app", *sys.argv[1:]]
try:
    main()
except SystemExit as exit:
    if exit.code:
        raise
with open("/proc/self/status") as status:
    print(next(line.split()[1] for line in status if line.startswith("VmHWM:")), file=sys.stderr)
"""


def cpu_seconds():
    """CPU time (user and system) of the children waited for so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def flask(database_url, *args, stdin=None):
    """Run `flask --app app ARGS` in a process of its own; returns (wall seconds, CPU seconds, peak RSS in MB)."""
    env = {**os.environ, "DATABASE_URL": database_url}
    cpu = cpu_seconds()
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-c", FLASK_WITH_PEAK, *args], cwd=ROOT, env=env, stdin=stdin, capture_output=True, timeout=7200,
    )
    seconds = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"flask {' '.join(args)} failed:\n{result.stderr.decode()[-2000:]}")
    return seconds, cpu_seconds() - cpu, int(result.stderr.decode().split()[-1]) / 1024


def main():
    count = int(os.environ.get("BENCH_PORTABLE_N") or (20_000 if SKIP_SCALE else 1_000_000))
    with tempfile.TemporaryDirectory(prefix="bench-portable-") as folder:
        folder = Path(folder)
        lines = folder / "identities.jsonl"
        with lines.open("wb") as stream:
            for line in export_lines(count):
                stream.write(line)
        database_url = f"sqlite:///{folder / 'identity.db'}"
        flask(database_url, "db", "upgrade")
        # What every command costs before its first row: Python, Flask, SQLAlchemy, the app.
        _, startup, _ = flask(database_url, "identities", "export", str(folder / "empty.jsonl"))
        figures = []
        with lines.open("rb") as stdin:
            figures.append(("import", *flask(database_url, "identities", "import", "-", stdin=stdin)))
        figures.append(("export", *flask(database_url, "identities", "export", str(folder / "again.jsonl"))))
        figures.append(("snapshot", *flask(database_url, "identities", "snapshot", str(folder / "identities.car"))))
        same = (folder / "again.jsonl").read_bytes() == lines.read_bytes() if count <= 100_000 else None
    print(f"identities as data, {count:,} identities on SQLite, each step a flask process "
          f"(its start-up, {startup:.1f} s of CPU, is left out of the CPU rate):")
    print("  the wall rate counts the start-up and whatever else the machine runs; the CPU rate is one free core's")
    for step, seconds, cpu, rss in figures:
        rate, cpu_rate, verdict = step_rates(count, seconds, cpu, startup, GOALS[step])
        memory = "ok" if rss < MAX_RSS_MB else "ABOVE GOAL"
        of_cpu = f"{cpu_rate:8,.0f}/s of CPU" if cpu_rate is not None else "   n/a of CPU (within its start-up's)"
        print(f"  {step:9} {rate:8,.0f}/s wall ({seconds:6.1f} s)  {of_cpu}  "
              f"(goal {GOALS[step]:,}/s, {verdict})   peak RSS {rss:4.0f} MB (goal under {MAX_RSS_MB} MB, {memory})")
    if same is not None:
        print(f"  round trip: export of the import {'equals' if same else 'DIFFERS FROM'} the generated lines")


def step_rates(count, seconds, cpu, startup, goal):
    """(rows a second by the wall clock, rows a second of the step's own CPU or None, the verdict).

    The step's own CPU is its process's less the start-up's, measured once by another process. When
    the step's CPU is not clearly more than that (a small run: 20,000 rows export in less CPU than
    Python and the app take to start), the difference is noise, and no CPU rate is given: the wall
    rate alone is judged against the goal.
    """
    rate = count / seconds
    own = cpu - startup
    cpu_rate = count / own if own > STARTUP_NOISE * startup else None
    verdict = "ok" if max(rate, cpu_rate or 0.0) >= goal else "BELOW GOAL"
    return rate, cpu_rate, verdict


if __name__ == "__main__":
    main()
