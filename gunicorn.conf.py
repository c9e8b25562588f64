"""gunicorn's settings for production: `gunicorn -c gunicorn.conf.py app:app` (what `make run` does).

Every setting reads an environment variable first; GUNICORN_CMD_ARGS can override any other
gunicorn setting on top (gunicorn applies it after this file).
"""

import ctypes
import gc
import logging
import multiprocessing
import os
import resource
import shutil
import signal
import socket
import struct
import sys
import threading
import time
from pathlib import Path

# The folders this server makes are held by its processes; those that a server killed outright left
# behind are removed when another starts (identity/server_files.py, which imports no metrics).
from identity.server.files import make_server_folder, sweep_left_behind

# prometheus_client picks its multiprocess mode when it is first imported, so the directory must be
# in the environment, and exist, before anything imports it: here, in the master, before the import
# of identity below and before any worker forks. Without one given, a fresh directory is made, and
# removed when the server exits. (The marker survives a reload, which runs this file again.)
if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
    sweep_left_behind("identity-metrics-")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = os.environ["IDENTITY_OWN_METRICS_DIR"] = make_server_folder(
        "identity-metrics-"
    )
Path(os.environ["PROMETHEUS_MULTIPROC_DIR"]).mkdir(parents=True, exist_ok=True)

from gunicorn.glogging import Logger  # noqa: E402
from prometheus_client import multiprocess  # noqa: E402

from identity.config import settings_from_env  # noqa: E402
from identity.server.balance import FILE_VARIABLE as LOADS_FILE_VARIABLE  # noqa: E402
from identity.server.balance import create_loads_file  # noqa: E402
from identity.web.limits import COUNTS_FILE_VARIABLE  # noqa: E402
from identity.web.logs import logging_config  # noqa: E402
from identity.web.redact import redact_keys  # noqa: E402
from identity.web.shared_counts import create_counts_file  # noqa: E402

_settings = settings_from_env()

# Files the workers share, each made here in the master before any worker forks, in a fresh directory
# in TMPDIR if it is set, else in /dev/shm (memory, whose pages are never written back to a disk),
# and removed when the server exits (or, if it is killed outright, when the next one starts). Each
# is named by an environment variable, which survives a reload (which runs this file again); a
# second one says that this server made it.
_SHARED_DIR = "/dev/shm" if not os.environ.get("TMPDIR") and os.access("/dev/shm", os.W_OK | os.X_OK) else None
_SHARED_FILES = (
    # Rate limits counted in memory, shared by this server's workers (identity/shared_counts.py).
    (COUNTS_FILE_VARIABLE, "IDENTITY_OWN_COUNTS_FILE", "identity-ratelimit-", "counts", create_counts_file),
    # The busy clients of each worker (identity/balance.py).
    (LOADS_FILE_VARIABLE, "IDENTITY_OWN_WORKER_LOADS_FILE", "identity-workers-", "loads", create_loads_file),
)
for _variable, _own, _prefix, _name, _create in _SHARED_FILES:
    if not os.environ.get(_variable):
        sweep_left_behind(_prefix, _SHARED_DIR)
        os.environ[_variable] = os.environ[_own] = os.path.join(make_server_folder(_prefix, _SHARED_DIR), _name)
    if not os.path.exists(os.environ[_variable]):
        _create(os.environ[_variable])


def _env_int(name, default):
    raw = os.environ.get(name, "").strip()
    return int(raw) if raw else default


def _bind_address():
    host = os.environ.get("HOST") or "127.0.0.1"
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"  # an IPv6 address
    return f"{host}:{_env_int('PORT', 8000)}"


bind = os.environ.get("GUNICORN_BIND") or _bind_address()

