"""The contract's "Clients and the OpenAPI document": what a code generator needs from /openapi.json.

tests/web/test_generated_clients.py proves the same with the real generators; these tests name each rule.
"""

import re

import pytest

from tests.common.apps import USER_WALLET

OPERATION_IDS = {
    ("/identity/{identity_id}", "get"): "getIdentity",
    ("/identity/{identity_id}/content", "get"): "getIdentityContent",
    ("/identity", "post"): "createIdentity",
    ("/identities", "post"): "createIdentityAlias",
    ("/identity/{identity_id}", "patch"): "updateIdentity",
    ("/identities", "get"): "listIdentities",
    ("/identity/{identity_id}/changes", "get"): "listIdentityChanges",
    ("/changes", "get"): "listChanges",
    ("/healthz", "get"): "getHealth",
    ("/readyz", "get"): "getReadiness",
    ("/me", "get"): "getMe",
    ("/me/key/rotate", "post"): "rotateMyKey",
    ("/me/key", "delete"): "revokeMyKey",
    ("/keys", "post"): "createKey",
    ("/keys", "get"): "listKeys",
    ("/keys/{key_id}", "get"): "getKey",
    ("/keys/{key_id}/rotate", "post"): "rotateKey",
    ("/keys/{key_id}", "delete"): "revokeKey",
    ("/users/{wallet}", "get"): "getUser",
    ("/users/{wallet}", "patch"): "setUserGrant",
    ("/webhooks", "post"): "createWebhook",
    ("/webhooks", "get"): "listWebhooks",
    ("/webhooks/{webhook_id}", "get"): "getWebhook",
    ("/webhooks/{webhook_id}", "patch"): "updateWebhook",
    ("/webhooks/{webhook_id}", "delete"): "deleteWebhook",
    ("/webhooks/{webhook_id}/deliveries", "get"): "listWebhookDeliveries",
    ("/identity/preview", "post"): "previewIdentity",
    ("/auth/nonce", "get"): "getSigninNonce",
    ("/auth/siwe", "post"): "signInWithEthereum",
    ("/mirrors", "post"): "createMirror",
    ("/mirrors", "get"): "listMirrors",
    ("/mirrors/{mirror_id}", "get"): "getMirror",
    ("/mirrors/{mirror_id}", "patch"): "updateMirror",
    ("/mirrors/{mirror_id}", "delete"): "deleteMirror",
    ("/audit", "get"): "listAudit",
}
MAX_SAFE_INTEGER = 2**53 - 1
# EIP-55's own test vector: mixed case, valid checksum.
CHECKSUMMED = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"


@pytest.fixture
def document(client):
    return client.get("/openapi.json").get_json()


def operations(document):
    for path, item in document["paths"].items():
        for method, operation in item.items():
            if method != "parameters":
                yield path, method, operation


def test_every_operation_has_its_stable_camel_case_operation_id(document):
    found = {(path, method): operation.get("operationId") for path, method, operation in operations(document)}
    assert found == OPERATION_IDS
    assert all(re.fullmatch(r"[a-z]+(?:[A-Z][a-z]+)*", name) for name in found.values())


def test_document_names_the_services_own_base_as_its_server(document):
    assert document["servers"] == [{"url": "/", "description": document["servers"][0]["description"]}]


def test_health_and_readiness_say_they_need_no_security(document):
    assert document["paths"]["/healthz"]["get"]["security"] == []
    assert document["paths"]["/readyz"]["get"]["security"] == []


