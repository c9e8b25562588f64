"""Where a GET's time goes, in-process: the project, plain Flask doing the floor's work, and the bare floor.

Each app answers the same GET of a seeded identity, called as gunicorn calls it (the WSGI callable,
a fresh environ per request), with the service's production settings: rate limits (budgets the
loop cannot spend), JSON access logs (to /dev/null) and metrics in multiprocess mode. It prints
microseconds of CPU per request for each, best of BENCH_LAYER_REPEATS runs of BENCH_LAYER_REQUESTS,
then (with --profile) the project's profile by layer: cProfile's cumulative time of each function
that is a layer of the request's path, per request.

    .venv/bin/python bench/layers.py [--profile]
"""

import cProfile
import io
import logging
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
# (label, module path fragment, function name): the layers of a GET, outermost first.
LAYERS = [
    ("Flask: request context, routing, dispatch, response", "flask/app.py", "wsgi_app"),
    ("  before_request hooks", "flask/app.py", "preprocess_request"),
    ("  the view, decorators included", "flask/app.py", "dispatch_request"),
    ("    authentication (flask-httpauth, key cache)", "flask_httpauth.py", "decorated"),
    ("      verify_api_key", "identity/auth.py", "verify_api_key"),
    ("    rate limit", "identity/limits.py", "limited"),
    ("    conditional GET (ETag, 304)", "identity/headers.py", "wrapper"),
    ("    flask-smorest response (schema dump, jsonify)", "flask_smorest/response.py", "wrapper"),
    ("      schema dump", "marshmallow/schema.py", "dump"),
    ("      the query: identity and creator", "identity/service.py", "get_identity"),
    ("  after_request hooks", "flask/app.py", "process_response"),
    ("  teardown: session end, contexts popped", "flask/ctx.py", "pop"),
]


def seeded_database(directory, count=200):
    """A migrated SQLite database with a User key and `count` identities; returns (url, key, ids)."""
    from flask_migrate import upgrade

    from identity import create_app, service
    from identity.schemas import IdentityCreateSchema

    url = f"sqlite:///{directory}/layers.db"
    app = create_app({"DATABASE_URL": url})
    with app.app_context():
        upgrade()
        key, _ = service.issue_key(WALLET, "User")
        from identity.auth import verify_api_key

        caller = verify_api_key(key)
        schema = IdentityCreateSchema()
        ids = [service.create_identity(schema.load({"display_name": f"Layer {n}", "description": "A GET's layers.",
                                                     "image": f"https://example.org/{n}.png"}), caller)["identity_id"]
               for n in range(count)]
        from identity.extensions import db

        db.session.remove()
        db.engine.dispose()
    return url, key, ids


def environ_for(path, key):
    from werkzeug.test import EnvironBuilder

    builder = EnvironBuilder(path=path, headers={"x-api-key": key, "Host": "127.0.0.1"})
    try:
        return builder.get_environ()
    finally:
        builder.close()


def call(app, environ):
    status = []
    body = b"".join(app(dict(environ), lambda s, h, e=None: status.append(s)))
    if not status[0].startswith("200"):
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


def profile_by_layer(app, environs, count):
    profiler = cProfile.Profile()
    profiler.enable()
    for number in range(count):
        call(app, environs[number % len(environs)])
    profiler.disable()
    stats = pstats.Stats(profiler, stream=io.StringIO()).stats
    rows = []
    for label, fragment, name in LAYERS:
        total = sum(entry[3] for (path, _line, function), entry in stats.items()
                    if function == name and fragment in path.replace(os.sep, "/"))
        rows.append((label, total / count * 1e6))
    return rows


def main():
    os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", tempfile.mkdtemp(prefix="layers-metrics-"))
    os.environ["IDENTITY_RATELIMIT_READ"] = os.environ["IDENTITY_RATELIMIT_CREATE"] = "100000000/minute"
    from identity.logs import logging_config

    logging.config.dictConfig(logging_config())
    devnull = open(os.devnull, "w")  # noqa: SIM115 - open for the whole run
    for name in ("", "identity.access"):
        for handler in logging.getLogger(name).handlers:
            handler.setStream(devnull)

    from bench import plain
    from bench.floor import Floor
    from identity import create_app

    directory = tempfile.mkdtemp(prefix="identity-layers-")
    url, key, ids = seeded_database(directory)
    floor = Floor(url.removeprefix("sqlite:///"))
    apps = {"bare floor": floor, "plain Flask": plain.create_app(floor), "project": create_app({"DATABASE_URL": url})}
    environs = [environ_for(f"/identity/{identity_id}", key) for identity_id in ids]
    for app in apps.values():  # warm: connections opened, keys cached, first-call work done
        for environ in environs:
            call(app, environ)
    print(f"GET, in-process, best of {REPEATS} x {REQUESTS} requests (CPU µs per request):")
    figures = {name: per_request_us(app, environs) for name, app in apps.items()}
    for name, figure in figures.items():
        print(f"  {name:<12} {figure:7.1f} µs   ({figures['plain Flask'] / figure:4.2f} of plain Flask's rate)")
    if "--profile" in sys.argv:
        print()
        print("The project's GET by layer (cProfile cumulative µs per request; profiling inflates every figure):")
        for label, figure in profile_by_layer(apps["project"], environs, REQUESTS):
            print(f"  {label:<52} {figure:7.1f}")


if __name__ == "__main__":
    main()