# The worker. gevent's by default: each connection is a greenlet, so a client that sends its request
# one byte a second, or says nothing at all, holds a few kilobytes of memory and never a thread or a
# process; a worker holds up to `worker_connections` of them. (With threads, five such clients stopped
# the server.) psycopg 3 waits cooperatively under gevent; SQLite's calls do not yield, so one
# process's requests never contend for its write lock. docs/deployment.md weighs this against a
# buffering proxy (deploy/nginx.conf), which the internet should see in front of any worker.
#
# One process per core: a gevent process uses one core. Rate limits count the same across them,
# whether in memory:// (the file above) or in a shared storage (redis://...).
_cores = multiprocessing.cpu_count()
workers = _env_int("WEB_CONCURRENCY", _cores)
_threads = _env_int("GUNICORN_THREADS", 0)
worker_class = os.environ.get("GUNICORN_WORKER_CLASS") or ("gthread" if _threads > 1 else "gevent")
# Threads serve requests only in the gthread worker; gunicorn would turn any other worker class given
# threads into gthread, silently. The settings say what they mean or the server does not start.
if _threads > 1 and worker_class not in ("gthread", "gunicorn.workers.gthread.ThreadWorker"):
    raise SystemExit(
        f"GUNICORN_THREADS={_threads} needs GUNICORN_WORKER_CLASS=gthread (it is {worker_class}): "
        "only the gthread worker serves with threads."
    )
threads = _threads or (2 * _cores + 1 if worker_class == "gthread" else 1)
# The app sizes each process's database pool by it (identity/config.py: IDENTITY_DB_POOL_SIZE).
os.environ["GUNICORN_THREADS"] = str(threads)
# Connections one gevent worker holds at once; more wait in the listen backlog. An open event stream
# of GET /changes holds one for as long as it follows the feed: room for thousands of them, and for
# the requests that come while they are open.
worker_connections = _env_int("GUNICORN_WORKER_CONNECTIONS", 4000)
# Each connection is a file descriptor; many systems start a process with a soft limit of 1024. It is
# raised as far as the hard limit allows, so that the worker reaches worker_connections.
_soft_files, _hard_files = resource.getrlimit(resource.RLIMIT_NOFILE)
_wanted_files = worker_connections + 256
if _soft_files != resource.RLIM_INFINITY and _soft_files < _wanted_files:
    resource.setrlimit(
        resource.RLIMIT_NOFILE,
        (_wanted_files if _hard_files == resource.RLIM_INFINITY else min(_wanted_files, _hard_files), _hard_files),
    )
# gunicorn_h1c, the C parser (a pinned requirement): "fast" makes its absence an error at start,
# not a quiet fall back to the Python parser, whose error pages echo a malformed header line whole,
# an API key included.
http_parser = "fast"

# A worker silent this long is killed and replaced.
timeout = _env_int("GUNICORN_TIMEOUT", 30)
# On SIGTERM, workers finish the requests they hold for up to this long before they are killed.
graceful_timeout = _env_int("GUNICORN_GRACEFUL_TIMEOUT", 30)
# Seconds an idle keep-alive connection is held (threaded and async workers; sync ones close).
keepalive = _env_int("GUNICORN_KEEPALIVE", 5)
# Recycle workers now and then, so that a slow leak cannot grow without bound (0: never).
max_requests = _env_int("GUNICORN_MAX_REQUESTS", 0)
max_requests_jitter = _env_int("GUNICORN_MAX_REQUESTS_JITTER", 0)
# gunicorn's control socket lets whoever can reach it resize or stop the server; its default path is
# one per user, shared by every gunicorn that user runs. Off unless a path is given.
control_socket = os.environ.get("GUNICORN_CONTROL_SOCKET") or None
control_socket_disable = control_socket is None

# Logs: JSON lines, the app's access line on stdout, everything else (gunicorn's own lines
# included) on stderr.
loglevel = _settings["IDENTITY_LOG_LEVEL"].lower()
# For every line, logging also looks up the thread and the process; no line here shows them, so the
# server skips that work (the Logging HOWTO's "Optimization" section).
logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
errorlog = "-"
# No access line from gunicorn: the app writes a richer one (route, key id). gunicorn's goes to the
# gunicorn.access logger, which logging_config() gives no handler.
accesslog = None
logconfig_dict = redact_keys(logging_config(_settings["IDENTITY_LOG_LEVEL"]))


