"""The create body's fields, as the schema (identity.schemas.identities.IdentityCreateSchema) checks them: each
bad value is refused naming its field and only it, each good one kept as sent (or as the rules normalize it)."""

import unicodedata

import pytest

from identity.schemas.fields import _WHITE_SPACE, _bad_characters
from identity.schemas.identities import IdentityCreateSchema
from tests.common.apps import USER_WALLET

LONG_URL = "https://example.org/" + "a" * (2048 - len("https://example.org/"))


def errors_of(body):
    return IdentityCreateSchema().validate(body)


@pytest.mark.parametrize(
    "field, value",
    [
        ("display_name", ""),
        ("display_name", "   "),
        ("display_name", "x" * 257),
        ("display_name", "bell\x07"),
        ("display_name", "line\nbreak"),
        ("display_name", "nul\x00"),
        ("display_name", "\ud800"),
        ("display_name", None),
        ("display_name", 5),
        ("display_name", ["a"]),
        ("description", "x" * 4097),
        ("description", "nul\x00"),
        ("description", "escape\x1b"),
        ("description", "del\x7f"),
        ("description", 1.5),
        ("image", "ftp://example.org/a.png"),
        ("image", "https://"),
        ("image", "https:///path-only"),
        ("image", "/relative.png"),
        ("image", "example.org/a.png"),
        ("image", "https://exa mple.org/a.png"),
        ("image", "https://example.org/a\u2003b.png"),
        ("image", "https://example.org:99999/a.png"),
        ("image", "javascript:alert(1)"),
        ("image", "ipfs://"),
        ("image", LONG_URL + "a"),
        ("image", ""),
        ("image", {"url": "https://example.org"}),
        ("external_reference", "ipfs://bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku"),
        ("external_reference", "mailto:someone@example.org"),
        ("external_reference", "https://[::1"),
        ("external_reference", True),
        ("creator", "0x123"),
        ("creator", "fB6916095ca1df60bB79Ce92cE3Ea74c37c5d359"),
        ("creator", "0XfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359"),
        ("creator", "0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d35g"),
        ("creator", "0xFb6916095ca1df60bB79Ce92cE3Ea74c37c5d359"),
        ("creator", 1234),
    ],
)
def test_a_bad_value_is_refused_naming_its_field_alone(field, value):
    errors = errors_of({"display_name": "Valid name", field: value})
    assert list(errors) == [field]
    assert errors[field] and all(isinstance(message, str) and message for message in errors[field])


def test_a_missing_display_name_is_named():
    assert list(errors_of({})) == ["display_name"]


def test_unknown_fields_are_named_each():
    assert set(errors_of({"display_name": "x", "vault_id": "1", "Display_Name": "y"})) == {"vault_id", "Display_Name"}


def test_every_bad_field_is_named_at_once():
    assert set(errors_of({"display_name": "", "image": "nope", "creator": "0x1"})) == {"display_name", "image", "creator"}


def test_display_name_is_trimmed_and_its_length_counts_after_trimming():
    assert IdentityCreateSchema().load({"display_name": "  " + "x" * 256 + "  "})["display_name"] == "x" * 256


def test_description_keeps_newline_carriage_return_and_tab_and_its_limit():
    loaded = IdentityCreateSchema().load({"display_name": "d", "description": "a\nb\r\nc\td"})
    assert loaded["description"] == "a\nb\r\nc\td"
    assert errors_of({"display_name": "d", "description": "d" * 4096}) == {}


@pytest.mark.parametrize(
    "image",
    ["https://example.org/a.png", "http://127.0.0.1:8080/a", "HTTPS://EXAMPLE.ORG/A", "ipfs://bafybeigdyrzt/a.png", LONG_URL],
)
def test_image_urls_within_the_rules_are_kept_as_sent(image):
    assert IdentityCreateSchema().load({"display_name": "img", "image": image})["image"] == image


def test_an_uppercase_creator_address_is_checksummed():
    assert IdentityCreateSchema().load({"display_name": "U", "creator": "0x" + USER_WALLET[2:].upper()})["creator"] == USER_WALLET


def test_more_than_30_combining_marks_in_a_row_are_refused_before_normalizing():
    assert errors_of({"display_name": "a" + "\u0301" * 31}) == {"display_name": ["More than 30 combining marks in a row."]}
    # 30 is what UAX #15's stream-safe format allows.
    assert errors_of({"display_name": "a" + "\u0301" * 30}) == {}


def test_text_longer_than_four_times_its_limit_as_sent_is_refused():
    assert list(errors_of({"display_name": "e\u0301" * 513})) == ["display_name"]  # 1026 as sent, 513 after NFC


@pytest.mark.parametrize("allowed", ["", "\n\r\t"])
def test_the_character_check_is_unicodes_control_and_surrogate_categories_for_every_code_point(allowed):
    for code in range(0x110000):
        char = chr(code)
        expected = unicodedata.category(char) in ("Cc", "Cs") and char not in allowed
        assert _bad_characters(f"a{char}b", allowed) is expected, hex(code)


def test_the_url_white_space_check_is_str_isspace_for_every_code_point():
    for code in range(0x110000):
        char = chr(code)
        assert (_WHITE_SPACE.search(f"a{char}b") is not None) is char.isspace(), hex(code)
