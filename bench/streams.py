"""`make bench`, part four: the live change feed (GET /changes?feed=eventsource).

1. Across processes: two gunicorn servers (one worker each) on one SQLite file, a stream held by
   one, BENCH_STREAM_CREATES creates through the other; the time from each create's 201 (its commit
   is before it) to its event on the stream: median, p95, max. The same on PostgreSQL with two
   nodes when IDENTITY_TEST_POSTGRES_URL names a server (`.ci/postgres make bench` starts one).
2. Many streams: the default server (`make run`'s: gunicorn.conf.py, one gevent worker) holds
   BENCH_STREAMS streams (10 per key, the default cap); the worker's resident memory per stream, a
   GET's time while they are open (median of 20), and the time from a create's 201 to the last
   stream that receives its event (median over 5 creates).

It prints figures; the exit status is non-zero only when a stream missed an entry.
Settings: BENCH_STREAMS (1000), BENCH_STREAM_CREATES (50).
"""

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from identity.core import keys  # noqa: E402
from tests.common import postgres  # noqa: E402
from tests.common.apps import make_app  # noqa: E402
from tests.common.live import LiveServer, prepare_database, start_all  # noqa: E402
from tests.common.streams import Streams  # noqa: E402

STREAMS = int(os.environ.get("BENCH_STREAMS") or 1000)
CREATES = int(os.environ.get("BENCH_STREAM_CREATES") or 50)
PER_KEY = 10
WALLET = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"


def say(line):
    print(line, flush=True)


def milliseconds(values):
    values = sorted(values)
    p95 = values[min(len(values) - 1, int(len(values) * 0.95))]
    return f"median {statistics.median(values) * 1000:.1f} ms, p95 {p95 * 1000:.1f} ms, max {values[-1] * 1000:.1f} ms"


def across_processes(database_url, label):
    key = prepare_database(database_url, WALLET)
    writer, reader = start_all([LiveServer(database_url, workers=1), LiveServer(database_url, workers=1)])
    headers = {"x-api-key": key}
    delays = []
    try:
        with requests.Session() as session, session.get(
            f"{reader.url}/changes?feed=eventsource", headers=headers, stream=True, timeout=30
        ) as stream:
            lines = stream.iter_lines(decode_unicode=True)
            next(lines)  # ": ok"
            for number in range(CREATES):
                identity_id = session.post(f"{writer.url}/identity", json={"display_name": f"bench {number}"},
                                           headers=headers, timeout=30).json()["identity_id"]
                answered = time.monotonic()
                for line in lines:
                    if line.startswith("data: ") and identity_id in line:
                        delays.append(time.monotonic() - answered)
                        break
    finally:
        writer.stop()
        reader.stop()
    if len(delays) != CREATES:
        raise SystemExit(f"{label}: a stream missed an entry")
    say(f"{label}: a create on one server to its event on a stream of the other, {CREATES} creates: "
        + milliseconds(delays))


def resident_kib(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def worker_pid(server):
    children = Path(f"/proc/{server.process.pid}/task/{server.process.pid}/children").read_text().split()
    return int(children[0])


def many_streams(directory):
    database_url = f"sqlite:///{directory / 'streams.db'}"
    admin_key = prepare_database(database_url, WALLET)
    app = make_app(database_url)
    with app.app_context():
        api_keys = [keys.issue_key(f"0x{number + 1:040x}", "User")[0] for number in range(-(-STREAMS // PER_KEY))]
    server = LiveServer(database_url, workers=None).start()  # as `make run` serves
    headers = {"x-api-key": admin_key}
    streams = None
    try:
        worker = worker_pid(server)
        requests.get(f"{server.url}/changes?feed=longpoll&timeout=0", headers=headers, timeout=30)  # warm up
        before = resident_kib(worker)
        streams = Streams(server.url, api_keys, STREAMS)
        opened = streams.wait_for(b": ok\n", 120)
        if len(opened) != STREAMS:
            raise SystemExit(f"only {len(opened)} of {STREAMS} streams opened: {set(streams.statuses())}")
        after = resident_kib(worker)
        gets = []
        with requests.Session() as session:
            for _ in range(20):
                started = time.monotonic()
                session.get(f"{server.url}/changes?limit=10", headers=headers, timeout=30).raise_for_status()
                gets.append(time.monotonic() - started)
            to_last = []
            for number in range(5):
                identity_id = session.post(f"{server.url}/identity", json={"display_name": f"to all {number}"},
                                           headers=headers, timeout=30).json()["identity_id"]
                answered = time.monotonic()
                arrived = streams.wait_for(identity_id.encode(), 60)
                if len(arrived) != STREAMS:
                    raise SystemExit(f"only {len(arrived)} of {STREAMS} streams received the entry")
                to_last.append(max(arrived.values()) - answered)
    finally:
        if streams is not None:
            streams.close()
        server.stop()
    say(f"{STREAMS} open streams on the default server (one gevent worker): "
        f"{(after - before) / STREAMS:.1f} KiB of worker memory per stream ({before // 1024} MiB before, "
        f"{after // 1024} MiB with them)")
    say(f"  a GET while they are open: {milliseconds(gets)}")
    say(f"  a create's 201 to its event on the last of the {STREAMS} streams: {milliseconds(to_last)}")


def main():
    with tempfile.TemporaryDirectory(prefix="identity-bench-streams-") as directory:
        directory = Path(directory)
        across_processes(f"sqlite:///{directory / 'across.db'}", "SQLite, two gunicorn processes")
        if postgres.URL:
            server = postgres.PostgresServer(postgres.URL)
            url = server.create_database()
            try:
                across_processes(url, "PostgreSQL, two nodes")
            finally:
                server.drop_database(url)
                server.close()
        else:
            say("PostgreSQL, two nodes: skipped (IDENTITY_TEST_POSTGRES_URL is not set; `.ci/postgres make bench`)")
        many_streams(directory)


if __name__ == "__main__":
    main()
