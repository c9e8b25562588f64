"""Structured logs: one JSON access line per request, request ids on every line, never a key."""

import io
import json
import logging
import sys
import time

import pytest
import requests
from flask import Flask
from sqlalchemy import select

from identity.storage.database import db
from identity.storage.models import ApiKey
from identity.web import budgets, logs
from tests.common.apps import USER_WALLET
from tests.common.live import LiveServer


@pytest.fixture
def access_lines(caplog):
    caplog.set_level(logging.INFO, logger="identity.access")
    return lambda: [r for r in caplog.records if r.name == "identity.access"]


@pytest.fixture
def json_lines():
    """Every record of the test, formatted as the service formats them; returns a reader of the lines."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logs.json_formatter())
    handler.addFilter(logs.RequestIdFilter())
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    yield lambda: [json.loads(line) for line in stream.getvalue().splitlines()]
    root.removeHandler(handler)
    root.setLevel(level)


def key_id_of(app):
    with app.app_context():
        return db.session.execute(select(ApiKey.id)).scalar_one()


def test_one_access_line_per_request_with_route_status_duration_request_and_key_id(app, client, user_key, access_lines):
    response = client.get("/identity/did:identity:ipfs:nope", headers={"x-api-key": user_key, "X-Request-ID": "req-1"})
    [line] = access_lines()
    assert line.method == "GET"
    assert line.route == "/identity/<identity_id:identity_id>"  # the rule, not the path
    assert line.status == response.status_code == 404
    assert isinstance(line.duration_ms, float) and 0 <= line.duration_ms < 10_000
    assert line.request_id == "req-1"
    assert line.key_id == key_id_of(app)


def test_an_unauthenticated_request_is_logged_with_a_null_key_id(client, access_lines):
    client.post("/identity", json={"display_name": "x"}, headers={"x-api-key": "idsk_" + "B" * 43})
    client.get("/no/such/path")
    refused, unknown = access_lines()
    assert (refused.status, refused.key_id, refused.route) == (401, None, "/identity")
    assert (unknown.status, unknown.key_id, unknown.route) == (404, None, None)


def test_a_request_refused_for_its_role_is_logged_with_its_keys_id(app, client, user_key, access_lines):
    response = client.patch("/identity/did:identity:ipfs:nope", json={"num_positions": 1}, headers={"x-api-key": user_key})
    [line] = access_lines()
    assert line.status == response.status_code == 403  # an Admin's route
    assert line.key_id == key_id_of(app)


def test_log_lines_are_json_with_time_level_logger_message(client, json_lines):
    client.get("/healthz", headers={"X-Request-ID": "health-1"})
    [line] = [line for line in json_lines() if line["logger"] == "identity.access"]
    assert {"time", "level", "logger", "message", "request_id", "method", "route", "status", "duration_ms", "key_id"} <= set(line)
    assert line["level"] == "INFO" and line["request_id"] == "health-1" and line["route"] == "/healthz"
    assert line["time"].endswith("+00:00")


def test_every_line_of_a_failing_request_carries_its_request_id(failing_app, json_lines):
    response = failing_app.test_client().get("/boom", headers={"X-Request-ID": "trace-me-123"})
    assert response.status_code == 500
    assert response.get_json()["request_id"] == response.headers["X-Request-ID"] == "trace-me-123"
    lines = json_lines()
    assert {line["logger"] for line in lines} >= {"identity.boom", "identity", "identity.access"}
    assert {line["request_id"] for line in lines} == {"trace-me-123"}
    [error] = [line for line in lines if line["level"] == "ERROR"]
    assert "RuntimeError" in error["exc_info"]  # the traceback stays in one line of the log


def test_a_generated_request_id_is_the_one_logged_and_returned(client, json_lines):
    response = client.get("/healthz", headers={"X-Request-ID": "not ok\x7f"})
    [line] = json_lines()
    assert line["request_id"] == response.headers["X-Request-ID"] != "not ok\x7f"


def test_lines_outside_a_request_have_a_null_request_id(json_lines):
    logging.getLogger("identity.test").warning("no request here")
    [line] = json_lines()
    assert line["request_id"] is None and line["message"] == "no request here"


def test_lines_in_a_request_of_another_app_have_a_null_request_id(json_lines):
    # A process that embeds the service may serve its own Flask app beside it; the service's filter
    # stamps that app's lines too, and must neither fail on its request nor give it an id of its own.
    other = Flask("another_app")
    with other.test_request_context("/", headers={"X-Request-ID": "theirs-1"}):
        logging.getLogger("identity.test").warning("in another app's request")
    [line] = json_lines()
    assert line["request_id"] is None and line["message"] == "in another app's request"


def test_the_access_line_times_the_request_from_its_start(app, client, user_key, access_lines, monkeypatch):
    # The view takes 50 ms here; the line's duration includes it, and the request id of the line is the
    # one the response carries.
    real_spend = budgets.RateLimits.spend

    def slow_spend(self, budget, key_id):
        time.sleep(0.05)
        return real_spend(self, budget, key_id)

    monkeypatch.setattr(budgets.RateLimits, "spend", slow_spend)
    response = client.get("/identity/did:identity:ipfs:nope", headers={"x-api-key": user_key})
    [line] = access_lines()
    assert line.status == response.status_code == 404
    assert 50 <= line.duration_ms < 10_000
    assert line.request_id == response.headers["X-Request-ID"]


def access_record(**changes):
    """A record as log_access makes it, with `changes` to its attributes."""
    fields = {"method": "GET", "route": "/identity/<identity_id>", "status": 200, "duration_ms": 0.512,
              "request_id": "0123456789abcdef0123456789abcdef", "key_id": "a-key-id"}
    record = logging.getLogger("identity.access").makeRecord(
        "identity.access", logging.INFO, __file__, 1, "GET /identity/<identity_id> 200", (), None, extra=fields
    )
    record.__dict__.update(changes)
    return record


def error_info():
    try:
        raise ValueError("broken")
    except ValueError:
        return sys.exc_info()



def test_an_unknown_log_level_is_refused():
    from identity.config import settings_from_env

    with pytest.raises(ValueError, match="IDENTITY_LOG_LEVEL"):
        settings_from_env({"IDENTITY_LOG_LEVEL": "chatty"})


def test_gunicorn_writes_json_lines_and_never_an_api_key(database_path, issue_key, tmp_path):
    key = issue_key(USER_WALLET)
    unknown_key = "idsk_" + "Z" * 43
    server = LiveServer(f"sqlite:///{database_path}", workers=2, output_dir=tmp_path).start()
    try:
        with requests.Session() as http:
            created = http.post(server.url + "/identity", json={"display_name": "Logged"}, headers={"x-api-key": key})
            assert created.status_code == 201
            identity_id = created.json()["identity_id"]
            assert http.get(f"{server.url}/identity/{identity_id}", headers={"x-api-key": key}).status_code == 200
            assert http.get(f"{server.url}/identity/{identity_id}", headers={"x-api-key": unknown_key}).status_code == 401
            assert http.post(server.url + "/identity", json={"display_name": ""}, headers={"x-api-key": key}).status_code == 422
            assert http.post(server.url + "/identity", data=b"{", headers={"x-api-key": key, "Content-Type": "application/json"}).status_code == 400
            # A key where a key does not belong: in the path, in the request id.
            assert http.get(f"{server.url}/identity/{key}", headers={"x-api-key": key}).status_code == 404
            assert http.get(server.url + "/healthz", headers={"X-Request-ID": key}).status_code == 200
    finally:
        server.stop()

    stdout, stderr = server.stdout(), server.stderr()
    assert key not in stdout + stderr and unknown_key not in stdout + stderr
    out_lines = [json.loads(line) for line in stdout.splitlines()]
    err_lines = [json.loads(line) for line in stderr.splitlines()]  # gunicorn's own lines are JSON too
    assert any(line["logger"] == "gunicorn.error" for line in err_lines)
    # Two workers share the rate limits' counts in memory: nothing to warn the operator about.
    assert not [line for line in err_lines if "IDENTITY_RATELIMIT_STORAGE" in line["message"]]
    access = [line for line in out_lines if line["logger"] == "identity.access"]
    assert [(line["method"], line["route"], line["status"]) for line in access if line["route"] != "/readyz"] == [
        ("POST", "/identity", 201),
        ("GET", "/identity/<identity_id:identity_id>", 200),
        ("GET", "/identity/<identity_id:identity_id>", 401),
        ("POST", "/identity", 422),
        ("POST", "/identity", 400),
        ("GET", "/identity/<identity_id:identity_id>", 404),
        ("GET", "/healthz", 200),
    ]
    key_ids = {line["key_id"] for line in access if line["status"] != 401 and line["route"] not in ("/healthz", "/readyz")}
    assert len(key_ids) == 1 and None not in key_ids
    assert all(len(line["request_id"]) == 32 for line in access)