class AppWritesTheAccessLine(Logger):
    """gunicorn's logger, saying that gunicorn's own access line is off, as it is here.

    gunicorn counts access logging as on whenever logconfig_dict is given, and then builds every
    request's line (a dict of some twenty atoms) for the gunicorn.access logger, which has no
    handler: 6% of a GET's time under load, for nothing. access_log_enabled is the property its
    workers ask before building the line.
    """

    @property
    def access_log_enabled(self):
        return False


logger_class = AppWritesTheAccessLine


def on_starting(server):
    # Once per master, before any worker: samples a previous run left in a directory the operator
    # gave would otherwise be added to this run's.
    for stale in Path(os.environ["PROMETHEUS_MULTIPROC_DIR"]).glob("*.db"):
        stale.unlink()


# socket(7)'s SO_ATTACH_FILTER, with a classic BPF program that drops a TCP segment whose flags are
# SYN without ACK: on a listening socket, a new client's first packet. Everything else passes, the
# handshakes under way and the connections already queued included. (The filter reads the TCP header.)
_SO_ATTACH_FILTER = getattr(socket, "SO_ATTACH_FILTER", 26)
_DROP_NEW_HANDSHAKES = ctypes.create_string_buffer(
    b"".join(
        struct.pack("HBBI", *instruction)
        for instruction in (
            (0x30, 0, 0, 13),  # ldb [13]: the flags byte of the TCP header
            (0x54, 0, 0, 0x12),  # and #(SYN | ACK)
            (0x15, 0, 1, 0x02),  # jeq #SYN: drop, else keep
            (0x06, 0, 0, 0),  # ret #0: drop
            (0x06, 0, 0, 0xFFFFFFFF),  # ret #-1: keep all of it
        )
    )
)


def _refuse_new_connections(listener):
    program = struct.pack("HL", 5, ctypes.addressof(_DROP_NEW_HANDSHAKES))
    try:
        listener.setsockopt(socket.SOL_SOCKET, _SO_ATTACH_FILTER, program)
    except OSError:
        listener.listen(0)  # elsewhere than Linux: at least queue no more than one


def _queued(listener):
    """Connections the kernel has queued on `listener` and the worker not yet accepted (tcp(7)'s
    TCP_INFO: tcpi_unacked, for a listening socket), or 0 where that cannot be read."""
    try:
        return struct.unpack("B" * 8 + "I" * 24, listener.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104))[12]
    except (AttributeError, OSError, struct.error):
        return 0


def _under_gevent():
    if "gevent" not in sys.modules:
        return False
    from gevent import monkey

    return monkey.is_module_patched("threading")


def post_worker_init(worker):
    """On SIGTERM, drain the listening sockets' queues, then let gunicorn's own handler stop the worker.

    gunicorn's worker stops accepting soon after SIGTERM and closes its listening socket; the
    connections the kernel had queued by then were reset (8 a run under load). Here new handshakes
    are dropped first, the worker goes on accepting and answering until nothing is queued (at most
    a few seconds), and only then is it told to stop. A client that came after SIGTERM sees its
    connection refused when the socket closes: it was never accepted.
    """
    from identity import background  # the worker's app imported it already

    handler = signal.getsignal(signal.SIGTERM)
    draining = []

    def stop_when_drained():
        deadline = time.monotonic() + 5
        while any(_queued(listener) for listener in worker.sockets) and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.05)  # the last one accepted reaches its handler
        if callable(handler):
            handler(signal.SIGTERM, None)

    def drain_then_stop(signum, frame):
        if draining:
            return  # SIGTERM from the master after the one to the process group
        draining.append(signum)
        for listener in worker.sockets:
            _refuse_new_connections(listener)
        # Open event streams and long polls end at once (their clients resume with Last-Event-ID), so
        # that the stop waits on none of them.
        _in_background(background.end_streams)
        _in_background(stop_when_drained)

    signal.signal(signal.SIGTERM, drain_then_stop)
    freeze_loaded_objects()
    if _under_gevent():
        from identity.server.balance import WorkerLoads
        from identity.server.fairness import Turns

        _turns.append(Turns())
        try:
            _loads.append(WorkerLoads(os.environ[LOADS_FILE_VARIABLE]))
        except (OSError, ValueError, RuntimeError) as error:  # the file gone, or more workers than slots
            worker.log.warning("Keep-alive clients are not spread over the workers (%s); restart the server "
                               "to make the file of their counts again", error)
    # The webhook deliverer runs in every worker (greenlets under gevent); the lease in the database
    # lets one at a time deliver, across workers and nodes (identity/background.py).
    background.start(worker.wsgi)


