"""gunicorn's settings for production: `gunicorn -c gunicorn.conf.py app:app` (what `make run` does).

Each setting reads an environment variable first (docs/configuration.md lists them); GUNICORN_CMD_ARGS
overrides any gunicorn setting on top. The hooks call the service's own functions in identity.server.
"""

import multiprocessing
import os

from identity import server
from identity.config import check_environment, env_int, log_level

server.prepare()  # the workers' shared files, before anything imports prometheus_client
# The app's settings, read here in the first process: a value that cannot be read stops the server with a
# message naming it, where a worker that failed to build the app would be started again and again.
check_environment()

bind = os.environ.get("GUNICORN_BIND") or "{}:{}".format(
    f"[{host}]" if ":" in (host := os.environ.get("HOST") or "127.0.0.1") and not host.startswith("[") else host,
    env_int("PORT", 8000),
)
# gevent's worker by default: each connection is a greenlet, so a slow or silent client holds a few
# kilobytes, never a thread or a process. One process per core. GUNICORN_THREADS > 1 asks for gthread.
workers = env_int("WEB_CONCURRENCY", multiprocessing.cpu_count())
threads = env_int("GUNICORN_THREADS", 0)
worker_class = os.environ.get("GUNICORN_WORKER_CLASS") or ("gthread" if threads > 1 else "gevent")
threads = threads or (2 * multiprocessing.cpu_count() + 1 if worker_class == "gthread" else 1)
# An open event stream holds a connection for as long as it follows the feed: room for thousands.
worker_connections = env_int("GUNICORN_WORKER_CONNECTIONS", 4000)
server.check_settings(worker_class, threads, worker_connections)
# The C parser (a pinned requirement), and its absence an error at start: the Python parser's error pages
# echo a malformed header line whole, an API key included.
http_parser = "fast"
timeout = env_int("GUNICORN_TIMEOUT", 30)
graceful_timeout = env_int("GUNICORN_GRACEFUL_TIMEOUT", 30)
keepalive = env_int("GUNICORN_KEEPALIVE", 5)
max_requests = env_int("GUNICORN_MAX_REQUESTS", 0)
max_requests_jitter = env_int("GUNICORN_MAX_REQUESTS_JITTER", 0)
# gunicorn's control socket lets whoever reaches it resize or stop the server: off unless a path is given.
control_socket = os.environ.get("GUNICORN_CONTROL_SOCKET") or None
control_socket_disable = control_socket is None

# Logs: JSON lines, the app's access line on stdout, everything else (gunicorn's own lines too) on stderr.
loglevel = log_level("IDENTITY_LOG_LEVEL", "INFO").lower()
errorlog = "-"
accesslog = None
logconfig_dict = server.logging_config(loglevel.upper())
logger_class = server.AppWritesTheAccessLine


def on_starting(arbiter):
    server.starting()


def post_worker_init(worker):
    server.worker_started(worker)


def pre_request(worker, req):
    server.request_read(worker, req)


def worker_int(worker):
    server.worker_interrupted(worker)


def worker_exit(arbiter, worker):
    server.worker_exiting(worker)


def child_exit(arbiter, worker):
    server.worker_gone(worker.pid)


def on_exit(arbiter):
    server.exiting()
