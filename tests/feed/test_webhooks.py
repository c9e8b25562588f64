"""Webhooks: the Admin routes, the checks of the addresses they may name, and their document.
The deliverer is tested in test_webhook_delivery.py."""

import logging
import socket
from pathlib import Path

import jsonschema_rs
import pytest
from sqlalchemy import update

from identity.storage.database import db
from identity.storage.models import Webhook

PUBLIC_URL = "https://hooks.example.com/identity"


@pytest.fixture
def admin(client, admin_key):
    """admin(method, path, json=None) -> the response of an Admin request."""

    def call(method, path, json=None):
        return client.open(path, method=method, json=json, headers={"x-api-key": admin_key})

    return call


# --- The routes ----------------------------------------------------------------------------------


def test_registration_answers_the_secret_once_and_reads_never_do(admin):
    created = admin("POST", "/webhooks", {"url": PUBLIC_URL, "description": "Search index"})
    assert created.status_code == 201
    webhook = created.json
    assert webhook["secret"].startswith("whsec_") and len(webhook["secret"]) == 50
    assert webhook["active"] is True and webhook["position"] == 0 and webhook["failing_since"] is None
    fetched = admin("GET", f"/webhooks/{webhook['id']}")
    assert fetched.status_code == 200
    assert "secret" not in fetched.json
    assert fetched.json == {k: v for k, v in webhook.items() if k != "secret"}
    listed = admin("GET", "/webhooks").json["data"]
    assert [item["id"] for item in listed] == [webhook["id"]]
    assert "secret" not in listed[0]


def test_each_registration_gets_its_own_secret(admin):
    first = admin("POST", "/webhooks", {"url": PUBLIC_URL}).json["secret"]
    second = admin("POST", "/webhooks", {"url": PUBLIC_URL}).json["secret"]
    assert first != second


def test_a_webhook_starts_at_the_logs_head_unless_after_says(admin, create):
    for number in range(3):
        assert create({"display_name": f"Before {number}"}).status_code == 201
    head = admin("GET", "/changes?after=0&limit=1000").json["data"][-1]["seq"]
    assert admin("POST", "/webhooks", {"url": PUBLIC_URL}).json["position"] == head
    assert admin("POST", "/webhooks", {"url": PUBLIC_URL, "after": 0}).json["position"] == 0


def test_a_registration_after_the_feeds_end_is_422_naming_it(admin, create):
    assert create({"display_name": "Only"}).status_code == 201
    end = admin("GET", "/changes?after=0&limit=1000").json["data"][-1]["seq"]
    assert admin("POST", "/webhooks", {"url": PUBLIC_URL, "after": end}).status_code == 201
    refused = admin("POST", "/webhooks", {"url": PUBLIC_URL, "after": end + 1})
    assert refused.status_code == 422
    assert list(refused.json["errors"]) == ["after"]
    assert f"Beyond the feed's end, {end}" in refused.json["errors"]["after"][0]


def test_a_webhook_whose_position_is_beyond_the_feeds_end_says_so(app, admin, create):
    """As after a restore of an older backup that skipped the step raising the sequence: its receiver holds
    numbers that the feed would give to other entries."""
    assert create({"display_name": "Only"}).status_code == 201
    end = admin("GET", "/changes?after=0&limit=1000").json["data"][-1]["seq"]
    webhook = admin("POST", "/webhooks", {"url": PUBLIC_URL}).json
    assert webhook["stalled"] is None
    with app.app_context():
        db.session.execute(update(Webhook).where(Webhook.id == webhook["id"]).values(position=end + 3))
        db.session.commit()
    for answer in (admin("GET", f"/webhooks/{webhook['id']}").json, admin("GET", "/webhooks").json["data"][0],
                   admin("PATCH", f"/webhooks/{webhook['id']}", {"description": "x"}).json):
        assert answer["stalled"].startswith(f"Its position, {end + 3}, is beyond the feed's end, {end}:")


def test_user_key_gets_403_on_every_webhook_route(client, user_key, admin):
    webhook_id = admin("POST", "/webhooks", {"url": PUBLIC_URL}).json["id"]
    headers = {"x-api-key": user_key}
    for method, path in [("POST", "/webhooks"), ("GET", "/webhooks"), ("GET", f"/webhooks/{webhook_id}"),
                         ("PATCH", f"/webhooks/{webhook_id}"), ("DELETE", f"/webhooks/{webhook_id}"),
                         ("GET", f"/webhooks/{webhook_id}/deliveries")]:
        response = client.open(path, method=method, json={"url": PUBLIC_URL}, headers=headers)
        assert response.status_code == 403, (method, path)
        assert response.mimetype == "application/problem+json"


