"""What a request costs in instructions, counted by valgrind: a figure that does not move with the machine.

CPU time per request swings by up to half from one run to the next on a shared machine (the same
code, docs/performance.md, "What moves the ratios"); the number of instructions a process executes
does not. valgrind's cachegrind counts them (user space only: the kernel's side of a write, such as
SQLite's commit to the WAL, is not in it). Each figure is the difference between two runs of the same
process, one answering N1 requests and one N2, divided by N2 - N1: start-up, imports and the warm-up
cancel out, and what is left is the requests' own work. Work done once an interval rather than once
a request (a key read again, last_login written) is put off past the runs. Two runs of the same
database agree to within 0.1%; two runs of databases seeded apart (random keys and ids), to within
0.5%, which is some 10,000 instructions in a layer's figure (a difference of two).

It prints, for GET and POST (a create each), the instructions per request of the bare floor, of plain
Flask doing the floor's work and of the project; then what each of the project's layers costs a
request, measured by taking it out alone (the access line, the metrics, the rate limit, and for a
create the body's validation and the response's dump); then what SQLAlchemy's Connection costs per
use, beside the driver.

    .venv/bin/python bench/instructions.py        # about 8 minutes on 2 cores; needs valgrind

It is a diagnosis, not a target: `make bench` does not run it.
"""

import gc
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

COUNTS = {"get": (100, 400), "post": (50, 250), "snippet": (200, 600)}
WARM = 30
TIMED_WORK_SECONDS = 86_400
# Each of the project's layers, taken out alone for one measurement: {name: (what it is, the operations
# it has a part in)}. A GET's body is dumped once for each state of its row (identity.representation).
LAYERS = {
    "log": ("the access line (logging)", ("get", "post")),
    "metrics": ("the metrics (prometheus_client)", ("get", "post")),
    "limits": ("the rate limit (limits)", ("get", "post")),
    "load": ("the body's validation (marshmallow load)", ("post",)),
    "dump": ("the response's dump (marshmallow dump)", ("post",)),
}
# SQLAlchemy's own work per use, beside the driver's: {name: (what it is, statement)}, run in an app context.
SNIPPETS = {
    "connect": ("Engine.connect() and close()", "with engine.connect():\n    pass"),
    "raw_connect": ("Engine.raw_connection() and close() (the pool alone)", "engine.raw_connection().close()"),
    "exec": ("Connection.exec_driver_sql('SELECT 1')", "connection.exec_driver_sql('SELECT 1')"),
    "driver": ("the driver's own execute('SELECT 1')", "dbapi.execute('SELECT 1')"),
    "nothing": ("nothing (the loop itself)", "pass"),
}
_REFS = re.compile(r"I\s+refs:\s+([\d,]+)")


def instruction_refs(valgrind_output):
    """The total of instructions executed ("I refs") in cachegrind's summary; None if absent."""
    found = _REFS.search(valgrind_output)
    return None if found is None else int(found.group(1).replace(",", ""))


def per_request(command, counts):
    """Instructions per request of `command` (a list, run under cachegrind with the request count
    appended): the difference between its runs at counts[0] and counts[1], over their difference."""
    totals = []
    for count in counts:
        result = subprocess.run(
            ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null", *command, str(count)],
            capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": "0"},
        )
        refs = instruction_refs(result.stderr)
        if result.returncode != 0 or refs is None:
            raise RuntimeError(f"{' '.join(command)} {count} failed under valgrind:\n{result.stderr[-2000:]}")
        totals.append(refs)
    return (totals[1] - totals[0]) / (counts[1] - counts[0])


def seed(folder, count=200):
    """The database every measurement starts from (a copy each): bench/layers.py's, in `folder`."""
    from bench.layers import seeded_database

    _url, key, ids = seeded_database(folder, count)
    Path(folder, "seed.json").write_text(json.dumps({"key": key, "ids": ids}))


@contextmanager
def measured_app(seed_folder, target, variant):
    """`target`'s app (with one layer taken out: `variant`) on a copy of the seeded database, and the
    seed's key and ids; the copy is removed after."""
    os.environ["IDENTITY_RATELIMIT_READ"] = os.environ["IDENTITY_RATELIMIT_CREATE"] = "100000000/minute"
    # Work done once an interval (a key read again when its cache entry ends, last_login written) would
    # fall into runs that valgrind makes 50 times slower, and not as often into the shorter run: out.
    os.environ["IDENTITY_KEY_CACHE_SECONDS"] = str(TIMED_WORK_SECONDS)
    os.environ["IDENTITY_LAST_LOGIN_INTERVAL"] = str(TIMED_WORK_SECONDS)
    from bench.layers import logs_as_the_server_writes_them

    seeded = json.loads(Path(seed_folder, "seed.json").read_text())
    work = tempfile.mkdtemp(prefix="identity-instructions-")
    shutil.copy(Path(seed_folder, "layers.db"), work)
    logs_as_the_server_writes_them()
    try:
        yield _app(target, f"sqlite:///{work}/layers.db", variant), seeded
    finally:
        shutil.rmtree(work, ignore_errors=True)


def child(seed_folder, target, operation, variant, count):
    """Under valgrind: answer `count` requests (after WARM) with `target`, one layer taken out (variant)."""
    with measured_app(seed_folder, target, variant) as (app, seeded):
        if operation == "snippet":
            _snippet(app, variant, count)
        else:
            warmed(app, seeded, operation)(count)


