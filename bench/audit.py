"""`make bench`, the audit log: an Admin write with its entry against the same write without one, and GET /audit
at 1,000,000 entries against the identities listing at 1,000,000 identities.

1. The write: PATCH /webhooks/<id> (a new description), in-process through the Flask test client on SQLite,
   BENCH_AUDIT_REPEAT (300) times with its entry and as many without, taking turns; "without" replaces
   identity.core.audit.record by a function that keeps nothing, for the bench alone. Goal: at most 1.1 times.
   Then the same write served as users serve it: the default server (gunicorn.conf.py) behind deploy/nginx.conf
   (Debian's nginx, as tests.common.exposure runs it), BENCH_CONNECTIONS (8) clients of wrk, BENCH_ROUNDS (3)
   rounds of BENCH_SECONDS (5) on each side in turn; "without" serves bench.no_audit:app. The ratio of the
   median latencies, and of the requests each side answered.
2. The reads: the first page of GET /audit, a page filtered by action, and a page of a time range, against the
   first page of GET /identities and a creator's page, on one SQLite database holding BENCH_AUDIT_SIZE
   (1,000,000; BENCH_QUICK=1 or BENCH_SKIP_1M=1 make it 10,000) of each. Goal: no slower than the listing.

The entries are written straight into the table as the append writes them (a chain of real hashes), the
identities as bench/scale.py writes them.
"""

import os
import shutil
import sqlite3
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.inprocess import app_on, median_ms, migrated_app, timed, user_ids, wallets_with_keys  # noqa: E402
from bench.run import CONNECTIONS, ROUNDS, SECONDS, SKIP_SCALE, WARMUP, checkpoint, combined, wrk  # noqa: E402
from bench.scale import grow  # noqa: E402
from bench.tail import DefaultServer  # noqa: E402
from tests.common.exposure import NGINX, Nginx  # noqa: E402

SIZE = int(os.environ.get("BENCH_AUDIT_SIZE") or (10_000 if SKIP_SCALE else 1_000_000))
REPEAT = int(os.environ.get("BENCH_AUDIT_REPEAT") or 300)
WRITE_GOAL, READ_GOAL = 1.1, 1.0
ACTIONS = ("key.issue", "key.revoke", "webhook.change", "identity.take_down", "signin.siwe")
COLUMNS = ("seq", "at", "actor_user_id", "actor_wallet", "actor_role", "actor_key_id", "actor_key_hint", "via",
           "action", "target_kind", "target_id", "outcome", "detail", "request_id", "client_address", "user_agent",
           "before", "after", "prev_hash", "hash")


def write_with_and_without(app, key):
    from identity.core import audit

    client = app.test_client()
    hook = client.post("/webhooks", json={"url": "https://hooks.example.com/bench"}, headers=key).get_json()["id"]
    recording = audit.record
    samples = {"with": [], "without": []}
    for number in range(REPEAT):
        for side in ("with", "without"):
            audit.record = recording if side == "with" else (lambda *args, **kwargs: None)
            try:
                timed(client, "PATCH", f"/webhooks/{hook}", key, samples[side], json={"description": f"{side} {number}"})
            finally:
                audit.record = recording
    with_ms, without_ms = median_ms(samples["with"]), median_ms(samples["without"])
    ratio = with_ms / without_ms
    print(f"\nAudit log, an Admin write (PATCH /webhooks/<id>) with and without its entry: p50 ms over {REPEAT}, "
          "SQLite, in-process")
    print(f"{'without':>10}{'with':>10}{'ratio':>8}  goal <= {WRITE_GOAL}")
    print(f"{without_ms:>10.2f}{with_ms:>10.2f}{ratio:>8.2f}  {'met' if ratio <= WRITE_GOAL else 'MISSED'}", flush=True)
    return hook


def write_on_the_deployment(database, key, hook, folder):
    """The Admin write with and without its entry, served by the default server behind nginx (see above)."""
    if NGINX is None:
        print("\nAudit log, the write on the deployment: not measured, nginx is not installed (apt-get install nginx)",
              flush=True)
        return
    checkpoint(database)
    copy = Path(folder) / "without.db"
    shutil.copyfile(database, copy)
    sides = {"with": DefaultServer("with", "app:app", database, Path(folder)),
             "without": DefaultServer("without", "bench.no_audit:app", copy, Path(folder))}
    proxies = {}
    path = f"/webhooks/{hook}"
    try:
        for name, server in sides.items():
            server.start()
            proxies[name] = Nginx(server.port)
            proxies[name].start()
            warm_up = _patches(proxies[name], key["x-api-key"], path, WARMUP, check=True)
            if warm_up.errors or not warm_up.requests:
                raise RuntimeError(f"{name}: {warm_up.errors} of {warm_up.requests} PATCHes in the warm-up failed or "
                                   f"were not 200; see {server.log_path}")
        rounds = {name: [] for name in sides}
        for number in range(ROUNDS):
            for name in (("with", "without") if number % 2 == 0 else ("without", "with")):
                rounds[name].append(_patches(proxies[name], key["x-api-key"], path, SECONDS))
    finally:
        for proxy in proxies.values():
            proxy.stop()
        for server in sides.values():
            if server.process is not None:
                server.stop()
    totals = {name: combined(runs) for name, runs in rounds.items()}  # rates over all rounds, medians of p50
    p50 = {name: total.p50_ms for name, total in totals.items()}
    rate = {name: total.rate for name, total in totals.items()}
    errors = sum(total.errors for total in totals.values())
    ratio = p50["with"] / p50["without"]
    print(f"\nAudit log, the same write served as users serve it (gunicorn.conf.py behind deploy/nginx.conf, "
          f"{CONNECTIONS} clients, {ROUNDS} rounds of {SECONDS} s, SQLite): p50 ms and requests/s")
    print(f"{'':>10}{'p50 ms':>10}{'req/s':>10}")
    for name in ("without", "with"):
        print(f"{name:>10}{p50[name]:>10.2f}{rate[name]:>10.0f}")
    print(f"{'ratio':>10}{ratio:>10.2f}{rate['without'] / rate['with']:>10.2f}  goal <= {WRITE_GOAL}  "
          f"{'met' if ratio <= WRITE_GOAL else 'MISSED'}{f'  ({errors} errors)' if errors else ''}", flush=True)


