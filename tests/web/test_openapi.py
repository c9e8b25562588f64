"""GET /openapi.json and GET /docs: the service describes itself, from the schemas that do the work."""

import re
import sys
import unicodedata
from html.parser import HTMLParser

import jsonschema_rs
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from identity.schemas import IdentityCreateSchema, IdentityPatchSchema
from identity.schemas.fields import UINT256_PATTERN, WHITE_SPACE_CLASS
from identity.web import ALIASES
from tests.common.contract import CONTRACT_KEYS, USER_KEYS

PROBLEM = "application/problem+json"
IDENTITY = "/identity/{identity_id}"

# The status codes the contract gives for each operation, besides the "default" response (404 unknown
# path, 405 wrong method, 500); every route that reads the database may also answer 503 when it does not answer.
CONTRACT_STATUSES = {
    (IDENTITY, "get"): {200, 304, 401, 404, 410, 429, 503},
    (IDENTITY + "/content", "get"): {200, 304, 401, 404, 410, 429, 503},
    (IDENTITY, "patch"): {200, 400, 401, 403, 404, 412, 413, 415, 422, 429, 503},
    (IDENTITY + "/changes", "get"): {200, 401, 404, 429, 503},
    ("/changes", "get"): {200, 400, 401, 409, 429, 503},
    ("/identity", "post"): {201, 400, 401, 403, 409, 413, 415, 422, 429, 503},
    ("/identities", "post"): {201, 400, 401, 403, 409, 413, 415, 422, 429, 503},  # an alias of the above
    ("/identities", "get"): {200, 400, 401, 403, 429, 503},
    ("/webhooks", "post"): {201, 400, 401, 403, 413, 415, 422, 429, 503},
    ("/webhooks", "get"): {200, 401, 403, 429, 503},
    ("/webhooks/{webhook_id}", "get"): {200, 401, 403, 404, 429, 503},
    ("/webhooks/{webhook_id}", "patch"): {200, 400, 401, 403, 404, 413, 415, 422, 429, 503},
    ("/webhooks/{webhook_id}", "delete"): {204, 401, 403, 404, 429, 503},
    ("/webhooks/{webhook_id}/deliveries", "get"): {200, 401, 403, 404, 429, 503},
    ("/mirrors", "post"): {201, 400, 401, 403, 409, 413, 415, 422, 429, 503},
    ("/mirrors", "get"): {200, 401, 403, 429, 503},
    ("/mirrors/{mirror_id}", "get"): {200, 401, 403, 404, 429, 503},
    ("/mirrors/{mirror_id}", "patch"): {200, 400, 401, 403, 404, 413, 415, 422, 429, 503},
    ("/mirrors/{mirror_id}", "delete"): {204, 401, 403, 404, 429, 503},
    ("/audit", "get"): {200, 400, 401, 403, 429, 503},
    ("/healthz", "get"): {200},
    ("/readyz", "get"): {200, 503},
    ("/me", "get"): {200, 401, 429, 503},
    ("/me/key/rotate", "post"): {201, 400, 401, 403, 409, 413, 415, 422, 429, 503},
    ("/me/key", "delete"): {204, 401, 429, 503},
    ("/keys", "post"): {201, 400, 401, 403, 413, 415, 422, 429, 503},
    ("/keys", "get"): {200, 400, 401, 403, 429, 503},
    ("/keys/{key_id}", "get"): {200, 401, 403, 404, 429, 503},
    ("/keys/{key_id}/rotate", "post"): {201, 400, 401, 403, 404, 409, 413, 415, 422, 429, 503},
    ("/keys/{key_id}", "delete"): {204, 401, 403, 404, 429, 503},
    ("/users/{wallet}", "get"): {200, 401, 404, 429, 503},
    ("/users/{wallet}", "patch"): {200, 400, 401, 403, 404, 413, 415, 422, 429, 503},
    ("/identity/preview", "post"): {200, 400, 401, 403, 413, 415, 422, 429, 503},
    ("/auth/nonce", "get"): {200, 404, 429, 503},
    ("/auth/siwe", "post"): {201, 400, 401, 403, 404, 413, 415, 422, 429, 503},
}
BIGINT_FIELDS = (
    "vault_id", "assets_sum", "conviction_sum", "conviction_price", "user_conviction", "user_conviction_value",
)
NULLABLE_FIELDS = ("description", "image", "corpora_id", "semantic", "external_reference")


@pytest.fixture
def document(client):
    response = client.get("/openapi.json")
    assert response.status_code == 200
    assert response.mimetype == "application/json"
    return response.get_json()


