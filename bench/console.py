"""`make bench`, the Admin console: the identities page against the listing request it makes, at 1,000,000 identities.

The console's identities page calls the same browse.list_identities as GET /identities, then renders the page:
the goal (the contract) is that the page answers within twice the time of the listing request alone. Both are
timed in-process through the Flask test client on the same SQLite database (an Admin's listing, as the console
makes it), taking turns, BENCH_CONSOLE_REPEAT (200) times each, for three listings: the first page, a
two-word search and a creator's identities.

The database is filled as bench/scale.py fills it (the project's content addressing, the migration's
triggers). Settings: BENCH_CONSOLE_IDENTITIES (1,000,000; BENCH_QUICK=1 or BENCH_SKIP_1M=1 make it 10,000),
BENCH_CONSOLE_REPEAT.
"""

import os
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.inprocess import app_on, median_ms, migrated_app, timed, user_ids, wallets_with_keys  # noqa: E402
from bench.run import SKIP_SCALE  # noqa: E402 - BENCH_QUICK=1 or BENCH_SKIP_1M=1
from bench.scale import grow  # noqa: E402

SIZE = int(os.environ.get("BENCH_CONSOLE_IDENTITIES") or (10_000 if SKIP_SCALE else 1_000_000))
REPEAT = int(os.environ.get("BENCH_CONSOLE_REPEAT") or 200)
CREATORS = 10
GOAL = 2.0


def signed_in_console(app, key):
    """A test client signed in to the console with `key`, through its form."""
    client = app.test_client()
    page = client.get("/admin/sign-in").get_data(as_text=True)
    form_token = re.search(r'name="form_token" value="([^"]+)"', page).group(1)
    answer = client.post("/admin/sign-in", data={"form_token": form_token, "key": key},
                         headers={"Origin": "http://localhost"})
    assert answer.status_code == 303, answer.get_data(as_text=True)[-500:]
    return client


def main():
    with tempfile.TemporaryDirectory(prefix="identity-console-") as folder:
        database = Path(folder) / "identity.db"
        app = migrated_app(database)
        wallets, admin_key = wallets_with_keys(app, CREATORS)
        creator_ids = user_ids(database, wallets)
        clock = time.monotonic()
        grow(database, 0, SIZE, creator_ids)
        print(f"· {SIZE:,} identities seeded in {time.monotonic() - clock:.1f} s", flush=True)

        app = app_on(database)
        api, console = app.test_client(), signed_in_console(app, admin_key)
        key = {"x-api-key": admin_key}
        listings = {
            "first page": "",
            "two-word q": "?q=vital+buter",
            "creator filter": f"?creator={wallets[1].lower()}",
        }
        print(f"\nAdmin console, identities page against its listing request: p50 ms over {REPEAT}, "
              f"{SIZE:,} identities, SQLite, in-process")
        print(f"{'listing':<16}{'GET /identities':>18}{'/admin/identities':>20}{'ratio':>8}  goal <= {GOAL}")
        for name, query in listings.items():
            samples = {"api": [], "console": []}
            for _ in range(REPEAT):
                timed(api, "GET", "/identities" + query, key, samples["api"])
                timed(console, "GET", "/admin/identities" + query, {}, samples["console"])
            api_ms, console_ms = (median_ms(samples[side]) for side in ("api", "console"))
            ratio = console_ms / api_ms
            verdict = "met" if ratio <= GOAL else "MISSED"
            print(f"{name:<16}{api_ms:>18.2f}{console_ms:>20.2f}{ratio:>8.2f}  {verdict}", flush=True)


if __name__ == "__main__":
    main()
