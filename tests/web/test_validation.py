"""The create body over HTTP: each bad input is a clear 4xx problem, and nothing is stored. Each field's rules, one
by one, are tests/schemas/test_identity_fields.py's."""

import json

import pytest

from tests.common.apps import USER_WALLET

LONG_URL = "https://example.org/" + "a" * (2048 - len("https://example.org/"))


def post_raw(client, key, data, content_type="application/json", path="/identity"):
    return client.post(path, data=data, content_type=content_type, headers={"x-api-key": key})


def assert_problem(response, status):
    assert response.status_code == status, response.get_data(as_text=True)
    assert response.mimetype == "application/problem+json"
    body = response.get_json()
    assert body["status"] == status
    assert body["type"] and body["title"] and body["detail"]
    text = response.get_data(as_text=True)
    assert "Traceback" not in text and "SELECT" not in text and "idsk_" not in text
    return body



@pytest.mark.parametrize(
    "field, value",
    [
        ("display_name", "   "),
        ("description", "escape\x1b"),
        ("image", "javascript:alert(1)"),
        ("external_reference", "mailto:someone@example.org"),
        ("creator", "0x123"),
    ],
)
def test_bad_field_is_422_naming_it(client, user_key, field, value):
    body = {"display_name": "Valid name", field: value}
    response = post_raw(client, user_key, json.dumps(body))
    problem = assert_problem(response, 422)
    assert list(problem["errors"]) == [field]
    assert problem["errors"][field] and all(isinstance(m, str) for m in problem["errors"][field])
    assert field in problem["detail"]


def test_rejected_body_stores_nothing(client, user_key, create):
    rejected = post_raw(client, user_key, json.dumps({"display_name": "Kept?", "image": "ftp://x"}))
    assert rejected.status_code == 422
    assert create({"display_name": "Kept?"}).status_code == 201


def test_missing_display_name_is_422(client, user_key):
    problem = assert_problem(post_raw(client, user_key, "{}"), 422)
    assert list(problem["errors"]) == ["display_name"]


def test_unknown_fields_are_422_naming_each(client, user_key):
    body = {"display_name": "x", "vault_id": "1", "Display_Name": "y"}
    problem = assert_problem(post_raw(client, user_key, json.dumps(body)), 422)
    assert set(problem["errors"]) == {"vault_id", "Display_Name"}


def test_every_bad_field_is_named_at_once(client, user_key):
    body = {"display_name": "", "image": "nope", "creator": "0x1"}
    problem = assert_problem(post_raw(client, user_key, json.dumps(body)), 422)
    assert set(problem["errors"]) == {"display_name", "image", "creator"}


@pytest.mark.parametrize("document", ["[]", '["display_name"]', '"text"', "42", "null", "true"])
def test_json_that_is_not_an_object_is_422(client, user_key, document):
    assert_problem(post_raw(client, user_key, document), 422)


def test_huge_number_is_a_wrong_type_not_a_crash(client, user_key):
    response = post_raw(client, user_key, '{"display_name": ' + "9" * 6000 + "}")
    assert list(assert_problem(response, 422)["errors"]) == ["display_name"]


@pytest.mark.parametrize(
    "data",
    [b"", b"{", b'{"display_name": "x",}', b"{'display_name': 'x'}", b"NaN", b'{"display_name": Infinity}',
     b"[" * 60000, b'{"display_name": "x"} trailing'],
)
def test_invalid_json_is_400(client, user_key, data):
    assert_problem(post_raw(client, user_key, data), 400)


@pytest.mark.parametrize("data", [b'{"display_name": "caf\xe9"}', b"\xff\xfe{\x00}\x00", b'{"display_name": "\xed\xa0\x80"}'])
def test_body_that_is_not_utf8_is_400(client, user_key, data):
    assert_problem(post_raw(client, user_key, data), 400)


@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded", "application/jsonx", "application/problem+json"])
def test_post_without_json_content_type_is_415(client, user_key, content_type):
    headers = {"x-api-key": user_key}
    if content_type:
        headers["Content-Type"] = content_type
    response = client.post("/identity", data=b'{"display_name": "x"}', headers=headers)
    assert_problem(response, 415)


def test_json_content_type_with_charset_is_accepted(client, user_key):
    response = post_raw(client, user_key, b'{"display_name": "charset"}', "application/json; charset=utf-8")
    assert response.status_code == 201


def test_body_over_the_limit_is_413(client, user_key):
    body = json.dumps({"display_name": "x", "description": "y" * (70 * 1024)})
    assert_problem(post_raw(client, user_key, body), 413)


class ExplodingStream:
    """A request body that fails the test if the service reads any of it."""

    def read(self, *args):
        raise AssertionError("the oversized body was read")

    readline = read


def test_oversized_body_is_refused_before_it_is_read(client, user_key):
    response = client.post(
        "/identity",
        headers={"x-api-key": user_key, "Content-Type": "application/json"},
        environ_overrides={"wsgi.input": ExplodingStream(), "CONTENT_LENGTH": str(10**9)},
    )
    assert_problem(response, 413)


@pytest.mark.parametrize("app_config", [{"MAX_CONTENT_LENGTH": 100}])
def test_body_limit_is_a_setting(create):
    assert create({"display_name": "x" * 40}).status_code == 201
    assert create({"display_name": "x" * 120}).status_code == 413


def test_display_name_length_counts_after_trimming(create):
    assert create({"display_name": "  " + "x" * 256 + "  "}).status_code == 201


def test_description_allows_newline_carriage_return_and_tab(create):
    response = create({"display_name": "Whitespace", "description": "a\nb\r\nc\td"})
    assert response.status_code == 201
    assert response.get_json()["description"] == "a\nb\r\nc\td"


def test_description_at_the_limit_is_accepted(create):
    assert create({"display_name": "Long", "description": "d" * 4096}).status_code == 201


@pytest.mark.parametrize(
    "image",
    ["https://example.org/a.png", "http://127.0.0.1:8080/a", "HTTPS://EXAMPLE.ORG/A", "ipfs://bafybeigdyrzt/a.png", LONG_URL],
)
def test_image_urls_within_the_rules_are_accepted(create, image):
    response = create({"display_name": f"img {image[:40]}", "image": image})
    assert response.status_code == 201, response.get_json()
    assert response.get_json()["image"] == image


def test_uppercase_creator_address_is_accepted_and_checksummed(create):
    response = create({"display_name": "Upper", "creator": "0x" + USER_WALLET[2:].upper()})
    assert response.status_code == 201
    assert response.get_json()["creator"]["wallet"] == USER_WALLET


def test_a_run_of_more_than_30_combining_marks_is_422_before_normalizing(create):
    response = create({"display_name": "a" + "\u0301" * 31})
    assert response.status_code == 422
    assert response.get_json()["errors"]["display_name"] == ["More than 30 combining marks in a row."]
    # 30 is what UAX #15's stream-safe format allows; the marks compose or stay, as normalization says.
    assert create({"display_name": "a" + "\u0301" * 30}).status_code == 201


def test_text_longer_than_four_times_its_limit_as_sent_is_422(create):
    response = create({"display_name": "e\u0301" * 513})  # 1026 characters as sent, 513 after NFC
    assert response.status_code == 422
    assert "display_name" in response.get_json()["errors"]
