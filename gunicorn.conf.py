"""gunicorn's settings for production: `gunicorn -c gunicorn.conf.py app:app` (what `make run` does).

Every setting reads an environment variable first; GUNICORN_CMD_ARGS can override any other
gunicorn setting on top (gunicorn applies it after this file).
"""

import multiprocessing
import os
import shutil
import tempfile
from pathlib import Path


def _env_int(name, default):
    raw = os.environ.get(name, "").strip()
    return int(raw) if raw else default


def _bind_address():
    host = os.environ.get("HOST") or "127.0.0.1"
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"  # an IPv6 address
    return f"{host}:{_env_int('PORT', 8000)}"


bind = os.environ.get("GUNICORN_BIND") or _bind_address()
# The usual rule for synchronous workers: two per core, plus one.
workers = _env_int("WEB_CONCURRENCY", 2 * multiprocessing.cpu_count() + 1)
worker_class = os.environ.get("GUNICORN_WORKER_CLASS") or "sync"
threads = _env_int("GUNICORN_THREADS", 1)
# A worker silent this long is killed and replaced.
timeout = _env_int("GUNICORN_TIMEOUT", 30)
# On SIGTERM, workers finish the requests they hold for up to this long before they are killed.
graceful_timeout = _env_int("GUNICORN_GRACEFUL_TIMEOUT", 30)
# Seconds an idle keep-alive connection is held (threaded and async workers; sync ones close).
keepalive = _env_int("GUNICORN_KEEPALIVE", 5)
# Recycle workers now and then, so that a slow leak cannot grow without bound (0: never).
max_requests = _env_int("GUNICORN_MAX_REQUESTS", 0)
max_requests_jitter = _env_int("GUNICORN_MAX_REQUESTS_JITTER", 0)

# prometheus_client picks its multiprocess mode when it is first imported, so the directory must be
# in the environment, and exist, before anything imports it: here, in the master, before the import
# of identity below and before any worker forks. Without one given, a fresh directory is made, and
# removed when the server exits. (The marker survives a reload, which runs this file again.)
if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = os.environ["IDENTITY_OWN_METRICS_DIR"] = tempfile.mkdtemp(
        prefix="identity-metrics-"
    )
Path(os.environ["PROMETHEUS_MULTIPROC_DIR"]).mkdir(parents=True, exist_ok=True)

from prometheus_client import multiprocess  # noqa: E402

from identity.config import settings_from_env  # noqa: E402
from identity.logs import logging_config  # noqa: E402

# Logs: JSON lines, the app's access line on stdout, everything else (gunicorn's own lines
# included) on stderr.

loglevel = settings_from_env()["IDENTITY_LOG_LEVEL"].lower()
errorlog = "-"
accesslog = None
logconfig_dict = logging_config(loglevel.upper())


def on_starting(server):
    # Once per master, before any worker: samples a previous run left in a directory the operator
    # gave would otherwise be added to this run's.
    for stale in Path(os.environ["PROMETHEUS_MULTIPROC_DIR"]).glob("*.db"):
        stale.unlink()


def child_exit(server, worker):
    # A dead worker's counters stay (totals must not go down); its live gauges go.
    multiprocess.mark_process_dead(worker.pid)


def on_exit(server):
    directory = os.environ["PROMETHEUS_MULTIPROC_DIR"]
    if directory == os.environ.get("IDENTITY_OWN_METRICS_DIR"):
        shutil.rmtree(directory, ignore_errors=True)