def validator(document, name):
    """A JSON Schema validator for one component schema, its references resolved in the document."""
    return jsonschema_rs.validator_for({"$ref": f"#/components/schemas/{name}", "components": document["components"]})


def resolve(document, item):
    while "$ref" in item:
        section, kind, name = item["$ref"].split("/")[1:]
        item = document[section][kind][name]
    return item


def test_document_is_openapi_3_1_and_needs_no_key(document):
    assert document["openapi"].startswith("3.1.")
    assert document["info"]["title"] == "Identity service"


def path_of(rule):
    return re.sub(r"<(?:[^:>]+:)?([^>]+)>", r"{\1}", rule)


def test_every_route_the_app_serves_is_in_the_document_once_its_aliases_left_out(app, document):
    served = set()
    for rule in app.url_map.iter_rules():
        if rule.endpoint.startswith("identities."):
            served.update((rule.rule, method) for method in rule.methods - {"HEAD", "OPTIONS"})
    assert set(ALIASES) <= served
    documented = {
        (path, method) for path, item in document["paths"].items() for method in item if method != "parameters"
    }
    # An alias on a path the document names for another method is documented, as a deprecated alias of the
    # operation it serves: a client that reads the document finds every method the path answers.
    paths = {path_of(rule) for rule, _ in served - set(ALIASES)}
    documented_aliases = {(path_of(rule), method.lower()) for rule, method in ALIASES if path_of(rule) in paths}
    assert {(path_of(rule), method.lower()) for rule, method in served - set(ALIASES)} | documented_aliases == documented
    assert documented == set(CONTRACT_STATUSES)
    for path, method in documented_aliases:
        operation = document["paths"][path][method]
        of = path_of(next(of for (rule, verb), of in ALIASES.items() if (path_of(rule), verb.lower()) == (path, method)))
        assert operation["deprecated"] is True
        assert operation["x-alias-of"] == document["paths"][of][method]["operationId"]
    # Each alias serves a documented operation of the same method, and says so in its description.
    for (rule, method), of in ALIASES.items():
        operation = document["paths"][path_of(of)][method.lower()]
        served_at = path_of(rule).rstrip("/")
        assert served_at == path_of(of) or served_at in operation["description"].split("Also served at ")[1]


@pytest.mark.parametrize("path, method", sorted(CONTRACT_STATUSES))
def test_every_status_the_contract_gives_is_documented_errors_as_problem_details(document, path, method):
    responses = document["paths"][path][method]["responses"]
    assert {int(code) for code in responses if code != "default"} == CONTRACT_STATUSES[(path, method)]
    for code, response in responses.items():
        response = resolve(document, response)
        if code == "default" or int(code) >= 400:
            assert list(response["content"]) == [PROBLEM], code
            assert response["content"][PROBLEM]["schema"] == {"$ref": "#/components/schemas/Problem"}


def test_default_response_is_problem_details_for_404_405_and_500(document):
    for path_item in document["paths"].values():
        for operation in (item for item in path_item.values() if isinstance(item, dict)):
            default = resolve(document, operation["responses"]["default"])
            assert list(default["content"]) == [PROBLEM]
    problem = document["components"]["schemas"]["Problem"]
    assert set(problem["required"]) == {"type", "title", "status", "detail"}


def test_identity_routes_need_the_x_api_key_scheme_and_health_routes_do_not(document):
    scheme = document["components"]["securitySchemes"]["ApiKeyAuth"]
    assert scheme == {"type": "apiKey", "in": "header", "name": "x-api-key"}
    for (path, method) in CONTRACT_STATUSES:
        operation = document["paths"][path][method]
        if path in ("/healthz", "/readyz", "/auth/nonce", "/auth/siwe"):
            assert operation["security"] == []
        else:
            assert operation["security"] == [{"ApiKeyAuth": []}]
            assert resolve(document, operation["responses"]["401"])["headers"]["WWW-Authenticate"]


def test_identity_schema_lists_every_contract_key_as_required_with_types_and_formats(document):
    identity = document["components"]["schemas"]["Identity"]
    assert set(identity["properties"]) == set(identity["required"]) == CONTRACT_KEYS
    properties = identity["properties"]
    for name in BIGINT_FIELDS:
        assert properties[name]["type"] == "string"
        assert properties[name]["pattern"] == "^(0|[1-9][0-9]{0,77})$"
    for name in ("created_at", "updated_at"):
        assert properties[name] == {"type": "string", "format": "date-time"}
    for name in NULLABLE_FIELDS:
        assert properties[name]["type"] == ["string", "null"], name
    assert properties["num_positions"]["type"] == "integer"
    assert properties["isUser"]["type"] == "boolean"
    assert properties["creator"] == {"$ref": "#/components/schemas/User"}
    assert properties["id"]["format"] == "uuid"