def integer_schemas(node, where="#"):
    if isinstance(node, dict):
        if node.get("type") == "integer" or (isinstance(node.get("type"), list) and "integer" in node["type"]):
            yield where, node
        for key, value in node.items():
            yield from integer_schemas(value, f"{where}/{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from integer_schemas(value, f"{where}/{index}")


def test_no_integer_anywhere_in_the_document_may_exceed_2_53_minus_1(document):
    found = list(integer_schemas(document))
    assert len(found) > 10
    for where, schema in found:
        assert schema.get("maximum", float("inf")) <= MAX_SAFE_INTEGER, where
        assert schema.get("format") not in ("int64",), where


def test_num_positions_and_after_past_2_53_minus_1_are_refused(client, admin_key, create):
    identity_id = create({"display_name": "Big numbers"}).get_json()["identity_id"]
    headers = {"x-api-key": admin_key}
    ok = client.patch(f"/identity/{identity_id}", json={"num_positions": MAX_SAFE_INTEGER}, headers=headers)
    assert ok.status_code == 200 and ok.get_json()["num_positions"] == MAX_SAFE_INTEGER
    refused = client.patch(f"/identity/{identity_id}", json={"num_positions": MAX_SAFE_INTEGER + 1}, headers=headers)
    assert refused.status_code == 422 and "num_positions" in refused.get_json()["errors"]
    assert client.get(f"/changes?after={MAX_SAFE_INTEGER + 1}", headers=headers).status_code == 400
    # The largest is a valid position: beyond this feed's end, it is told so (409), not refused as a value.
    at_the_limit = client.get(f"/changes?after={MAX_SAFE_INTEGER}", headers=headers)
    assert at_the_limit.status_code == 409 and isinstance(at_the_limit.get_json()["feed_end"], int)


def test_creator_pattern_accepts_a_mixed_case_eip55_address_as_the_service_does(document, client, admin_key):
    pattern = document["components"]["schemas"]["IdentityCreate"]["properties"]["creator"]["pattern"]
    assert re.search(pattern, CHECKSUMMED)
    response = client.post(
        "/identity", json={"display_name": "Checksummed", "creator": CHECKSUMMED}, headers={"x-api-key": admin_key}
    )
    assert response.status_code == 201 and response.get_json()["creator"]["wallet"] == CHECKSUMMED


def test_a_mixed_case_address_failing_its_checksum_fits_the_pattern_but_is_refused(document, client, admin_key):
    wrong = CHECKSUMMED.replace("aAeb", "aaeb")  # still mixed case
    response = client.post(
        "/identity", json={"display_name": "Bad checksum", "creator": wrong}, headers={"x-api-key": admin_key}
    )
    assert response.status_code == 422 and "creator" in response.get_json()["errors"]


def test_identity_status_is_the_enum_patch_sets(document):
    schemas = document["components"]["schemas"]
    assert schemas["Identity"]["properties"]["status"]["enum"] == ["pending", "complete", "removed", "error"]
    assert schemas["Identity"]["properties"]["status"]["enum"] == schemas["IdentityPatch"]["properties"]["status"]["enum"]


@pytest.mark.parametrize(
    "path, method, header",
    [
        ("/identity/{identity_id}", "get", "If-None-Match"),
        ("/identity/{identity_id}/content", "get", "If-None-Match"),
        ("/identity/{identity_id}", "patch", "If-Match"),
    ],
)
def test_conditional_headers_are_documented_parameters(document, path, method, header):
    parameters = document["paths"][path][method]["parameters"]
    (documented,) = [p for p in parameters if p["name"] == header]
    assert documented["in"] == "header" and documented["schema"] == {"type": "string"}
    assert not documented.get("required")


def test_every_json_body_documents_one_content_type(document):
    for path, method, operation in operations(document):
        if "requestBody" in operation:
            assert list(operation["requestBody"]["content"]) == ["application/json"], (path, method)


def test_patch_still_accepts_merge_patch(client, admin_key, create):
    identity_id = create({"display_name": "Merge patched"}).get_json()["identity_id"]
    response = client.patch(
        f"/identity/{identity_id}", data='{"status": "pending"}',
        headers={"x-api-key": admin_key, "Content-Type": "application/merge-patch+json"},
    )
    assert response.status_code == 200 and response.get_json()["status"] == "pending"


@pytest.mark.parametrize("path", ["/identities/{identity_id}", "/identities/search", "/identities/{identity_id}/changes"])
def test_aliases_are_served_but_not_documented(document, client, user_key, create, path):
    identity_id = create({"display_name": "Aliased"}).get_json()["identity_id"]
    assert path not in document["paths"]
    assert client.get(path.format(identity_id=identity_id), headers={"x-api-key": user_key}).status_code == 200


def test_creating_through_the_plural_alias_works(client, user_key):
    response = client.post("/identities", json={"display_name": "Plural", "creator": USER_WALLET},
                           headers={"x-api-key": user_key})
    assert response.status_code == 201
