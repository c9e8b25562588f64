"""`make bench`, browse and search: p50 of GET /identities at 10,000, 100,000 and 1,000,000 identities.

One SQLite database grows from size to size. Identities are bulk-inserted in big transactions with
the project's own content addressing (identity.core.content.address), so the migration's triggers fill
the full-text, trigram and count tables as every create does. 100 creators (issued through the
service) share the identities; 50 identities named "Vitalik Buterin ..." are planted among the first
10,000, so that the displayName and q queries match the same 50 identities at every size: what is
measured is the cost of finding them among more and more others, `total` included.

Queries, each in-process through the Flask test client with a User key, BENCH_SCALE_REPEAT times:
sizes taking turns in 5 rounds: the first page, a creator filter, page 41 by cursor (the cursor of a walk of 40 pages), page=400,
a displayName substring and a two-word q. Settings: BENCH_SKIP_1M=1 stops at 100,000;
BENCH_SCALE_REPEAT (200).
"""

import multiprocessing
import os
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SIZES = (10_000, 100_000, 1_000_000)
CREATORS = 100
PLANTED_EVERY = 200  # among the first 10,000: 50 planted identities
CHUNK = 50_000
REPEAT = int(os.environ.get("BENCH_SCALE_REPEAT") or 200)
ROUNDS = 5
LETTERS = "abcdefghijklmnopqrstuvwxyz"
START = datetime(2026, 1, 1, tzinfo=UTC)


def _word(rng, low=4, high=9):
    return "".join(rng.choice(LETTERS) for _ in range(rng.randint(low, high)))


def identity_body(number):
    """A seeded identity's content: random pseudo-words, or a planted "Vitalik Buterin"."""
    rng = random.Random(number)
    if number < SIZES[0] and number % PLANTED_EVERY == 7:
        name = f"Vitalik Buterin {number}"
    else:
        name = f"{_word(rng).title()} {_word(rng).title()} {number}"
    return {"display_name": name, "description": " ".join(_word(rng) for _ in range(rng.randint(3, 12)))}


def _rows(span, creator_ids):
    from identity.core import content

    rows = []
    for number in range(*span):
        address = content.address(identity_body(number))
        given = address.content
        # One second apart, in the project's SQLite DATETIME text: created_at and updated_at differ.
        created = (START + timedelta(seconds=number)).strftime("%Y-%m-%d %H:%M:%S.%f")
        updated = (START + timedelta(seconds=(number * 7919) % 10_000_000)).strftime("%Y-%m-%d %H:%M:%S.%f")
        rows.append((
            str(uuid.uuid4()), address.identity_id, address.content_id, address.identity_hash, "0",
            given["display_name"], given.get("description"), None, None, None, None,
            creator_ids[number % len(creator_ids)], created, updated, number % 97, "0", "0", "0", "complete",
            0, "0", "0",
        ))
    return rows


def grow(database, start, stop, creator_ids):
    from bench.floor import INSERT_IDENTITY

    connection = sqlite3.connect(database, isolation_level=None)
    connection.execute("PRAGMA journal_mode = WAL")
    connection.execute("PRAGMA synchronous = OFF")  # a lost bulk load is simply made again
    connection.execute("PRAGMA cache_size = -500000")
    spans = [(low, min(low + CHUNK, stop)) for low in range(start, stop, CHUNK)]
    with multiprocessing.Pool(2) as pool:
        for rows in pool.imap(partial(_rows, creator_ids=creator_ids), spans):
            connection.execute("BEGIN")
            connection.executemany(INSERT_IDENTITY, rows)
            connection.execute("COMMIT")
    connection.execute("PRAGMA optimize")
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    connection.close()


