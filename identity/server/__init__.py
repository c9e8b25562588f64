"""What gunicorn.conf.py's hooks call: the files a server's workers share, the JSON logs, what each worker
does as it starts and stops, and the turns of a gevent worker's requests.

The app learns what it needs from the server through its config, set as each worker starts
(worker_started): the folder of the metrics every worker writes, and the file of the rate-limit counts
they share.
"""

import gc
import logging
import os
import resource
import shutil
import signal
import sys
import threading
from pathlib import Path

from gunicorn.glogging import Logger

from .files import make_server_folder, sweep_left_behind

# Files the workers share live in /dev/shm (memory, whose pages are never written back to a disk) unless
# TMPDIR names another place, in folders made before any worker forks and removed when the server exits
# (or, if it is killed outright, when the next one starts: identity.server.files).
# Only ever a parent: each server's folder in it is mkdtemp's, held by a lock (identity.server.files).
SHM = "/dev/shm"  # nosec B108
SHARED_DIR = SHM if not os.environ.get("TMPDIR") and os.access(SHM, os.W_OK | os.X_OK) else None
# What this server made, by what the app calls it in its config: {setting: path}.
made = {}


def prepare():
    """In the master, as gunicorn.conf.py is read, before anything imports prometheus_client: the folder
    of the workers' metrics (prometheus_client's multiprocess mode, which it reads from
    PROMETHEUS_MULTIPROC_DIR as it is first imported), and the file of the shared rate-limit counts.
    A reload runs it again and keeps what was made."""
    if "IDENTITY_METRICS_DIR" not in made:
        given = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
        if given:
            Path(given).mkdir(parents=True, exist_ok=True)
        else:
            sweep_left_behind("identity-metrics-")
            made["own metrics"] = os.environ["PROMETHEUS_MULTIPROC_DIR"] = make_server_folder("identity-metrics-")
        made["IDENTITY_METRICS_DIR"] = os.environ["PROMETHEUS_MULTIPROC_DIR"]
    if "IDENTITY_RATELIMIT_COUNTS_FILE" not in made:
        from ..web.shared_counts import create_counts_file

        sweep_left_behind("identity-ratelimit-", SHARED_DIR)
        path = os.path.join(make_server_folder("identity-ratelimit-", SHARED_DIR), "counts")
        create_counts_file(path)
        made["IDENTITY_RATELIMIT_COUNTS_FILE"] = path


def check_settings(worker_class, threads, worker_connections):
    """Stop the server with a message where its settings say what they do not mean: threads serve requests
    only in the gthread worker, and gunicorn would turn any other worker class given threads into gthread,
    silently. Then raise the process's limit of open files as far as its hard limit allows, so that a
    worker reaches `worker_connections` (many systems start a process with a soft limit of 1024)."""
    if threads > 1 and worker_class not in ("gthread", "gunicorn.workers.gthread.ThreadWorker"):
        raise SystemExit(
            f"Error: GUNICORN_THREADS={threads} needs GUNICORN_WORKER_CLASS=gthread (it is {worker_class}): "
            "only the gthread worker serves with threads."
        )
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = worker_connections + 256
    if soft != resource.RLIM_INFINITY and soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted if hard == resource.RLIM_INFINITY else min(wanted, hard), hard))


def logging_config(level):
    """The JSON logging of identity.web.logs, for gunicorn's logconfig_dict."""
    from ..web.logs import logging_config as config

    return config(level)


class AppWritesTheAccessLine(Logger):
    """gunicorn's logger (its documented logger_class setting), saying that gunicorn's own access line is
    off, as it is here: the app writes a richer one. gunicorn counts its access line as on whenever
    logconfig_dict is given, and its workers ask access_log_enabled before they build each request's line
    (some twenty atoms) for a logger that has no handler."""

    @property
    def access_log_enabled(self):
        return False


def starting():
    """In the master, once, before any worker: samples a previous run left in a metrics folder the operator
    gave would otherwise be added to this run's."""
    for stale in Path(made["IDENTITY_METRICS_DIR"]).glob("*.db"):
        stale.unlink()


