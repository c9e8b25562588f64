"""Content addressing: fixed vectors checked against multiformats and pycryptodome, plus properties."""

import dataclasses
import hashlib
import json
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest
import rfc8785
from Crypto.Hash import keccak as crypto_keccak
from hypothesis import given, settings
from hypothesis import strategies as st
from multiformats import CID, multihash

from identity.core.content import (
    CONTENT_FIELDS,
    DEFAULT_NAMESPACE,
    ContentAddress,
    address,
    canonical_bytes,
    content_id_of,
    content_of,
    identity_hash_of,
    identity_id_of,
    normalize_text,
    parse_identity_id,
)

CONTENT_MODULE = Path(__file__).resolve().parents[2] / "identity" / "core" / "content.py"

EMPTY_BYTES_CID = "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku"

# (input fields, canonical bytes written out by hand from RFC 8785, expected CID).
# The bytes spell UTF-8 by hand (é = c3 a9, – = e2 80 93, 🦊 = f0 9f a6 8a, ...); keys sort
# description < display_name < external_reference < image; no white space between tokens.
VECTORS = [
    pytest.param(
        {"display_name": "Alice"},
        b'{"display_name":"Alice"}',
        "bafkreidwqyz2vpk42cn35bzl47sa5fkd5422zmpij22jxhfvh5e5k3w56q",
        id="ascii-one-field",
    ),
    pytest.param(
        {"display_name": "Zo\u00eb \u00c5ngstr\u00f6m", "description": "Caf\u00e9 \u2013 na\u00efve"},
        b'{"description":"Caf\xc3\xa9 \xe2\x80\x93 na\xc3\xafve",'
        b'"display_name":"Zo\xc3\xab \xc3\x85ngstr\xc3\xb6m"}',
        "bafkreiekqulclcix2lzlggj44mm3pp4gw2vr7uysipniqlpihigbe6glde",
        id="non-ascii",
    ),
    pytest.param(
        {"display_name": "\U0001f98a Fox", "description": 'line1\nsaid "hi" \\ a/b \x01 \t end'},
        b'{"description":"line1\\nsaid \\"hi\\" \\\\ a/b \\u0001 \\t end",'
        b'"display_name":"\xf0\x9f\xa6\x8a Fox"}',
        "bafkreighjavkwaiqtrluvxcvcoy5qnvhjztmo33dljyth64jjaihf7zm24",
        id="emoji-and-json-escapes",
    ),
    pytest.param(
        {
            "image": "ipfs://" + EMPTY_BYTES_CID,
            "external_reference": "https://example.com/bob",
            "display_name": "Bob",
            "description": "Builder",
        },
        b'{"description":"Builder","display_name":"Bob",'
        b'"external_reference":"https://example.com/bob",'
        b'"image":"ipfs://bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku"}',
        "bafkreie34sjj4rw7rqojfsmme35oqrvv2m4fdwwbtdtuwhofaf3iw3ujia",
        id="all-four-fields",
    ),
    pytest.param(
        {"display_name": "  Jose\u0301\t\n", "image": None, "nickname": "ignored"},
        b'{"display_name":"Jos\xc3\xa9"}',
        "bafkreigae3y6gexbjd5n5l5vqbbie2c62ojbzltcvuppnzwyujrzesucyi",
        id="normalized-stripped-none-and-unknown-dropped",
    ),
    pytest.param(
        {},
        b"{}",
        "bafkreicecnx2gvntm6fbcrvnc336qze6st5u7qq7457igegamd3bzkx7ri",
        id="empty-content",
    ),
]


def multiformats_cid(data):
    return str(CID("base32", 1, "raw", multihash.digest(data, "sha2-256")))


def pycryptodome_identity_hash(cid):
    return "0x" + crypto_keccak.new(digest_bits=256, data=b"ipfs://" + cid.encode("ascii")).hexdigest()


def assert_decodes_as_raw_sha256_of(cid, data):
    decoded = CID.decode(cid)
    assert decoded.version == 1
    assert decoded.codec.name == "raw"
    assert decoded.hashfun.name == "sha2-256"
    assert decoded.raw_digest == hashlib.sha256(data).digest()


