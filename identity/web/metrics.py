"""Prometheus metrics at /metrics: requests by route and status, their latency, identities created.

Under gunicorn.conf.py, prometheus_client runs in its multiprocess mode (identity.server sets it up
before any worker starts, and names the folder in the app's IDENTITY_METRICS_DIR): every worker writes
its samples to files there, and a scrape, whichever worker answers it, adds them all up. Without it
(flask run, the test client) the process's own registry is served.
"""

from flask import current_app, request
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


def serve_metrics():
    """The metrics in the Prometheus text format (or OpenMetrics, if the scraper asks for it)."""
    directory = current_app.config.get("IDENTITY_METRICS_DIR")
    registry = REGISTRY
    if directory:
        # Built per scrape, as prometheus_client's multiprocess documentation asks.
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry, path=directory)
    encoder, content_type = choose_encoder(request.headers.get("Accept"))
    return encoder(registry), 200, {"Content-Type": content_type}


def init_app(app):
    if app.config["IDENTITY_METRICS_ENABLED"]:
        app.add_url_rule("/metrics", "metrics", serve_metrics)