def test_no_key_gets_401(client):
    assert client.get("/webhooks").status_code == 401


def test_unknown_webhook_is_404_problem_on_every_route(admin):
    missing = "00000000-0000-4000-8000-000000000000"
    for method, path in [("GET", f"/webhooks/{missing}"), ("PATCH", f"/webhooks/{missing}"),
                         ("DELETE", f"/webhooks/{missing}"), ("GET", f"/webhooks/{missing}/deliveries"),
                         ("GET", "/webhooks/not-a-uuid")]:
        response = admin(method, path, {"active": True} if method == "PATCH" else None)
        assert response.status_code == 404, (method, path)
        assert response.mimetype == "application/problem+json"


def test_patch_changes_url_description_and_active(admin):
    webhook_id = admin("POST", "/webhooks", {"url": PUBLIC_URL}).json["id"]
    changed = admin("PATCH", f"/webhooks/{webhook_id}",
                    {"url": "https://other.example.com/in", "description": "Mirror", "active": False})
    assert changed.status_code == 200
    assert (changed.json["url"], changed.json["description"], changed.json["active"]) == (
        "https://other.example.com/in", "Mirror", False)
    assert "secret" not in changed.json


def test_empty_patch_or_unknown_field_is_422(admin):
    webhook_id = admin("POST", "/webhooks", {"url": PUBLIC_URL}).json["id"]
    assert admin("PATCH", f"/webhooks/{webhook_id}", {}).status_code == 422
    response = admin("PATCH", f"/webhooks/{webhook_id}", {"secret": "whsec_x"})
    assert response.status_code == 422
    assert "secret" in response.json["errors"]


@pytest.mark.parametrize("active", [0, 1, "true", None])
def test_active_must_be_a_json_boolean(admin, active):
    webhook_id = admin("POST", "/webhooks", {"url": PUBLIC_URL}).json["id"]
    response = admin("PATCH", f"/webhooks/{webhook_id}", {"active": active})
    assert response.status_code == 422
    assert "active" in response.json["errors"]
    assert admin("GET", f"/webhooks/{webhook_id}").json["active"] is True


def test_delete_removes_it(admin):
    webhook_id = admin("POST", "/webhooks", {"url": PUBLIC_URL}).json["id"]
    assert admin("DELETE", f"/webhooks/{webhook_id}").status_code == 204
    assert admin("GET", f"/webhooks/{webhook_id}").status_code == 404
    assert admin("GET", "/webhooks").json["data"] == []


@pytest.mark.parametrize("body, field", [
    ({}, "url"),
    ({"url": "ftp://hooks.example.com/x"}, "url"),
    ({"url": "hooks.example.com/x"}, "url"),
    ({"url": "https://user:pass@hooks.example.com/x"}, "url"),
    ({"url": PUBLIC_URL, "after": -1}, "after"),
    ({"url": PUBLIC_URL, "after": 2**53}, "after"),
    ({"url": PUBLIC_URL, "secret": "whsec_mine"}, "secret"),
])
def test_invalid_registration_is_422_naming_the_field(admin, body, field):
    response = admin("POST", "/webhooks", body)
    assert response.status_code == 422
    assert field in response.json["errors"]


def _name_resolving_to_loopback():
    """A host name other than localhost that this machine resolves to a loopback address."""
    names = [socket.gethostname()]
    hosts = Path("/etc/hosts")
    if hosts.exists():
        for line in hosts.read_text().splitlines():
            parts = line.split("#")[0].split()
            if parts and (parts[0].startswith("127.") or parts[0] == "::1"):
                names.extend(parts[1:])
    for name in names:
        if name.lower() == "localhost" or name.lower().endswith(".localhost"):
            continue
        try:
            if all(info[4][0].startswith("127.") or info[4][0] == "::1" for info in socket.getaddrinfo(name, 80)):
                return name
        except OSError:
            continue
    pytest.skip("no host name but localhost resolves to a loopback address here")