def cid_of_fields(fields):
    return address(fields).content_id


# --- fixed vectors -------------------------------------------------------------------------


@pytest.mark.parametrize(("fields", "canonical", "expected_cid"), VECTORS)
def test_vector_canonical_bytes_match_the_hand_written_rfc8785_form(fields, canonical, expected_cid):
    assert canonical_bytes(content_of(fields)) == canonical


@pytest.mark.parametrize(("fields", "canonical", "expected_cid"), VECTORS)
def test_vector_cid_matches_the_multiformats_library(fields, canonical, expected_cid):
    assert multiformats_cid(canonical) == expected_cid
    assert_decodes_as_raw_sha256_of(expected_cid, canonical)


@pytest.mark.parametrize(("fields", "canonical", "expected_cid"), VECTORS)
def test_vector_cid_matches_the_hand_built_encoding(fields, canonical, expected_cid):
    assert content_id_of(canonical) == expected_cid
    result = address(fields)
    assert result.content_id == expected_cid
    assert result.canonical == canonical
    assert result.identity_id == f"did:{DEFAULT_NAMESPACE}:ipfs:{expected_cid}"
    assert expected_cid.startswith("bafkrei") and len(expected_cid) == 59


@pytest.mark.parametrize(("fields", "canonical", "expected_cid"), VECTORS)
def test_vector_identity_hash_matches_pycryptodome_keccak(fields, canonical, expected_cid):
    assert identity_hash_of(expected_cid) == pycryptodome_identity_hash(expected_cid)
    assert address(fields).identity_hash == pycryptodome_identity_hash(expected_cid)


def test_cid_of_empty_bytes_is_the_well_known_value():
    assert content_id_of(b"") == EMPTY_BYTES_CID
    assert multiformats_cid(b"") == EMPTY_BYTES_CID


def test_the_keccak_used_to_check_is_keccak_256_not_sha3_256():
    # Known answers: keccak-256("") and sha3-256("") differ only by padding, which this catches.
    empty = crypto_keccak.new(digest_bits=256, data=b"").hexdigest()
    assert empty == "c5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470"
    assert hashlib.sha3_256(b"").hexdigest() != empty


def test_identity_hash_is_0x_and_64_lower_hex_digits():
    value = identity_hash_of(EMPTY_BYTES_CID)
    assert value.startswith("0x") and len(value) == 66
    assert value[2:] == value[2:].lower() and int(value, 16) >= 0


# --- normalization and equivalence ----------------------------------------------------------


def test_key_order_does_not_change_the_id():
    forward = {"display_name": "Ada", "description": "Analyst", "image": "i", "external_reference": "e"}
    backward = dict(reversed(list(forward.items())))
    assert list(forward) != list(backward)
    assert cid_of_fields(forward) == cid_of_fields(backward)


def test_composed_and_decomposed_accents_give_the_same_id():
    composed = {"display_name": "Ren\u00e9e"}
    decomposed = {"display_name": "Rene\u0301e"}
    assert composed != decomposed
    assert cid_of_fields(composed) == cid_of_fields(decomposed)


def test_angstrom_sign_and_decomposed_diaereses_match_the_non_ascii_vector():
    # U+212B ANGSTROM SIGN is a canonical singleton that NFC maps to U+00C5.
    variant = {"display_name": "Zoe\u0308 \u212bngstro\u0308m", "description": "Cafe\u0301 \u2013 nai\u0308ve"}
    assert cid_of_fields(variant) == "bafkreiekqulclcix2lzlggj44mm3pp4gw2vr7uysipniqlpihigbe6glde"


@pytest.mark.parametrize("padding", [" ", "\t", "\n", "\r\n", "\u00a0", " \t\n\u00a0\u2003\u3000 "])
def test_surrounding_white_space_does_not_change_the_id(padding):
    plain = {"display_name": "Grace", "description": "Admiral"}
    padded = {"display_name": padding + "Grace" + padding, "description": "Admiral" + padding}
    assert cid_of_fields(padded) == cid_of_fields(plain)


def test_inner_white_space_is_kept():
    assert cid_of_fields({"display_name": "Grace  Hopper"}) != cid_of_fields({"display_name": "Grace Hopper"})


