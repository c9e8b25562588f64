"""`make bench`, webhooks: deliveries per second from the serving process to a prompt receiver.

1. A database migrated by the project, an Admin key from its CLI, BENCH_WEBHOOK_ENTRIES identities
   created through its service code (each one an entry of the change log).
2. A receiver on 127.0.0.1 that answers 204 at once, in a process of its own, with keep-alive.
3. gunicorn serves the project as `make run` does (gunicorn.conf.py: one gevent worker here), with
   IDENTITY_WEBHOOKS_ALLOW_PRIVATE=1 so that it may deliver to the loopback receiver.
4. A webhook registered with after=0 over HTTP; the clock runs from its 201 until the receiver has
   every entry, and until the webhook's position (in the database) reaches the last one.

Settings: BENCH_WEBHOOK_ENTRIES (5000), BENCH_KEEP=1 keeps the temporary directory. Goal: at least 300/s.
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

from bench.run import (  # noqa: E402 - the same seeding and process handling as `make bench`
    BIN,
    HOST,
    ROOT,
    WALLET,
    _env_int,
    flask_cli,
    free_port,
    seed_through_the_project,
    stop_process_group,
    wait_until_ready,
)

GOAL = 300
# The receiver: counts POSTs in a file every 0.05 s; answers 204 with keep-alive.
RECEIVER = r"""
import sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
count = 0
class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        global count
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(204)
        self.send_header("Content-Length", "0")
        self.end_headers()
        count += 1
    def log_message(self, *args):
        pass
server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler)
def report():
    while True:
        with open(sys.argv[2] + ".tmp", "w") as out:
            out.write(str(count))
        import os; os.replace(sys.argv[2] + ".tmp", sys.argv[2])
        time.sleep(0.05)
threading.Thread(target=report, daemon=True).start()
server.serve_forever()
"""


def request(method, url, key, body=None):
    data = None if body is None else json.dumps(body).encode()
    headers = {"x-api-key": key, "Content-Type": "application/json"}
    with urllib.request.urlopen(urllib.request.Request(url, data=data, method=method, headers=headers), timeout=30) as r:
        return json.loads(r.read() or b"null")


def received(path):
    try:
        return int(path.read_text() or 0)
    except (OSError, ValueError):
        return 0


def main():
    entries = _env_int("BENCH_WEBHOOK_ENTRIES", 5000)
    work = Path(tempfile.mkdtemp(prefix="identity-bench-webhooks-"))
    receiver = server = None
    try:
        database = work / "identity.db"
        flask_cli(database, "db", "upgrade")
        key = flask_cli(database, "keys", "create", "--wallet", WALLET, "--role", "Admin").strip().splitlines()[-1]
        print(f"webhooks: seeding {entries} entries ...", flush=True)
        seed_through_the_project(database, key, entries)

        count_file = work / "received"
        receiver_port = free_port()
        receiver = subprocess.Popen([sys.executable, "-c", RECEIVER, str(receiver_port), str(count_file)],
                                    start_new_session=True)
        port = free_port()
        env = {**os.environ, "DATABASE_URL": f"sqlite:///{database}", "HOST": HOST, "PORT": str(port),
               "WEB_CONCURRENCY": "1", "IDENTITY_WEBHOOKS_ALLOW_PRIVATE": "1", "IDENTITY_WEBHOOK_POLL_SECONDS": "0.1"}
        log_path = work / "gunicorn.log"
        with open(log_path, "ab") as log:
            server = subprocess.Popen([str(BIN / "gunicorn"), "-c", "gunicorn.conf.py", "app:app"], cwd=ROOT,
                                      env=env, stdout=log, stderr=log, start_new_session=True)
        base = f"http://{HOST}:{port}"
        wait_until_ready(server, base, log_path, "gunicorn", 60)

        webhook = request("POST", f"{base}/webhooks", key, {"url": f"http://{HOST}:{receiver_port}/hook", "after": 0})
        started = time.monotonic()
        deadline = started + max(120, entries / 50)
        while received(count_file) < entries and time.monotonic() < deadline:
            time.sleep(0.02)
        arrived = time.monotonic() - started
        count = received(count_file)
        while request("GET", f"{base}/webhooks/{webhook['id']}", key)["position"] < entries and time.monotonic() < deadline:
            time.sleep(0.05)
        recorded = time.monotonic() - started
        rate = count / arrived
        print(f"webhooks: {count} of {entries} entries delivered to a prompt receiver in {arrived:.2f} s: "
              f"{rate:,.0f} deliveries/s (goal {GOAL}); position recorded after {recorded:.2f} s")
        return 0 if count >= entries else 1
    finally:
        stop_process_group(server)
        stop_process_group(receiver, timeout=5)
        if os.environ.get("BENCH_KEEP") == "1":
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