REFUSED = [
    "http://127.0.0.1/hook",
    "http://localhost/hook",
    "http://[::1]/hook",
    "http://10.0.0.1/hook",
    "http://169.254.169.254/latest/meta-data",
    "http://0.0.0.0/hook",
    "http://[::ffff:127.0.0.1]/hook",
    "http://224.0.0.1/hook",
    "https://192.168.1.1:8443/hook",
    "LOOPBACK_NAME",
]


@pytest.mark.parametrize("url", REFUSED)
def test_private_addresses_are_422_at_registration(admin, url):
    if url == "LOOPBACK_NAME":
        url = f"http://{_name_resolving_to_loopback()}:8080/hook"
    response = admin("POST", "/webhooks", {"url": url})
    assert response.status_code == 422, response.json
    assert "public addresses only" in response.json["errors"]["url"][0]


def test_a_patch_to_a_private_address_is_422(admin):
    webhook_id = admin("POST", "/webhooks", {"url": PUBLIC_URL}).json["id"]
    response = admin("PATCH", f"/webhooks/{webhook_id}", {"url": "http://10.1.2.3/"})
    assert response.status_code == 422
    assert admin("GET", f"/webhooks/{webhook_id}").json["url"] == PUBLIC_URL


def test_registering_changing_and_removing_are_logged_without_the_secret(admin, caplog):
    caplog.set_level(logging.INFO)
    created = admin("POST", "/webhooks", {"url": PUBLIC_URL}).json
    admin("PATCH", f"/webhooks/{created['id']}", {"active": False})
    admin("DELETE", f"/webhooks/{created['id']}")
    messages = [record.getMessage() for record in caplog.records if record.name == "identity.feed.webhooks"]
    assert messages == ["webhook registered", "webhook changed", "webhook removed"]
    for record in caplog.records:
        assert created["secret"] not in str(record.__dict__)
        assert created["secret"].removeprefix("whsec_") not in str(record.__dict__)


# --- The document --------------------------------------------------------------------------------

OPERATIONS = {
    ("/webhooks", "post"): ("createWebhook", "201", "WebhookCreated"),
    ("/webhooks", "get"): ("listWebhooks", "200", "WebhookList"),
    ("/webhooks/{webhook_id}", "get"): ("getWebhook", "200", "Webhook"),
    ("/webhooks/{webhook_id}", "patch"): ("updateWebhook", "200", "Webhook"),
    ("/webhooks/{webhook_id}", "delete"): ("deleteWebhook", "204", None),
    ("/webhooks/{webhook_id}/deliveries", "get"): ("listWebhookDeliveries", "200", "DeliveryList"),
}


def _validator(document, name):
    return jsonschema_rs.validator_for({"$ref": f"#/components/schemas/{name}", "components": document["components"]})


def _resolve(document, item):
    """`item`, or the component its $ref names."""
    while "$ref" in item:
        section, kind, name = item["$ref"].split("/")[1:]
        item = document[section][kind][name]
    return item


def test_every_webhook_operation_is_documented_with_valid_examples(client):
    document = client.get("/openapi.json").json
    problem = _validator(document, "Problem")
    for (path, method), (operation_id, status, schema) in OPERATIONS.items():
        operation = document["paths"][path][method]
        assert operation["operationId"] == operation_id
        if schema:
            content = operation["responses"][status]["content"]["application/json"]
            assert _validator(document, schema).is_valid(content["example"]), operation_id
        for code, response in operation["responses"].items():
            if code != "default" and int(code) >= 400:
                response = _resolve(document, response)
                assert problem.is_valid(response["content"]["application/problem+json"]["example"]), (operation_id, code)
    create = document["paths"]["/webhooks"]["post"]
    assert _validator(document, "WebhookCreate").is_valid(create["requestBody"]["content"]["application/json"]["example"])
    assert "secret" not in document["components"]["schemas"]["Webhook"]["properties"]


def test_webhook_answers_are_valid_against_the_document(client, admin):
    document = client.get("/openapi.json").json
    created = admin("POST", "/webhooks", {"url": PUBLIC_URL, "after": 0})
    assert _validator(document, "WebhookCreated").is_valid(created.json)
    webhook_id = created.json["id"]
    assert _validator(document, "Webhook").is_valid(admin("GET", f"/webhooks/{webhook_id}").json)
    assert _validator(document, "WebhookList").is_valid(admin("GET", "/webhooks").json)
    assert _validator(document, "DeliveryList").is_valid(admin("GET", f"/webhooks/{webhook_id}/deliveries").json)