def worker_started(worker):
    """In each worker, once its app is loaded: the app's server settings, the end of open streams on
    SIGTERM, the loaded objects out of the collector's sight, the turns of a gevent worker's requests, and
    the background work (identity.background)."""
    from .. import background
    from ..web import budgets

    app = worker.wsgi
    is_the_service = hasattr(app, "config") and "IDENTITY_DID_NAMESPACE" in app.config
    if is_the_service:  # gunicorn.conf.py also serves the benchmark's floors, which have none of this
        app.config.update({name: path for name, path in made.items() if name.startswith("IDENTITY_")})
        budgets.share_counts(app, made["IDENTITY_RATELIMIT_COUNTS_FILE"])
    handler = signal.getsignal(signal.SIGTERM)

    def end_streams_then_stop(signum, frame):
        # Open event streams and long polls end at once (their clients resume with Last-Event-ID), so that
        # the stop waits on none of them; then gunicorn's own handler stops the worker.
        in_background(background.end_streams)
        if callable(handler):
            handler(signum, frame)

    signal.signal(signal.SIGTERM, end_streams_then_stop)
    freeze_loaded_objects()
    if under_gevent():
        from .fairness import Turns

        turns.append(Turns())
    if is_the_service:
        background.start(app)


def freeze_loaded_objects():
    """Move everything the worker holds once the app is loaded out of the garbage collector's sight.

    The loaded app is a great many objects (Flask, SQLAlchemy, marshmallow, the OpenAPI spec), none of
    them ever garbage. A full collection walks them all, and the worker answers nobody meanwhile (how many,
    and for how long: docs/performance.md, "Figures behind the code's choices"). gc.freeze() (Python's documented remedy) leaves the
    collector only what requests create.
    """
    gc.collect()
    gc.freeze()


# A gevent worker's queue of requests waiting for the CPU (identity.server.fairness); nothing elsewhere.
turns = []


def request_read(worker, req):
    """In a gevent worker, once a request is read: it waits for those read before it."""
    for queue in turns:
        queue.take(req.method)


def worker_exiting(worker):
    """In the worker, as it exits: its background work stops, and the webhook lease is given up at once."""
    from .. import background

    app = worker.wsgi
    if hasattr(app, "config") and "IDENTITY_DID_NAMESPACE" in app.config:
        background.stop(app, timeout=2)


def worker_interrupted(worker):
    """On Ctrl-C (SIGINT) or the master's quick shutdown (SIGQUIT), gunicorn ends the worker by sys.exit in a
    greenlet, which gevent's hub would print as a SystemExit traceback amid the JSON log lines. It is the
    expected end of the worker: one log line says so, and the hub prints nothing more."""
    worker.log.info("Worker stopping on SIGINT or SIGQUIT (pid: %s)", worker.pid)
    if under_gevent():
        import gevent

        gevent.get_hub().exception_stream = None


def worker_gone(pid):
    """In the master, once a worker has exited: its counters stay (totals must not go down), its gauges go."""
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(pid, made["IDENTITY_METRICS_DIR"])


def exiting():
    """In the master, as the server exits: the folders it made go."""
    for name, path in made.items():
        if name == "own metrics":
            shutil.rmtree(path, ignore_errors=True)
        elif name == "IDENTITY_RATELIMIT_COUNTS_FILE":
            shutil.rmtree(os.path.dirname(path), ignore_errors=True)


def under_gevent():
    if "gevent" not in sys.modules:
        return False
    from gevent import monkey

    return monkey.is_module_patched("threading")


def in_background(function):
    """Run `function` elsewhere than in a signal handler, which must not wait: under gevent it runs in the
    event loop, where only spawning a greenlet is allowed (gunicorn's gevent worker does the same)."""
    if under_gevent():
        import gevent

        gevent.spawn(function)
    else:
        threading.Thread(target=function, daemon=True).start()


log = logging.getLogger(__name__)