def _patches(proxy, key, path, seconds, check=False):
    """One wrk run of PATCH `path` through `proxy` (an Nginx), named by the Host it serves."""
    return wrk(proxy, "patch", key, path, seconds, check, host=proxy.host)


def fill_entries(database, count, wallets):
    """`count` entries, chained as the append chains them, at one a second up to now."""
    from identity.core import audit

    connection = sqlite3.connect(database, isolation_level=None)
    connection.execute("PRAGMA synchronous = OFF")
    head = connection.execute("SELECT head_seq, head_hash FROM audit_chain WHERE id = 1").fetchone()
    head_seq, prev = head or (0, audit.GENESIS)
    start = datetime.now(UTC) - timedelta(seconds=count)
    insert = f"INSERT INTO audit_entries ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))})"
    rows = []
    for number in range(count):
        seq = head_seq + number + 1
        row = {"seq": seq, "at": start + timedelta(seconds=number), "actor_user_id": None,
               "actor_wallet": wallets[number % len(wallets)], "actor_role": "Admin", "actor_key_id": None,
               "actor_key_hint": "idsk_Abcd", "via": "api", "action": ACTIONS[number % len(ACTIONS)],
               "target_kind": "key", "target_id": f"target-{number % 5000}", "outcome": "ok", "detail": None,
               "request_id": f"{number:032x}", "client_address": "203.0.113.7", "user_agent": "bench/1.0",
               "before": {"revoked_at": None}, "after": {"revoked_at": audit.moment(start)}, "prev_hash": prev}
        row["hash"] = prev = audit.entry_hash(row)
        rows.append(tuple(audit.moment(row["at"]).replace("T", " ").rstrip("Z") if name == "at" else
                          (audit.rfc8785.dumps(row[name]).decode() if name in ("before", "after") else row[name])
                          for name in COLUMNS))
        if len(rows) == 20_000 or number == count - 1:
            connection.execute("BEGIN")
            connection.executemany(insert, rows)
            connection.execute("COMMIT")
            rows = []
    connection.execute("DELETE FROM audit_chain")
    connection.execute("INSERT INTO audit_chain VALUES (1, ?, ?, 0, ?)", (head_seq + count, prev, audit.GENESIS))
    connection.execute("PRAGMA optimize")
    connection.close()


def reads(app, key, creator, wallets):
    client = app.test_client()
    middle = datetime.now(UTC) - timedelta(seconds=SIZE // 2)
    since, until = (middle - timedelta(hours=1)).isoformat(), middle.isoformat()
    pairs = {
        "first page": ("/audit?limit=20", "/identities?limit=20"),
        "filtered": (f"/audit?action=key.revoke&actor={wallets[1].lower()}", f"/identities?creator={creator.lower()}"),
        "time range": (f"/audit?since={since.replace('+', '%2B')}&until={until.replace('+', '%2B')}",
                       "/identities?limit=20"),
    }
    print(f"\nAudit log, GET /audit against GET /identities: p50 ms over {REPEAT}, {SIZE:,} entries and {SIZE:,} "
          "identities, SQLite, in-process")
    print(f"{'listing':<12}{'GET /audit':>12}{'GET /identities':>17}{'ratio':>8}  goal <= {READ_GOAL}")
    for name, (audit_url, identities_url) in pairs.items():
        samples = {"audit": [], "identities": []}
        for _ in range(REPEAT):
            timed(client, "GET", audit_url, key, samples["audit"])
            timed(client, "GET", identities_url, key, samples["identities"])
        audit_ms, identities_ms = median_ms(samples["audit"]), median_ms(samples["identities"])
        ratio = audit_ms / identities_ms
        print(f"{name:<12}{audit_ms:>12.2f}{identities_ms:>17.2f}{ratio:>8.2f}  "
              f"{'met' if ratio <= READ_GOAL else 'MISSED'}", flush=True)


def main():
    with tempfile.TemporaryDirectory(prefix="identity-audit-") as folder:
        database = Path(folder) / "identity.db"
        app = migrated_app(database)
        wallets, admin_key = wallets_with_keys(app, 10)
        key = {"x-api-key": admin_key}
        hook = write_with_and_without(app, key)
        write_on_the_deployment(database, key, hook, folder)

        creator_ids = user_ids(database, wallets)
        clock = time.monotonic()
        grow(database, 0, SIZE, creator_ids)
        fill_entries(database, SIZE, wallets)
        print(f"· {SIZE:,} identities and {SIZE:,} audit entries seeded in {time.monotonic() - clock:.1f} s", flush=True)
        app = app_on(database)
        reads(app, key, wallets[1], wallets)

if __name__ == "__main__":
    main()
