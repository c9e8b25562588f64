"""Where a GET's (or, with --post, a create's) time goes, in-process: the project, plain Flask doing
the floor's work, and the bare floor.

Each app answers the same GET of a seeded identity, called as gunicorn calls it (the WSGI callable,
a fresh environ per request), with the service's production settings: rate limits (budgets the
loop cannot spend), JSON access logs (to /dev/null) and metrics in multiprocess mode. It prints
microseconds of CPU per request for each, best of BENCH_LAYER_REPEATS runs of BENCH_LAYER_REQUESTS,
then (with --profile) the profile of the project's GET and of plain Flask's by layer: the own time of
every function, summed by the package that holds its code.

    .venv/bin/python bench/layers.py [--post] [--profile]

With --post each app answers POST /identity of bodies no app has seen (a create each), over a
database that grows as they write; the order of the apps alternates from run to run.
"""

import cProfile
import io
import logging
import logging.config
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

REQUESTS = int(os.environ.get("BENCH_LAYER_REQUESTS") or 3000)
REPEATS = int(os.environ.get("BENCH_LAYER_REPEATS") or 5)
WALLET = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"
# Where a function's own time is counted: the package (or standard module) its code lives in.
SITE = "site-packages" + os.sep
STDLIB_GROUPS = {"logging": "logging (stdlib)", "json": "json (stdlib)", "uuid": "uuid (stdlib)"}


def seeded_database(directory, count=200):
    """A migrated SQLite database with a User key and `count` identities; returns (url, key, ids)."""
    from flask_migrate import upgrade

    from identity import create_app
    from identity.core import identities as service
    from identity.core import keys
    from identity.schemas import IdentityCreateSchema

    url = f"sqlite:///{directory}/layers.db"
    app = create_app({"DATABASE_URL": url})
    with app.app_context():
        upgrade()
        key, _ = keys.issue_key(WALLET, "User")
        caller = keys.caller_of(key)
        schema = IdentityCreateSchema()
        ids = [service.create_identity(schema.load({"display_name": f"Layer {n}", "description": "A GET's layers.",
                                                     "image": f"https://example.org/{n}.png"}), caller)["identity_id"]
               for n in range(count)]
        from identity.storage.database import db

        db.session.remove()
        db.engine.dispose()
    return url, key, ids


def environ_for(path, key, **options):
    """The WSGI environ of a request to `path` with `key`; `options` are EnvironBuilder's (method, json)."""
    from werkzeug.test import EnvironBuilder

    builder = EnvironBuilder(path=path, headers={"x-api-key": key, "Host": "127.0.0.1"}, **options)
    try:
        return builder.get_environ()
    finally:
        builder.close()


def post_environs(key, count, tag):
    """`count` environs of POST /identity, each with a body no other has (a create each)."""
    tag = tag.replace(" ", "-")  # it goes into a URL
    return [
        environ_for("/identity", key, method="POST", json={
            "display_name": f"Layer {tag} {number}", "description": "A create's layers.",
            "image": f"https://example.org/{tag}/{number}.png"})
        for number in range(count)
    ]


def logs_as_the_server_writes_them():
    """Logging as gunicorn.conf.py sets it (JSON lines, the access line included), written to /dev/null."""
    from identity.web.logs import logging_config

    logging.config.dictConfig(logging_config())
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
    devnull = open(os.devnull, "w")  # noqa: SIM115 - open until the process ends
    for name in ("", "identity.access"):
        for handler in logging.getLogger(name).handlers:
            handler.setStream(devnull)


def call(app, environ):
    status = []
    body = b"".join(app(dict(environ), lambda s, h, e=None: status.append(s)))
    if status[0][:3] not in ("200", "201"):
        raise RuntimeError(f"{status[0]}: {body[:300]!r}")
    return body


def per_request_us(app, environs):
    """Best of REPEATS: CPU microseconds per request over REQUESTS requests."""
    best = float("inf")
    for _ in range(REPEATS):
        started = time.process_time()
        for number in range(REQUESTS):
            call(app, environs[number % len(environs)])
        best = min(best, (time.process_time() - started) / REQUESTS * 1e6)
    return best


