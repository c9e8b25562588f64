"""`make bench`, mirrors: how fast a new mirror copies an upstream on the same machine, beside
`identities export | identities import` between the same two kinds of database.

1. The upstream: an SQLite database migrated by the project and filled by `identities import` with
   BENCH_MIRROR_N generated identities (bench.portable's lines); an Admin key from its CLI.
2. The floor: `flask identities export - | flask identities import -`, from the upstream into a fresh,
   migrated database; its wall time runs from the start of both processes to the end of the last.
3. The mirror: gunicorn serves the upstream and, on another fresh database, the mirror, each as `make run`
   does (gunicorn.conf.py, one gevent worker); POST /mirrors registers the upstream, and the clock runs
   from its 201 until GET /mirrors/<id> shows the position at the upstream's head. Then the two
   instances' exports must compare equal.
4. Memory: the peak resident memory (VmHWM) of the mirror's worker, which reads, checks and writes
   everything, beside that of the import.

Goal (the contract): the mirror copies at no less than half the floor's rate. Settings: BENCH_MIRROR_N
(100,000; BENCH_QUICK=1 makes it 20,000), BENCH_KEEP=1 keeps the temporary directory.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.portable import FLASK_WITH_PEAK, export_lines  # noqa: E402 - the same generated identities
from bench.run import (  # noqa: E402 - the same process handling as `make bench`
    BIN,
    HOST,
    QUICK,
    ROOT,
    WALLET,
    _env_int,
    flask_cli,
    free_port,
    stop_process_group,
    wait_until_ready,
    worker_pids,
)

GOAL = 0.5


def request(method, url, key, body=None):
    data = None if body is None else json.dumps(body).encode()
    headers = {"x-api-key": key, "Content-Type": "application/json"}
    with urllib.request.urlopen(urllib.request.Request(url, data=data, method=method, headers=headers), timeout=30) as r:
        return json.loads(r.read() or b"null")


def serve(database, log_path):
    """gunicorn serving the project on `database`, as `make run` does, with one worker; returns (process, base URL)."""
    port = free_port()
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{database}", "HOST": HOST, "PORT": str(port),
           "WEB_CONCURRENCY": "1", "IDENTITY_RATELIMIT_READ": "100000000/minute",
           "IDENTITY_RATELIMIT_CREATE": "100000000/minute"}
    with open(log_path, "ab") as log:
        process = subprocess.Popen([str(BIN / "gunicorn"), "-c", "gunicorn.conf.py", "app:app"], cwd=ROOT, env=env,
                                   stdout=log, stderr=log, start_new_session=True)
    base = f"http://{HOST}:{port}"
    wait_until_ready(process, base, log_path, "gunicorn", 60)
    return process, base


def peak_kib(pids):
    peak = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    peak = max(peak, int(line.split()[1]))
        except OSError:
            pass
    return peak


def export_import(source, target):
    """`identities export - | identities import -` from `source` into `target`: (wall seconds, import's peak KiB)."""
    env = dict(os.environ)
    started = time.perf_counter()
    exporter = subprocess.Popen([str(BIN / "flask"), "--app", "app", "identities", "export", "-"], cwd=ROOT,
                                env={**env, "DATABASE_URL": f"sqlite:///{source}"}, stdout=subprocess.PIPE)
    importer = subprocess.run([sys.executable, "-c", FLASK_WITH_PEAK, "identities", "import", "-"], cwd=ROOT,
                              env={**env, "DATABASE_URL": f"sqlite:///{target}"}, stdin=exporter.stdout,
                              capture_output=True, timeout=7200)
    exporter.stdout.close()
    exporter.wait(timeout=60)
    seconds = time.perf_counter() - started
    if importer.returncode != 0 or exporter.returncode != 0:
        raise SystemExit(f"export | import failed:\n{importer.stderr.decode()[-2000:]}")
    return seconds, int(importer.stderr.decode().split()[-1])


def main():
    count = _env_int("BENCH_MIRROR_N", 20_000 if QUICK else 100_000)
    work = Path(tempfile.mkdtemp(prefix="identity-bench-mirrors-"))
    upstream = mirror = None
    try:
        databases = {name: work / f"{name}.db" for name in ("upstream", "floor", "mirror")}
        for database in databases.values():
            flask_cli(database, "db", "upgrade")
        lines = work / "identities.jsonl"
        with lines.open("wb") as stream:
            stream.writelines(export_lines(count))
        print(f"mirrors: filling the upstream with {count:,} identities ...", flush=True)
        flask_cli(databases["upstream"], "identities", "import", str(lines))
        upstream_key = flask_cli(databases["upstream"], "keys", "create", "--wallet", WALLET, "--role", "Admin",
                                 "--scope", "read").strip().splitlines()[-1]
        mirror_key = flask_cli(databases["mirror"], "keys", "create", "--wallet", WALLET, "--role", "Admin").strip().splitlines()[-1]

        floor_seconds, floor_peak = export_import(databases["upstream"], databases["floor"])

        upstream, upstream_url = serve(databases["upstream"], work / "upstream.log")
        mirror, mirror_url = serve(databases["mirror"], work / "mirror.log")
        registered = request("POST", f"{mirror_url}/mirrors", mirror_key, {"url": upstream_url, "key": upstream_key})
        started = time.monotonic()
        state = registered
        while state["position"] < count or state["position"] < state["upstream_head"]:
            if time.monotonic() - started > max(600, count / 100):
                raise SystemExit(f"the mirror did not catch up: {state}")
            time.sleep(0.1)
            state = request("GET", f"{mirror_url}/mirrors/{registered['id']}", mirror_key)
        mirror_seconds = time.monotonic() - started
        mirror_peak = peak_kib(worker_pids(mirror))
        same = (flask_cli(databases["upstream"], "identities", "export", "-")
                == flask_cli(databases["mirror"], "identities", "export", "-"))

        floor_rate, mirror_rate = count / floor_seconds, count / mirror_seconds
        ratio = mirror_rate / floor_rate
        print(f"mirrors: {count:,} identities from an upstream on this machine (SQLite, one gevent worker each):")
        print(f"  export | import  {floor_rate:8,.0f}/s ({floor_seconds:6.1f} s)   import's peak RSS {floor_peak / 1024:4.0f} MB")
        print(f"  a new mirror     {mirror_rate:8,.0f}/s ({mirror_seconds:6.1f} s)   worker's peak RSS {mirror_peak / 1024:4.0f} MB")
        print(f"  the mirror's rate is {ratio:.2f} of export | import's (goal at least {GOAL}, "
              f"{'ok' if ratio >= GOAL else 'BELOW GOAL'}); rejected {state['rejected']}, already present "
              f"{state['already_present']}; the two exports {'compare equal' if same else 'DIFFER'}")
        return 0 if same and state["rejected"] == 0 else 1
    finally:
        stop_process_group(upstream)
        stop_process_group(mirror)
        if os.environ.get("BENCH_KEEP") == "1":
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
