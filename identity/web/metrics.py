"""Prometheus metrics at /metrics: requests by route and status, their latency, identities created.

Under gunicorn, PROMETHEUS_MULTIPROC_DIR (set by gunicorn.conf.py before any worker starts) puts
prometheus_client in multiprocess mode: every worker writes its samples to files in that directory,
and a scrape, whichever worker answers it, adds them all up. Without it (flask run, the test client)
the process's own registry is served.
"""

import os

from flask import request
from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram, multiprocess
from prometheus_client.exposition import choose_encoder

# Routes are URL rules, never raw paths: one label value per route, however many ids are asked for.
UNMATCHED = "<unmatched>"

REQUESTS = Counter(
    "identity_http_requests", "HTTP requests answered, by route, method and status.", ["route", "method", "status"]
)
LATENCY = Histogram(
    "identity_http_request_duration_seconds", "Time to answer an HTTP request, by route and method.", ["route", "method"]
)
IDENTITIES_CREATED = Counter("identity_identities_created", "Identities created.")


def count_identity_created():
    IDENTITIES_CREATED.inc()


# The labelled children of REQUESTS and LATENCY, by (route, method, status): `labels()` checks and
# looks its values up under a lock on every call, and these few combinations recur on every request.
_children = {}


def observe(route, method, status, seconds):
    """Count a response (finish.finish_response gives it what the response learnt); `route` None for a
    path no rule matched."""
    labels = (route, method, status)
    children = _children.get(labels)
    if children is None:
        label = UNMATCHED if route is None else route
        children = _children[labels] = (REQUESTS.labels(label, method, str(status)), LATENCY.labels(label, method))
    children[0].inc()
    children[1].observe(seconds)


def _registry():
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        # Built per scrape, as prometheus_client's multiprocess documentation asks.
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        return registry
    return REGISTRY


def serve_metrics():
    """The metrics in the Prometheus text format (or OpenMetrics, if the scraper asks for it)."""
    encoder, content_type = choose_encoder(request.headers.get("Accept"))
    return encoder(_registry()), 200, {"Content-Type": content_type}


def init_app(app):
    if app.config["IDENTITY_METRICS_ENABLED"]:
        app.add_url_rule("/metrics", "metrics", serve_metrics)