def test_none_valued_optional_fields_are_the_same_as_absent_ones():
    with_nones = {"display_name": "Linus", "description": None, "image": None, "external_reference": None}
    assert content_of(with_nones) == {"display_name": "Linus"}
    assert cid_of_fields(with_nones) == cid_of_fields({"display_name": "Linus"})


def test_unknown_keys_are_ignored():
    assert content_of({"display_name": "Ken", "owner": "0xabc", "id": 7}) == {"display_name": "Ken"}
    assert cid_of_fields({"display_name": "Ken", "owner": "0xabc"}) == cid_of_fields({"display_name": "Ken"})


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ({"display_name": "Alice"}, {"display_name": "alice"}),
        ({"display_name": "Alice"}, {"description": "Alice"}),
        ({"display_name": ""}, {}),
        ({"display_name": "a", "description": "b"}, {"display_name": "b", "description": "a"}),
        # NFC is canonical equivalence only: the compatibility ligature stays distinct from "fi".
        ({"display_name": "\ufb01"}, {"display_name": "fi"}),
    ],
)
def test_different_content_gives_a_different_id(one, other):
    assert cid_of_fields(one) != cid_of_fields(other)


def test_normalize_text_composes_then_strips():
    assert normalize_text("\u00a0 e\u0301\t\n") == "\u00e9"
    assert normalize_text("\u2000x\u2001") == "x"


def test_non_string_field_values_are_rejected():
    for value in (42, 1.5, True, b"bytes", ["a"], {"a": "b"}):
        with pytest.raises(TypeError):
            content_of({"display_name": value})


def test_lone_surrogate_is_rejected_by_canonicalization():
    with pytest.raises(rfc8785.CanonicalizationError):
        address({"display_name": "\ud800"})
    assert issubclass(rfc8785.CanonicalizationError, ValueError)


def test_canonical_bytes_accepts_any_mapping():
    from types import MappingProxyType

    assert canonical_bytes(MappingProxyType({"image": "x", "description": "y"})) == b'{"description":"y","image":"x"}'



PRINTABLE_ASCII = "".join(map(chr, range(0x20, 0x7F)))


@pytest.mark.parametrize("text", [PRINTABLE_ASCII, 'say "hi" \\ back/slash', " ", "\x7f", "\t", "é", "\u2028"])
def test_canonical_bytes_of_any_text_are_rfc8785s(text):
    content = {"display_name": text, "description": text[::-1], "image": "x"}
    assert canonical_bytes(content) == rfc8785.dumps(content)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(["display_name", "description", "image", "external_reference", "Zed", "é"]),
                       st.one_of(st.text(alphabet=PRINTABLE_ASCII), st.text())))
def test_property_canonical_bytes_are_rfc8785s(content):
    assert canonical_bytes(content) == rfc8785.dumps(content)

# --- identity ids ---------------------------------------------------------------------------


def test_identity_id_has_the_did_form():
    assert identity_id_of(EMPTY_BYTES_CID) == "did:identity:ipfs:" + EMPTY_BYTES_CID
    assert identity_id_of(EMPTY_BYTES_CID, "acme2") == "did:acme2:ipfs:" + EMPTY_BYTES_CID


@pytest.mark.parametrize("namespace", ["", "Identity", "id-x", "id_x", "id x", "id\u00e9", "id\n", "\uff49d"])
def test_identity_id_rejects_a_namespace_outside_lower_case_ascii_letters_and_digits(namespace):
    with pytest.raises(ValueError):
        identity_id_of(EMPTY_BYTES_CID, namespace)
    with pytest.raises(ValueError):
        address({"display_name": "x"}, namespace)


@pytest.mark.parametrize(
    "content_id",
    ["", "bafkrei", EMPTY_BYTES_CID.upper(), EMPTY_BYTES_CID + "a", EMPTY_BYTES_CID[:-1] + "v", "bafkrei" + "7" * 52],
)
def test_identity_id_rejects_something_that_is_not_a_content_id(content_id):
    with pytest.raises(ValueError):
        identity_id_of(content_id)


def test_parse_identity_id_accepts_what_identity_id_of_makes():
    for namespace in ("identity", "x", "a1b2", "0"):
        assert parse_identity_id(identity_id_of(EMPTY_BYTES_CID, namespace)) == (namespace, EMPTY_BYTES_CID)