def test_user_schema_lists_every_field_with_types_and_formats(document):
    user = document["components"]["schemas"]["User"]
    assert set(user["properties"]) == set(user["required"]) == USER_KEYS
    assert user["properties"]["last_login"]["type"] == ["string", "null"]
    assert user["properties"]["last_login"]["format"] == "date-time"
    assert user["properties"]["api_key"]["enum"] == [""]
    assert user["properties"]["role"]["enum"] == ["User", "Admin"]


def test_bigint_pattern_accepts_exactly_decimal_strings_up_to_78_digits(document):
    check = validator(document, "Identity")
    pattern = re.compile(document["components"]["schemas"]["Identity"]["properties"]["vault_id"]["pattern"])
    for good in ("0", "1", str(2**256 - 1)):
        assert pattern.search(good)
    for bad in ("01", "-1", "1e3", "", "1" * 79, " 1"):
        assert not pattern.search(bad), bad
    assert check is not None


def test_examples_are_valid_instances_of_their_schemas(document):
    create = document["paths"]["/identity"]["post"]
    body = create["requestBody"]["content"]["application/json"]
    assert validator(document, "IdentityCreate").is_valid(body["example"])
    created = create["responses"]["201"]["content"]["application/json"]["example"]
    assert validator(document, "Identity").is_valid(created)
    fetched = document["paths"][IDENTITY]["get"]["responses"]["200"]["content"]["application/json"]["example"]
    assert fetched == created
    content_response = document["paths"][IDENTITY + "/content"]["get"]["responses"]["200"]
    assert validator(document, "IdentityContent").is_valid(content_response["content"]["application/json"]["example"])
    # The examples agree: the identity's id ends with the content_id that the content's ETag carries.
    assert created["identity_id"].endswith(":" + content_response["headers"]["ETag"]["example"].strip('"'))


def test_every_error_response_has_a_problem_example_of_its_own_status(document):
    problem = validator(document, "Problem")
    for (path, method) in CONTRACT_STATUSES:
        for code, response in document["paths"][path][method]["responses"].items():
            if code != "default" and int(code) >= 400:
                example = resolve(document, response)["content"][PROBLEM]["example"]
                assert problem.is_valid(example), (path, code)
                assert example["status"] == int(code)


# A signature that fits the document's pattern but that no wallet can have made: r is 0.
R_ZERO = "0x" + "00" * 32 + "11" * 32 + "1b"


@pytest.mark.parametrize("path", ["/identity/preview", "/identity"])
def test_a_signature_whose_r_is_0_gets_the_422_its_operation_documents(client, admin_key, document, path):
    answer = client.post(path, json={"display_name": "Signed?", "signature": R_ZERO}, headers={"x-api-key": admin_key})
    assert answer.status_code == 422 and answer.mimetype == PROBLEM
    assert list(answer.get_json()["errors"]) == ["signature"] and "r is 0" in answer.get_json()["errors"]["signature"][0]
    operation = document["paths"][path]["post"]
    documented = resolve(document, operation["responses"]["422"])
    assert "signature" in documented["description"] and "no wallet" in documented["description"]
    assert validator(document, "Problem").is_valid(answer.get_json())
    # The request itself is one the document calls valid: a body that fits the operation's schema.
    body_schema = operation["requestBody"]["content"]["application/json"]["schema"]
    fits = jsonschema_rs.validator_for({**body_schema, "components": document["components"]})
    assert fits.is_valid({"display_name": "Signed?", "signature": R_ZERO})


def test_example_request_is_accepted_by_the_service(client, admin_key, document):
    example = document["paths"]["/identity"]["post"]["requestBody"]["content"]["application/json"]["example"]
    response = client.post("/identity", json=example, headers={"x-api-key": admin_key})
    assert response.status_code == 201, response.get_json()
    assert validator(document, "Identity").is_valid(response.get_json())


