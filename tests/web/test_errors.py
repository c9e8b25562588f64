"""Routing errors, server errors and an unreachable database, all as problem details."""

import socket
import threading
import time

import pytest
from sqlalchemy.engine import make_url

from tests.common import postgres
from tests.common.apps import make_app


def test_unknown_path_is_404_problem(client):
    response = client.get("/no/such/route")
    assert response.status_code == 404
    assert response.mimetype == "application/problem+json"
    assert response.get_json()["title"] == "Not Found"


@pytest.mark.parametrize(
    "method, path, allowed",
    [
        ("DELETE", "/identity", {"POST", "OPTIONS"}),
        ("PUT", "/identities", {"GET", "HEAD", "POST", "OPTIONS"}),  # GET lists them
        ("POST", "/identity/did:identity:ipfs:x", {"GET", "HEAD", "OPTIONS", "PATCH"}),
        ("PUT", "/identities/x", {"GET", "HEAD", "OPTIONS", "PATCH"}),
        ("POST", "/changes", {"GET", "HEAD", "OPTIONS"}),
        ("PATCH", "/identities/search", {"GET", "HEAD", "OPTIONS"}),  # the listing, not an identity "search"
        ("POST", "/healthz", {"GET", "HEAD", "OPTIONS"}),
    ],
)
def test_wrong_method_is_405_with_allow(client, method, path, allowed):
    response = client.open(path, method=method)
    assert response.status_code == 405
    assert response.mimetype == "application/problem+json"
    assert {m.strip() for m in response.headers["Allow"].split(",")} == allowed


def test_unexpected_failure_is_500_problem_with_request_id_only(failing_app):
    response = failing_app.test_client().get("/boom", headers={"X-Request-ID": "trace-me-123"})
    assert response.status_code == 500
    assert response.mimetype == "application/problem+json"
    body = response.get_json()
    assert body["request_id"] == "trace-me-123"
    text = response.get_data(as_text=True)
    assert "secret" not in text and "SELECT" not in text and "Traceback" not in text


def test_request_id_is_echoed_when_safe(client):
    assert client.get("/healthz", headers={"X-Request-ID": "abc-123"}).headers["X-Request-ID"] == "abc-123"


# The last one looks like an API key: it must not be echoed into logs.
@pytest.mark.parametrize("unsafe", ["has space", "x" * 200, "tab\there", "caf\u00e9", "idsk_" + "A" * 43])
def test_unsafe_request_id_is_replaced(client, unsafe):
    sent = unsafe.encode("utf-8").decode("latin-1")
    returned = client.get("/healthz", headers={"X-Request-ID": sent}).headers["X-Request-ID"]
    assert returned != sent and len(returned) == 32


def test_request_id_is_generated_when_absent(client):
    first = client.get("/healthz").headers["X-Request-ID"]
    second = client.get("/healthz").headers["X-Request-ID"]
    assert first != second and len(first) == 32


@pytest.fixture
def unreachable_app(unreachable_database_url):
    return make_app(unreachable_database_url)


def test_readyz_is_503_when_the_database_does_not_answer(unreachable_app):
    response = unreachable_app.test_client().get("/readyz")
    assert response.status_code == 503
    assert response.mimetype == "application/problem+json"
    assert "Traceback" not in response.get_data(as_text=True)


def test_healthz_is_200_even_when_the_database_does_not_answer(unreachable_app):
    assert unreachable_app.test_client().get("/healthz").status_code == 200


def test_api_routes_are_503_when_the_database_does_not_answer(unreachable_app):
    response = unreachable_app.test_client().get("/identity/x", headers={"x-api-key": "idsk_whatever"})
    assert response.status_code == 503
    assert response.headers["Retry-After"]


@pytest.fixture
def silent_database_url(backend):
    """A PostgreSQL URL whose port accepts connections and then never says a word."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield make_url(postgres.URL).set(port=listener.getsockname()[1]).render_as_string(hide_password=False)


@pytest.mark.postgresql_only
def test_a_database_server_that_never_answers_is_503_after_the_connect_timeout(silent_database_url):
    app = make_app(silent_database_url, IDENTITY_DB_CONNECT_TIMEOUT=2)
    answers = []
    # In a thread, so that a hang fails this test instead of stopping the suite.
    asking = threading.Thread(target=lambda: answers.append(app.test_client().get("/readyz")), daemon=True)
    started = time.monotonic()
    asking.start()
    asking.join(timeout=20)
    assert answers, "no answer in 20 s"
    assert answers[0].status_code == 503
    assert answers[0].mimetype == "application/problem+json"
    assert time.monotonic() - started < 10