def _garbage_identity_ids():
    digest = hashlib.sha256(b"").digest()
    dag_pb = str(CID("base32", 1, "dag-pb", multihash.digest(b"", "sha2-256")))
    sha512 = str(CID("base32", 1, "raw", multihash.digest(b"", "sha2-512")))
    base58 = str(CID("base58btc", 1, "raw", multihash.digest(b"", "sha2-256")))
    assert dag_pb.startswith("bafybei") and base58.startswith("z")
    assert multihash.unwrap(CID.decode(sha512).digest) != digest
    # The last character carries 3 digest bits and 2 spare bits; "v" sets a spare bit of "u".
    assert EMPTY_BYTES_CID.endswith("u")
    non_canonical_tail = EMPTY_BYTES_CID[:-1] + "v"
    # "7" after "bafkrei" turns the multihash length byte 0x20 into 0x23.
    wrong_length_byte = "bafkrei" + "7" * 52
    return {
        "empty": "",
        "wrong-scheme": "uri:identity:ipfs:" + EMPTY_BYTES_CID,
        "wrong-method": "did:identity:ipns:" + EMPTY_BYTES_CID,
        "missing-cid": "did:x:ipfs:",
        "missing-namespace": "did::ipfs:" + EMPTY_BYTES_CID,
        "bare-cid": EMPTY_BYTES_CID,
        "uppercase-namespace": "did:Identity:ipfs:" + EMPTY_BYTES_CID,
        "uppercase-cid": "did:identity:ipfs:" + EMPTY_BYTES_CID.upper(),
        "bad-base32-digit": "did:identity:ipfs:bafkrei" + "1" * 52,
        "short-cid": "did:identity:ipfs:" + EMPTY_BYTES_CID[:-1],
        "long-cid": "did:identity:ipfs:" + EMPTY_BYTES_CID + "a",
        "padded-cid": "did:identity:ipfs:" + EMPTY_BYTES_CID + "======",
        "dag-pb-cid": "did:identity:ipfs:" + dag_pb,
        "sha2-512-cid": "did:identity:ipfs:" + sha512,
        "base58-cid": "did:identity:ipfs:" + base58,
        "cidv0": "did:identity:ipfs:QmbFMke1KXqnYyBBWxB74N4c5SBnJMVAiMNRcGu6x1AwQH",
        "non-canonical-tail": "did:identity:ipfs:" + non_canonical_tail,
        "wrong-length-byte": "did:identity:ipfs:" + wrong_length_byte,
        "trailing-newline": "did:identity:ipfs:" + EMPTY_BYTES_CID + "\n",
        "leading-space": " did:identity:ipfs:" + EMPTY_BYTES_CID,
        "extra-segment": "did:identity:ipfs:" + EMPTY_BYTES_CID + ":x",
        "very-long-unfinished": "did:" + "a" * 1_000_000,
        "very-long-string": "did:identity:ipfs:" + "b" * 1_000_000,
        "lone-surrogate": "\ud800",
        "lone-surrogate-in-cid": "did:identity:ipfs:" + EMPTY_BYTES_CID[:-1] + "\ud800",
        "non-ascii-namespace": "did:\u0131dentity:ipfs:" + EMPTY_BYTES_CID,
    }


_GARBAGE = _garbage_identity_ids()


@pytest.mark.parametrize("text", list(_GARBAGE.values()), ids=list(_GARBAGE))
def test_parse_identity_id_returns_none_for_garbage(text):
    assert parse_identity_id(text) is None


# --- the record ------------------------------------------------------------------------------


def test_address_gathers_every_derived_value():
    fields = {"display_name": " Ada ", "description": "Countess", "extra": 1}
    result = address(fields, "acme")
    assert isinstance(result, ContentAddress)
    assert result.content == {"display_name": "Ada", "description": "Countess"}
    assert result.canonical == b'{"description":"Countess","display_name":"Ada"}'
    assert result.content_id == content_id_of(result.canonical)
    assert result.identity_id == identity_id_of(result.content_id, "acme")
    assert result.identity_hash == identity_hash_of(result.content_id)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.content_id = EMPTY_BYTES_CID