def test_responses_of_the_service_are_valid_against_the_document(client, create, user_key, document):
    body = {"display_name": "Checked", "description": "d", "image": "ipfs://bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku"}
    created = create(body)
    assert validator(document, "Identity").is_valid(created.get_json())
    identity_id = created.get_json()["identity_id"]
    content = client.get(f"/identity/{identity_id}/content", headers={"x-api-key": user_key})
    assert validator(document, "IdentityContent").is_valid(content.get_json())
    for problem in (create({"display_name": ""}), create(body), client.get("/nope"), client.put("/identity")):
        assert problem.mimetype == PROBLEM
        assert validator(document, "Problem").is_valid(problem.get_json()), problem.get_json()


LISTING_PARAMETERS = {"limit", "page", "cursor", "sortBy", "direction", "creator", "status", "displayName", "q"}


@pytest.mark.parametrize("path", ["/identities"])
def test_listing_parameters_are_documented_with_their_constraints(document, path):
    parameters = {p["name"]: p for p in document["paths"][path]["get"]["parameters"]}
    assert set(parameters) == LISTING_PARAMETERS
    assert all(p["in"] == "query" and not p.get("required") for p in parameters.values())
    schemas = {name: p["schema"] for name, p in parameters.items()}
    assert (schemas["limit"]["type"], schemas["limit"]["minimum"], schemas["limit"]["maximum"]) == ("integer", 1, 100)
    assert (schemas["page"]["minimum"], schemas["page"]["maximum"]) == (1, 10_000)
    assert "10,000" in parameters["page"]["description"]
    assert schemas["sortBy"]["enum"] == ["created_at", "updated_at", "display_name", "num_positions"]
    assert schemas["direction"]["enum"] == ["desc", "asc"]
    assert schemas["status"]["enum"] == ["pending", "complete", "removed", "error"]
    assert re.fullmatch(schemas["creator"]["pattern"], "0x" + "aB" * 20)
    for name in ("q", "displayName"):
        assert re.search(schemas[name]["pattern"], "x" * 100) and not re.search(schemas[name]["pattern"], "x" * 101)
    assert schemas["cursor"]["maxLength"] == 1400


def test_page_schema_lists_its_keys_and_items_are_identities(document):
    operation = document["paths"]["/identities"]["get"]
    schema = resolve(document, operation["responses"]["200"]["content"]["application/json"]["schema"])
    assert set(schema["properties"]) == set(schema["required"]) == {"page", "limit", "total", "data", "next"}
    assert schema["properties"]["data"]["items"] == {"$ref": "#/components/schemas/Identity"}
    assert schema["properties"]["next"]["type"] == ["string", "null"]
    page = jsonschema_rs.validator_for({**schema, "components": document["components"]})
    assert page.is_valid(operation["responses"]["200"]["content"]["application/json"]["example"])


def test_listing_responses_are_valid_against_the_document(client, create, user_key, document):
    create({"display_name": "Listed one"})
    create({"display_name": "Listed two"})
    operation = document["paths"]["/identities"]["get"]
    schema = resolve(document, operation["responses"]["200"]["content"]["application/json"]["schema"])
    page = jsonschema_rs.validator_for({**schema, "components": document["components"]})
    body = client.get("/identities?limit=1", headers={"x-api-key": user_key}).get_json()
    assert page.is_valid(body) and body["next"]
    last = client.get(f"/identities?cursor={body['next']}", headers={"x-api-key": user_key}).get_json()
    assert page.is_valid(last) and last["next"] is None
    for query in ("limit=0", "status=removed", "nope=1"):
        problem = client.get(f"/identities?{query}", headers={"x-api-key": user_key})
        assert problem.mimetype == PROBLEM
        assert validator(document, "Problem").is_valid(problem.get_json()), problem.get_json()


def test_patch_documents_json_says_merge_patch_is_accepted_and_must_change_something(document):
    body = document["paths"][IDENTITY]["patch"]["requestBody"]
    assert set(body["content"]) == {"application/json"}
    assert "application/merge-patch+json" in document["paths"][IDENTITY]["patch"]["description"]
    patch = document["components"]["schemas"]["IdentityPatch"]
    assert patch["minProperties"] == 1
    assert patch["additionalProperties"] is False
    assert set(patch["properties"]) == {
        "status", "vault_id", "num_positions", "assets_sum", "conviction_sum", "conviction_price", "corpora_id",
        "semantic",
    }
    assert patch["properties"]["status"]["enum"] == ["pending", "complete", "removed", "error"]
    for example in (content["example"] for content in body["content"].values()):
        assert validator(document, "IdentityPatch").is_valid(example)


@settings(max_examples=500, deadline=None)
@given(st.integers(0, 2**257))
def test_patch_bigint_pattern_accepts_exactly_0_to_2_256_minus_1(number):
    text = str(number)
    in_range = number <= 2**256 - 1
    assert bool(re.search(UINT256_PATTERN, text)) == in_range
    assert (not IdentityPatchSchema().validate({"vault_id": text})) == in_range