def worker_exit(server, worker):
    # In the worker, as it exits: its deliverer gives the lease up, so that another takes over at once.
    from identity import background

    background.stop(worker.wsgi, timeout=2)
    for loads in _loads:
        loads.close()


def worker_int(worker):
    """On Ctrl-C (SIGINT) or the master's quick shutdown (SIGQUIT), gunicorn ends the worker by sys.exit
    in a greenlet, which gevent's hub would print as a SystemExit traceback amid the JSON log lines. It
    is the expected end of the worker: one log line says so, and the hub prints nothing more."""
    worker.log.info("Worker stopping on SIGINT or SIGQUIT (pid: %s)", worker.pid)
    if _under_gevent():
        import gevent

        gevent.get_hub().exception_stream = None


def _in_background(function):
    """Run `function` elsewhere than in a signal handler, which must not wait: under gevent it runs in the
    event loop, where only spawning a greenlet is allowed (gunicorn's gevent worker does the same)."""
    if _under_gevent():
        import gevent

        gevent.spawn(function)
    else:
        threading.Thread(target=function, daemon=True).start()


# A gevent worker's queue of requests waiting for the CPU (identity/turns.py), and its count of busy
# clients beside the other workers' (identity/balance.py); nothing elsewhere.
_turns = []
_loads = []


def pre_request(worker, req):
    """In a gevent worker: first, a client of a worker busier than another by two clients or more is
    asked to reconnect (identity/balance.py); then the request waits for those read before it
    (identity/turns.py). Both say why, with the figures.
    """
    for loads in _loads:
        # Its busy clients outnumber another worker's by two or more: this one is asked to reconnect.
        if loads.should_reconnect(req.peer_addr):
            req.force_close()
    for turns in _turns:
        turns.take(req.method)


def freeze_loaded_objects():
    """Move everything the worker holds once the app is loaded out of the garbage collector's sight.

    The loaded app is some 140,000 objects (Flask, SQLAlchemy, marshmallow, the OpenAPI spec), none
    of them ever garbage. A full collection walks them all: hundreds of milliseconds during which
    the worker answers nobody, and under gevent, with requests overlapping, enough of each request's
    objects outlive a young collection for full ones to come every few thousand requests: the long
    tail of the default server. gc.freeze() (Python's documented remedy) leaves the collector only
    what requests create.
    """
    gc.collect()
    gc.freeze()


def child_exit(server, worker):
    # A dead worker's counters stay (totals must not go down); its live gauges go.
    multiprocess.mark_process_dead(worker.pid)


def on_exit(server):
    directory = os.environ["PROMETHEUS_MULTIPROC_DIR"]
    if directory == os.environ.get("IDENTITY_OWN_METRICS_DIR"):
        shutil.rmtree(directory, ignore_errors=True)
    for variable, own, *_ in _SHARED_FILES:
        if os.environ[variable] == os.environ.get(own):
            shutil.rmtree(os.path.dirname(os.environ[variable]), ignore_errors=True)