def warmed(app, seeded, operation):
    """Warm `app` up for `operation`; returns a function that answers the first n measured requests:
    the same warm-up and requests for every measurement."""
    from bench.layers import call, environ_for, post_environs

    key, ids = seeded["key"], seeded["ids"]
    # Both runs make the environs of the larger count: only the requests answered differ.
    most = COUNTS[operation][1]
    if operation == "post":
        warm, environs = post_environs(key, WARM, "warm"), post_environs(key, most, "measured")
    else:
        # Every id is read once first: each measured GET finds its body made (identity.representation).
        warm = [environ_for(f"/identity/{identity_id}", key) for identity_id in ids]
        environs = [environ_for(f"/identity/{ids[n % len(ids)]}", key) for n in range(most)]
    for environ in warm:
        call(app, environ)
    # As gunicorn.conf.py does after start-up: what is made so far is left out of the collector's full
    # passes, whose turn would otherwise fall in one run and not in the other (a count off by 10%).
    gc.collect()
    gc.freeze()

    def answer(count):
        for environ in environs[:count]:
            call(app, environ)

    return answer


def _app(target, url, variant):
    from bench import plain
    from bench.floor import Floor

    floor = Floor(url.removeprefix("sqlite:///"), last_login_interval=TIMED_WORK_SECONDS)
    if target == "floor":
        return floor
    if target == "plain":
        return plain.create_app(floor)
    from identity import create_app

    app = create_app({"DATABASE_URL": url, **({"IDENTITY_METRICS_ENABLED": False} if variant == "metrics" else {})})
    # The other layers are taken out in this process alone, for the measurement: the service has no switch for them.
    if variant == "log":
        logging.getLogger("identity.access").disabled = True
    elif variant == "limits":
        from identity import limits

        with app.app_context():
            window = limits.rate_limits(app).spend("create", "instructions")
        limits.RateLimits.spend = lambda _self, _budget, _key_id: window
    elif variant == "load":
        from identity.schemas import identity_create_schema

        identity_create_schema.load = lambda data, **_options: data  # the bodies sent are valid
    elif variant == "dump":
        from identity.schemas import identity_schema

        identity_schema.dump = lambda obj, **_options: {"identity_id": obj["identity_id"]}
    return app


def _snippet(app, name, count):
    from identity.extensions import db

    with app.app_context():
        engine = db.engine
        with engine.connect() as connection:
            dbapi = connection.connection.dbapi_connection
            names = {"engine": engine, "connection": connection, "dbapi": dbapi}
            code = compile(SNIPPETS[name][1], name, "exec")
            for _ in range(WARM + count):
                exec(code, names)  # noqa: S102 - the bench's own statements


def main():
    if shutil.which("valgrind") is None:
        sys.exit("bench/instructions.py counts instructions with valgrind: install it (apt-get install valgrind).")
    metrics = tempfile.TemporaryDirectory(prefix="instructions-metrics-", ignore_cleanup_errors=True)
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics.name
    folder = tempfile.TemporaryDirectory(prefix="identity-instructions-", ignore_cleanup_errors=True)
    seed(folder.name)
    jobs = [(target, operation, "-") for operation in ("get", "post") for target in ("floor", "plain", "project")]
    jobs += [("project", operation, layer) for layer, (_what, operations) in LAYERS.items() for operation in operations]
    jobs += [("project", "snippet", name) for name in SNIPPETS]

    def measure(job):
        target, operation, variant = job
        command = [sys.executable, __file__, "--child", folder.name, target, operation, variant]
        return job, per_request(command, COUNTS[operation])

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        report(dict(pool.map(measure, jobs)))


def report(figures):
    print("Instructions per request (valgrind's cachegrind, user space; a GET finds its body made):")
    print(f"  {'':6} {'bare floor':>12} {'plain Flask':>12} {'project':>12}   project / plain Flask")
    for operation in ("get", "post"):
        floor, plain, project = (figures[(target, operation, "-")] for target in ("floor", "plain", "project"))
        print(f"  {operation.upper():6} {floor:12,.0f} {plain:12,.0f} {project:12,.0f}   {project / plain:.2f}")
    print("What each of the project's layers costs a request (the instructions saved with it taken out alone):")
    print(f"  {'':44} {'GET':>17} {'POST':>17}")
    for layer, (what, operations) in LAYERS.items():
        cells = []
        for operation in ("get", "post"):
            whole = figures[("project", operation, "-")]
            saved = whole - figures[("project", operation, layer)] if operation in operations else None
            cells.append(f"{'':>17}" if saved is None else f"{saved:9,.0f} {saved / whole:6.1%} ")
        print(f"  {what:<44} {''.join(cells)}")
    loop = figures[("project", "snippet", "nothing")]
    print("SQLAlchemy's Connection, per use (in an app context, no request; the loop's own cost taken off):")
    for name, (what, _statement) in SNIPPETS.items():
        if name != "nothing":
            print(f"  {what:<54} {figures[('project', 'snippet', name)] - loop:10,.0f}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(*sys.argv[2:6], int(sys.argv[6]))
        os._exit(0)  # the interpreter's shutdown is the same in both runs; skipping it saves time under valgrind
    main()