def test_change_examples_are_valid_and_responses_match_the_document(client, create, admin_key, document):
    feed = document["paths"]["/changes"]["get"]["responses"]["200"]["content"]["application/json"]["example"]
    assert validator(document, "ChangeFeed").is_valid(feed)
    identity = create({"display_name": "Documented"}).get_json()
    patched = client.patch(f"/identity/{identity['identity_id']}", json={"status": "removed"},
                           headers={"x-api-key": admin_key})
    assert validator(document, "Identity").is_valid(patched.get_json())
    answers = [
        client.get("/changes", headers={"x-api-key": admin_key}),
        client.get(f"/identity/{identity['identity_id']}/changes", headers={"x-api-key": admin_key}),
    ]
    assert validator(document, "ChangeFeed").is_valid(answers[0].get_json())
    assert validator(document, "ChangeList").is_valid(answers[1].get_json())
    gone = client.get(f"/identity/{identity['identity_id']}", headers={"x-api-key": admin_key})
    assert validator(document, "Problem").is_valid(gone.get_json())


def test_white_space_class_is_exactly_what_python_strips():
    documented = re.compile(f"[{WHITE_SPACE_CLASS}]")
    for code in range(sys.maxunicode + 1):
        char = chr(code)
        assert bool(documented.fullmatch(char)) == char.isspace(), hex(code)


def _field_pattern(client, name):
    schema = client.get("/openapi.json").get_json()["components"]["schemas"]["IdentityCreate"]
    return re.compile(schema["properties"][name]["pattern"])


def _accepted(name, value):
    body = {"display_name": "x", name: value}
    return not IdentityCreateSchema().validate(body)


# Characters whose NFC form is longer than they are; the documented lengths count characters as sent.
def _nfc_keeps_length(text):
    return len(unicodedata.normalize("NFC", text)) == len(text)


@pytest.mark.parametrize("name", ["display_name", "description"])
def test_text_patterns_describe_exactly_what_the_validators_accept(client, name):
    pattern = _field_pattern(client, name)
    padding = st.text(alphabet=" \t\n\u00a0\u3000\u0085\u001c", max_size=3)
    texts = st.one_of(
        st.text(max_size=300),
        st.builds(lambda a, t, b: a + t + b, padding, st.text(max_size=10), padding),
        st.builds(lambda a, n, b: a + "x" * n + b, padding, st.integers(250, 260), padding),
        st.builds(lambda a, n, b: a + "x" * n + b, padding, st.integers(4090, 4100), padding),
    )

    @settings(max_examples=300, deadline=None)
    @given(texts)
    def agree(text):
        assume(_nfc_keeps_length(text))
        assert bool(pattern.search(text)) == _accepted(name, text), repr(text)

    agree()


@pytest.mark.parametrize("name", ["image", "external_reference"])
def test_every_url_the_pattern_allows_is_accepted(client, name):
    pattern = _field_pattern(client, name)

    @settings(max_examples=300, deadline=None)
    @given(st.from_regex(pattern, fullmatch=True).filter(lambda u: len(u) <= 2048 and _nfc_keeps_length(u)))
    def accepted(url):
        assert _accepted(name, url), repr(url)

    accepted()


@pytest.mark.parametrize("url", ["https://", "ftp://example.org", "https://exa mple.org", "https:/x", "ipfs://", "http://h:99999"])
def test_urls_the_validator_refuses_are_outside_the_pattern(client, url):
    for name in ("image", "external_reference"):
        assert not _accepted(name, url)
        assert not _field_pattern(client, name).search(url)


class _Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.urls = []

    def handle_starttag(self, tag, attrs):
        self.urls.extend(value for key, value in attrs if key in ("src", "href") and value)


def test_docs_page_loads_its_scripts_and_styles_from_the_service(client):
    page = client.get("/docs")
    assert page.status_code == 200
    assert page.mimetype == "text/html"
    html = page.get_data(as_text=True)
    assert not re.search(r"https?://", html), "the page must not name another host"
    links = _Links()
    links.feed(html)
    assert any(url.endswith(".js") for url in links.urls) and any(url.endswith(".css") for url in links.urls)
    for url in links.urls:
        assert url.startswith("/"), url
        asset = client.get(url)
        assert asset.status_code == 200, url
        assert len(asset.data) > 10_000, url
    assert '"/openapi.json"' in html