def layer_of(path, function):
    """The layer a function belongs to: its package under site-packages, the project, or Python itself."""
    if path == "~":  # a built-in: a C function or method
        return "sqlite3 (the driver, C)" if "sqlite3" in function else "Python built-ins"
    if SITE in path:
        return path.split(SITE, 1)[1].split(os.sep, 1)[0].removesuffix(".py")
    if f"{os.sep}identity{os.sep}" in path:
        return "identity (the project's own code)"
    if f"{os.sep}bench{os.sep}" in path:
        return "bench (the floor's own code)"
    module = Path(path).stem if Path(path).parent.name.startswith("python3") else Path(path).parent.name
    return STDLIB_GROUPS.get(module, "Python standard library")


def profile_by_layer(app, environs, count):
    """{layer: share of the request's own time}: cProfile's own time of each function, summed by layer.

    Own time, not cumulative: each microsecond is counted once, in the layer whose code spent it.
    """
    profiler = cProfile.Profile()
    profiler.enable()
    for number in range(count):
        call(app, environs[number % len(environs)])
    profiler.disable()
    stats = pstats.Stats(profiler, stream=io.StringIO()).stats
    layers = {}
    for (path, _line, function), entry in stats.items():
        layer = layer_of(path, function)
        layers[layer] = layers.get(layer, 0.0) + entry[2]
    total = sum(layers.values())
    return {layer: spent / total for layer, spent in sorted(layers.items(), key=lambda item: -item[1])}


def main():
    # The folders made here go when main returns (the creates' database grows to 100 MB).
    metrics = None
    if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        metrics = tempfile.TemporaryDirectory(prefix="layers-metrics-", ignore_cleanup_errors=True)
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics.name
    os.environ["IDENTITY_RATELIMIT_READ"] = os.environ["IDENTITY_RATELIMIT_CREATE"] = "100000000/minute"
    from bench import plain
    from bench.floor import Floor
    from identity import create_app

    folder = tempfile.TemporaryDirectory(prefix="identity-layers-", ignore_cleanup_errors=True)
    url, key, ids = seeded_database(folder.name)
    # After the seeding: its migrations configure logging from alembic.ini (the root logger at WARNING),
    # which would silence the access line.
    logs_as_the_server_writes_them()
    floor = Floor(url.removeprefix("sqlite:///"))
    apps = {"bare floor": floor, "plain Flask": plain.create_app(floor), "project": create_app({"DATABASE_URL": url})}
    if "--post" in sys.argv:
        return creates(apps, key)
    environs = [environ_for(f"/identity/{identity_id}", key) for identity_id in ids]
    for app in apps.values():  # warm: connections opened, keys cached, first-call work done
        for environ in environs:
            call(app, environ)
    print(f"GET, in-process, best of {REPEATS} x {REQUESTS} requests (CPU µs per request):")
    figures = {name: per_request_us(app, environs) for name, app in apps.items()}
    report(apps, figures, lambda name: environs)


def creates(apps, key):
    """The --post half: each app creates REQUESTS identities per run, REPEATS runs, order alternating."""
    for name, app in apps.items():  # warm
        for environ in post_environs(key, 50, f"warm-{name}"):
            call(app, environ)
    figures = {name: float("inf") for name in apps}
    for repeat in range(REPEATS):
        for name in list(apps)[:: 1 if repeat % 2 == 0 else -1]:
            environs = post_environs(key, REQUESTS, f"{name}-{repeat}")
            started = time.process_time()
            for environ in environs:
                call(apps[name], environ)
            figures[name] = min(figures[name], (time.process_time() - started) / REQUESTS * 1e6)
    print(f"POST (a create each), in-process, best of {REPEATS} x {REQUESTS} requests (CPU µs per request):")
    # A body is created once: each app's profile gets bodies of its own.
    report(apps, figures, lambda name: post_environs(key, REQUESTS, f"profile-{name}"))


def report(apps, figures, sample):
    """Print `figures` ({app: CPU µs}); with --profile, each app's layers over the environs `sample(name)` gives."""
    for name, figure in figures.items():
        print(f"  {name:<12} {figure:7.1f} µs   ({figures['plain Flask'] / figure:4.2f} of plain Flask's rate)")
    if "--profile" in sys.argv:
        for name in ("project", "plain Flask"):
            print()
            print(f"{name}: a request's time by layer (each function's own time, by the package it is in; cProfile's "
                  f"shares applied to the {figures[name]:.0f} µs measured without it)")
            environs = sample(name)
            for layer, share in profile_by_layer(apps[name], environs, len(environs)).items():
                if share >= 0.005:
                    print(f"  {layer:<36} {share * figures[name]:6.0f} µs  {share:6.1%}")


if __name__ == "__main__":
    main()
