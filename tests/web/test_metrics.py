"""Prometheus metrics at /metrics: requests by route and status, latency, identities created."""

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from identity.config import settings_from_env
from tests.common.apps import USER_WALLET
from tests.common.live import LiveServer

ROUTE = "/identity/<identity_id:identity_id>"


def scrape(get):
    """{(sample name, frozenset of labels): value} from one scrape."""
    response = get("/metrics")
    assert response.status_code == 200
    assert response.headers["Content-Type"].startswith("text/plain")
    text = response.text if hasattr(response, "text") else response.get_data(as_text=True)
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples, name, **labels):
    return samples.get((name, frozenset(labels.items())), 0)


def test_requests_are_counted_by_route_method_and_status(client, user_key):
    before = scrape(client.get)
    for _ in range(3):
        client.get("/identity/did:identity:ipfs:nope", headers={"x-api-key": user_key})
    client.get("/identities/x")
    client.get("/no/such/path/123")
    after = scrape(client.get)

    def delta(**labels):
        return value(after, "identity_http_requests_total", **labels) - value(
            before, "identity_http_requests_total", **labels
        )

    assert delta(route=ROUTE, method="GET", status="404") == 3
    assert delta(route="/identities/<identity_id:identity_id>", method="GET", status="401") == 1
    # Unmatched paths share one label value: a scanner cannot grow the metrics without bound.
    assert delta(route="<unmatched>", method="GET", status="404") == 1
    assert not any("/no/such" in str(labels) for _, labels in after)


def test_latency_is_a_histogram_by_route(client):
    before = scrape(client.get)
    for _ in range(4):
        client.get("/healthz")
    after = scrape(client.get)
    labels = {"route": "/healthz", "method": "GET"}
    count = value(after, "identity_http_request_duration_seconds_count", **labels) - value(
        before, "identity_http_request_duration_seconds_count", **labels
    )
    assert count == 4
    assert value(after, "identity_http_request_duration_seconds_bucket", le="+Inf", **labels) >= 4
    assert value(after, "identity_http_request_duration_seconds_sum", **labels) > 0


def test_identities_created_are_counted(client, create):
    before = value(scrape(client.get), "identity_identities_created_total")
    create({"display_name": "one"})
    create({"display_name": "two"})
    create({"display_name": "two"})  # 409: not created
    assert value(scrape(client.get), "identity_identities_created_total") - before == 2


def test_metrics_need_no_key(client):
    assert client.get("/metrics").status_code == 200


@pytest.fixture
def app_config(request):
    return getattr(request, "param", {})


@pytest.mark.parametrize("app_config", [{"IDENTITY_METRICS_ENABLED": False}], indirect=True)
def test_metrics_can_be_turned_off(client):
    response = client.get("/metrics")
    assert response.status_code == 404
    assert response.mimetype == "application/problem+json"


@pytest.mark.parametrize("raw, enabled", [("", True), ("true", True), ("1", True), ("false", False), ("OFF", False), ("0", False)])
def test_the_metrics_setting_reads_true_and_false(raw, enabled):
    assert settings_from_env({"IDENTITY_METRICS_ENABLED": raw})["IDENTITY_METRICS_ENABLED"] is enabled


def test_counts_add_up_across_gunicorn_workers(database_path, issue_key):
    key = issue_key(USER_WALLET)
    server = LiveServer(f"sqlite:///{database_path}", workers=3).start()
    try:
        local = threading.local()

        def fetch(_):
            local.http = getattr(local, "http", None) or requests.Session()
            return local.http.get(f"{server.url}/identity/did:identity:ipfs:nope", headers={"x-api-key": key}, timeout=30)

        # Concurrent clients keep every worker busy, so each one serves a share.
        with ThreadPoolExecutor(max_workers=9) as pool:
            statuses = [r.status_code for r in pool.map(fetch, range(90))]
        assert statuses == [404] * 90
        # Whichever worker answers a scrape, it reports the sum over all of them.
        totals = {
            value(scrape(lambda path: requests.get(server.url + path, timeout=10)), "identity_http_requests_total",
                  route=ROUTE, method="GET", status="404")
            for _ in range(6)
        }
    finally:
        server.stop()
    assert totals == {90}