def queries(client, headers, creator_wallet):
    """The measured URLs; the cursor is the `next` of a walk of 40 pages from the first."""
    page = client.get("/identities?limit=20", headers=headers).get_json()
    for _ in range(40):
        page = client.get(f"/identities?cursor={page['next']}", headers=headers).get_json()
    return {
        "first page": "/identities?limit=20",
        "creator filter": f"/identities?creator={creator_wallet.lower()}",
        "page 41 by cursor": f"/identities?cursor={page['next']}",
        "page=400": "/identities?page=400&limit=20",
        "displayName substring": "/identities?displayName=buteri",
        "two-word q": "/identities/search?q=vital+buter",
    }


def timed(client, headers, url, times):
    begin = time.perf_counter()
    response = client.get(url, headers=headers)
    times.append(time.perf_counter() - begin)
    if response.status_code != 200:
        raise RuntimeError(f"GET {url}: {response.status_code} {response.get_data(as_text=True)[:500]}")
    return response.get_json()["total"]


def measure(targets, key, creator_wallet):
    """{size: {query: (p50 ms, total)}}: sizes take turns, query by query and round by round, so that
    the drift of a shared machine hits every size alike."""
    headers = {"x-api-key": key}
    clients = {size: app.test_client() for size, app in targets.items()}
    urls = {size: queries(client, headers, creator_wallet) for size, client in clients.items()}
    names = list(next(iter(urls.values())))
    samples = {size: {name: [] for name in names} for size in targets}
    totals = {size: {} for size in targets}
    for _ in range(ROUNDS):
        for name in names:
            for size, client in clients.items():
                for _ in range(REPEAT // ROUNDS):
                    totals[size][name] = timed(client, headers, urls[size][name], samples[size][name])
    return {
        size: {name: (statistics.median(samples[size][name]) * 1000, totals[size][name]) for name in names}
        for size in targets
    }


def main():
    from flask_migrate import upgrade

    from identity import create_app, seed

    quick = os.environ.get("BENCH_QUICK") == "1"
    sizes = SIZES[:1] if quick else SIZES[:2] if os.environ.get("BENCH_SKIP_1M") == "1" else SIZES
    settings = {"IDENTITY_RATELIMIT_READ": "100000000/minute", "IDENTITY_RATELIMIT_CREATE": "100000000/minute"}
    with tempfile.TemporaryDirectory(prefix="identity-scale-") as folder:
        first = Path(folder) / f"{sizes[0]}.db"
        app = create_app({"DATABASE_URL": f"sqlite:///{first}", **settings})
        with app.app_context():
            upgrade()
        wallets = [seed.new_wallet() for _ in range(CREATORS)]
        key = seed.issue_key(app, wallets[0], "User")
        for wallet in wallets[1:]:
            seed.issue_key(app, wallet, "User")
        with sqlite3.connect(first) as connection:
            ids = dict(connection.execute("SELECT wallet, id FROM users").fetchall())
        connection.close()
        creator_ids = [ids[wallet] for wallet in wallets]
        # One database per size, each grown from a copy of the one before.
        have, previous, targets = 0, None, {}
        for size in sizes:
            clock = time.monotonic()
            database = Path(folder) / f"{size}.db"
            if previous is not None:
                shutil.copy(previous, database)
            grow(database, have, size, creator_ids)
            have, previous = size, database
            print(f"· {size:,} identities seeded in {time.monotonic() - clock:.1f} s", flush=True)
            targets[size] = create_app({"DATABASE_URL": f"sqlite:///{database}", **settings})
        print_table(measure(targets, key, wallets[1]))


def print_table(results):
    sizes = list(results)
    names = list(results[sizes[0]])
    header = f"{'query (p50 ms, total)':<24}" + "".join(f"{size:>20,}" for size in sizes) + f"{'100k/10k':>10}"
    print("\nBrowse and search, in-process (Flask test client), SQLite")
    print(header)
    print("-" * len(header))
    for name in names:
        cells = "".join(f"{results[size][name][0]:>12.2f} ({results[size][name][1]:>7})" for size in sizes)
        ratio = results[100_000][name][0] / results[10_000][name][0] if 100_000 in results else float("nan")
        print(f"{name:<24}{cells}{ratio:>10.2f}")


if __name__ == "__main__":
    main()