def test_content_fields_are_the_four_contract_fields():
    assert CONTENT_FIELDS == ("display_name", "description", "image", "external_reference")
    assert DEFAULT_NAMESPACE == "identity"


def test_module_imports_neither_flask_nor_database_nor_multiformats():
    # Loaded by path in a fresh interpreter, so the package __init__ and this test's imports don't count.
    probe = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('content_probe', {str(CONTENT_MODULE)!r})\n"
        "module = sys.modules['content_probe'] = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(module)\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'flask', 'sqlalchemy', 'flask_sqlalchemy', 'werkzeug', 'multiformats', 'identity'})\n"
        "print(','.join(bad))\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == ""


# --- properties -----------------------------------------------------------------------------

valid_text = st.text(alphabet=st.characters(exclude_categories=("Cs",)))
white_space = st.text(alphabet=" \t\n\r\x0b\x0c\u00a0\u2000\u2003\u3000\u2028\u202f", max_size=6)
field_dicts = st.dictionaries(st.sampled_from(CONTENT_FIELDS), valid_text)
namespaces = st.from_regex(r"[a-z0-9]{1,16}", fullmatch=True)


@settings(max_examples=200, deadline=None)
@given(fields=field_dicts, data=st.data())
def test_property_key_order_does_not_change_the_id(fields, data):
    shuffled = dict(data.draw(st.permutations(list(fields.items()))))
    assert cid_of_fields(shuffled) == cid_of_fields(fields)


@settings(max_examples=200, deadline=None)
@given(field=st.sampled_from(CONTENT_FIELDS), text=valid_text)
def test_property_normalization_form_of_the_input_does_not_change_the_id(field, text):
    cid = cid_of_fields({field: text})
    assert cid_of_fields({field: unicodedata.normalize("NFD", text)}) == cid
    assert cid_of_fields({field: unicodedata.normalize("NFC", text)}) == cid
    # Compatibility forms are a different text under NFC, but the same one as each other.
    nfkc = cid_of_fields({field: unicodedata.normalize("NFKC", text)})
    assert cid_of_fields({field: unicodedata.normalize("NFKD", text)}) == nfkc


@settings(max_examples=200, deadline=None)
@given(field=st.sampled_from(CONTENT_FIELDS), text=valid_text, before=white_space, after=white_space)
def test_property_surrounding_white_space_does_not_change_the_id(field, text, before, after):
    assert cid_of_fields({field: before + text + after}) == cid_of_fields({field: text})


@settings(max_examples=200, deadline=None)
@given(fields=field_dicts)
def test_property_cid_decodes_to_v1_raw_sha256_of_the_canonical_bytes(fields):
    result = address(fields)
    assert_decodes_as_raw_sha256_of(result.content_id, result.canonical)
    assert result.content_id == multiformats_cid(result.canonical)
    assert result.identity_hash == pycryptodome_identity_hash(result.content_id)


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=4096))
def test_property_cid_of_any_bytes_matches_multiformats(data):
    assert content_id_of(data) == multiformats_cid(data)


@settings(max_examples=200, deadline=None)
@given(fields=field_dicts)
def test_property_canonical_bytes_parse_back_to_the_content(fields):
    content = content_of(fields)
    canonical = canonical_bytes(content)
    assert json.loads(canonical) == content
    # For a flat object of strings with ASCII keys, JCS coincides with this json.dumps setting.
    assert canonical == json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=64), namespace=namespaces)
def test_property_parse_identity_id_inverts_identity_id_of(data, namespace):
    cid = content_id_of(data)
    assert parse_identity_id(identity_id_of(cid, namespace)) == (namespace, cid)


@settings(max_examples=200, deadline=None)
@given(text=st.text())
def test_property_parse_identity_id_never_raises(text):
    result = parse_identity_id(text)
    assert result is None or identity_id_of(result[1], result[0]) == text


@settings(max_examples=200, deadline=None)
@given(one=field_dicts, other=field_dicts)
def test_property_different_content_gives_a_different_id(one, other):
    if content_of(one) != content_of(other):
        assert cid_of_fields(one) != cid_of_fields(other)
