"""What the in-process benches share (bench/audit.py, bench/console.py): the app on a migrated SQLite database,
with budgets the run cannot spend and no metrics; its wallets with keys and their user ids; and a request timed
through the Flask test client."""

import sqlite3
import statistics
import time

SETTINGS = {"IDENTITY_RATELIMIT_READ": "100000000/minute", "IDENTITY_RATELIMIT_CREATE": "100000000/minute",
            "IDENTITY_METRICS_ENABLED": False}


def app_on(database):
    """The app on the SQLite file `database`, with SETTINGS."""
    from identity import create_app

    return create_app({"DATABASE_URL": f"sqlite:///{database}", **SETTINGS})


def migrated_app(database):
    """app_on(database), its database migrated by the project first."""
    from flask_migrate import upgrade

    app = app_on(database)
    with app.app_context():
        upgrade()
    return app


def wallets_with_keys(app, count):
    """`count` new wallets, each with a key: the first an Admin's, whose key is returned with them, the others
    Users'."""
    from identity import seed

    wallets = [seed.new_wallet() for _ in range(count)]
    admin_key = seed.issue_key(app, wallets[0], "Admin")
    for wallet in wallets[1:]:
        seed.issue_key(app, wallet, "User")
    return wallets, admin_key


def user_ids(database, wallets):
    """The user ids of `wallets`, in their order."""
    with sqlite3.connect(database) as connection:
        ids = dict(connection.execute("SELECT wallet, id FROM users").fetchall())
    connection.close()
    return [ids[wallet] for wallet in wallets]


def median_ms(samples):
    return statistics.median(samples) * 1000


def timed(client, method, url, headers, times, **kwargs):
    """Send one request through the test client, its seconds appended to `times`; anything but a 200 stops the
    bench."""
    begin = time.perf_counter()
    answer = client.open(url, method=method, headers=headers, **kwargs)
    times.append(time.perf_counter() - begin)
    if answer.status_code != 200:
        raise RuntimeError(f"{method} {url}: {answer.status_code} {answer.get_data(as_text=True)[:300]}")
