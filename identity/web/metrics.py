"""Prometheus metrics at /metrics: requests by route and status, their latency, identities created, each
mirror's lag and rejections, the backups' last success and failures, and the audit log's head.

Under gunicorn.conf.py, prometheus_client runs in its multiprocess mode (identity.server sets it up
before any worker starts, and names the folder in the app's IDENTITY_METRICS_DIR): every worker writes
its samples to files there, and a scrape, whichever worker answers it, adds them all up. Without it
(flask run, the test client) the process's own registry is served.

A mirror's figures are read from its row at each scrape (MirrorCollector, a custom collector as
prometheus_client documents them), not kept by the process that follows it: that is one process of one
node at a time, or `flask mirrors run` with no /metrics at all, and the row is where they are true.
"""

import logging

from flask import current_app, has_app_context, request
from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram, multiprocess
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.exposition import choose_encoder
from sqlalchemy.exc import SQLAlchemyError

from ..core import audit
from ..data import mirrors
from ..data.backups import records

log = logging.getLogger(__name__)

# Routes are URL rules, never raw paths: one label value per route, however many ids are asked for.
UNMATCHED = "<unmatched>"

REQUESTS = Counter(
    "identity_http_requests", "HTTP requests answered, by route, method and status.", ["route", "method", "status"]
)
LATENCY = Histogram(
    "identity_http_request_duration_seconds", "Time to answer an HTTP request, by route and method.", ["route", "method"]
)
IDENTITIES_CREATED = Counter("identity_identities_created", "Identities created.")


class MirrorCollector:
    """identity_mirror_lag_entries and identity_mirror_rejected_total, by mirror name, from the mirrors' rows."""

    def describe(self):
        return self._families()

    def collect(self):
        lag, rejected = self._families()
        if has_app_context():  # a scrape: the app it serves; nothing for a collection outside one
            try:
                for mirror in mirrors.all_mirrors():
                    lag.add_metric([mirror.name], mirrors.lag(mirror)[0])
                    rejected.add_metric([mirror.name], mirror.rejected)
            except SQLAlchemyError as error:
                log.warning("metrics: the mirrors were not read (%s)", type(error).__name__)
        return [lag, rejected]

    @staticmethod
    def _families():
        return (
            GaugeMetricFamily("identity_mirror_lag_entries", "Upstream entries a mirror has not handled yet.",
                              labels=["mirror"]),
            CounterMetricFamily("identity_mirror_rejected", "Upstream entries a mirror rejected: they did not verify.",
                                labels=["mirror"]),
        )


class BackupCollector:
    """identity_backup_last_success_timestamp_seconds and identity_backup_failures_total, from backup_runs
    (identity.data.backups.records): the backups are taken by one process of one node at a time, and the table is
    where every worker reads them."""

    def describe(self):
        return self._families()

    def collect(self):
        last, failures = self._families()
        if has_app_context():
            try:
                good, _, failed = records.last_state()
                if good is not None:
                    last.add_metric([], good.finished_at.timestamp())
                failures.add_metric([], failed)
            except SQLAlchemyError as error:
                log.warning("metrics: the backups were not read (%s)", type(error).__name__)
        return [last, failures]

    @staticmethod
    def _families():
        return (
            GaugeMetricFamily("identity_backup_last_success_timestamp_seconds",
                              "When the last backup that uploaded and verified finished (Unix time)."),
            CounterMetricFamily("identity_backup_failures", "Backup attempts that failed, scheduled or manual."),
        )


class AuditHeadCollector:
    """identity_audit_head: the audit log's head, its seq as the value and its hash as a label, read from the
    chain's row at each scrape; a copy kept elsewhere later shows any edit of the log (flask audit verify --expect)."""

    def describe(self):
        return [self._family()]

    def collect(self):
        family = self._family()
        if has_app_context():
            try:
                found = audit.head()
                family.add_metric([found["hash"]], found["seq"])
            except SQLAlchemyError as error:
                log.warning("metrics: the audit log's head was not read (%s)", type(error).__name__)
        return [family]

    @staticmethod
    def _family():
        return GaugeMetricFamily("identity_audit_head", "The audit log's last entry: its seq, and its hash as a label.",
                                 labels=["hash"])


MIRRORS = MirrorCollector()
REGISTRY.register(MIRRORS)
BACKUPS = BackupCollector()
REGISTRY.register(BACKUPS)
AUDIT_HEAD = AuditHeadCollector()
REGISTRY.register(AUDIT_HEAD)


def serve_metrics():
    """The metrics in the Prometheus text format (or OpenMetrics, if the scraper asks for it)."""
    directory = current_app.config.get("IDENTITY_METRICS_DIR")
    registry = REGISTRY
    if directory:
        # Built per scrape, as prometheus_client's multiprocess documentation asks.
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry, path=directory)
        registry.register(MIRRORS)
        registry.register(BACKUPS)
        registry.register(AUDIT_HEAD)
    encoder, content_type = choose_encoder(request.headers.get("Accept"))
    return encoder(registry), 200, {"Content-Type": content_type}


def init_app(app):
    if app.config["IDENTITY_METRICS_ENABLED"]:
        app.add_url_rule("/metrics", "metrics", serve_metrics)
