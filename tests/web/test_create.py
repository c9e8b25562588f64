"""POST /identity and /identities: what a successful create returns, and who may create for whom."""

import hashlib
import re

import pytest
import rfc8785
from Crypto.Hash import keccak
from multiformats import CID, multihash
from sqlalchemy import select

from identity.storage.database import db
from identity.storage.models import User
from tests.common.apps import ADMIN_WALLET, OTHER_WALLET, USER_WALLET
from tests.common.contract import CONTRACT_KEYS, USER_KEYS

TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")


def expected_content_id(content):
    """The CID computed independently of the service: JCS bytes, sha2-256, CIDv1 raw, base32."""
    data = rfc8785.dumps(content)
    return str(CID("base32", 1, "raw", multihash.digest(data, "sha2-256")))


def test_create_returns_201_with_location_and_the_identity(create):
    response = create({"display_name": "Ada Lovelace", "description": "First programmer"})
    assert response.status_code == 201
    body = response.get_json()
    assert response.headers["Location"] == f"/identity/{body['identity_id']}"
    assert body["display_name"] == "Ada Lovelace"
    assert body["description"] == "First programmer"
    assert response.mimetype == "application/json"


def test_both_create_paths_are_served(create):
    first = create({"display_name": "one"}, path="/identity")
    second = create({"display_name": "two"}, path="/identities")
    assert (first.status_code, second.status_code) == (201, 201)
    assert set(first.get_json()) == set(second.get_json()) == CONTRACT_KEYS


def test_every_contract_key_is_present_with_null_for_absent_values(create):
    body = create({"display_name": "Only a name"}).get_json()
    assert set(body) == CONTRACT_KEYS
    assert set(body["creator"]) == USER_KEYS
    for absent in ("description", "image", "external_reference", "corpora_id", "semantic"):
        assert body[absent] is None


def test_new_identity_has_the_off_chain_defaults(create):
    body = create({"display_name": "Defaults"}).get_json()
    assert body["vault_id"] == "0"
    assert body["num_positions"] == 0
    assert body["assets_sum"] == body["conviction_sum"] == body["conviction_price"] == "0"
    assert body["status"] == "complete"
    assert body["isUser"] is False
    assert body["user_conviction"] == body["user_conviction_value"] == "0"
    assert UUID.fullmatch(body["id"])


def test_timestamps_are_rfc3339_utc_with_microseconds(create):
    body = create({"display_name": "Clock"}).get_json()
    for value in (body["created_at"], body["updated_at"], body["creator"]["created_at"], body["creator"]["updated_at"]):
        assert TIMESTAMP.fullmatch(value), value
    assert body["creator"]["last_login"] is None  # a key's use is not a sign-in (tests/web/test_signin.py: one is)


def test_optional_fields_given_are_returned(create):
    sent = {
        "display_name": "Full",
        "description": "Line one\nLine two\tTabbed",
        "image": "ipfs://bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku",
        "external_reference": "https://example.org/full?x=1#frag",
    }
    body = create(sent).get_json()
    assert {k: body[k] for k in sent} == sent


def test_identity_id_is_the_did_of_the_content_cid(create):
    sent = {"display_name": "Grace Hopper", "external_reference": "https://example.org/grace"}
    body = create(sent).get_json()
    content_id = expected_content_id(sent)
    assert content_id.startswith("bafkrei")
    assert body["identity_id"] == f"did:identity:ipfs:{content_id}"


def test_identity_hash_is_keccak_of_the_ipfs_uri(create):
    body = create({"display_name": "Hashing"}).get_json()
    content_id = body["identity_id"].rsplit(":", 1)[1]
    expected = keccak.new(digest_bits=256, data=f"ipfs://{content_id}".encode()).hexdigest()
    assert body["identity_hash"] == "0x" + expected


def test_values_are_nfc_normalized_and_trimmed_before_hashing(create):
    body = create({"display_name": "  Cafe\u0301\t", "description": "\n e\u0301te\u0301 "}).get_json()
    assert body["display_name"] == "Café"
    assert body["description"] == "été"
    content = {"display_name": "Café", "description": "été"}
    assert body["identity_id"].endswith(expected_content_id(content))


def test_null_optional_fields_are_the_same_as_absent(create):
    with_nulls = create({"display_name": "Nulls", "description": None, "image": None, "creator": None})
    assert with_nulls.status_code == 201
    assert with_nulls.get_json()["identity_id"].endswith(expected_content_id({"display_name": "Nulls"}))


def test_create_same_content_twice_is_409_naming_the_existing_identity(create):
    first = create({"display_name": "Twice", "description": "same"}).get_json()
    again = create({"description": " same", "display_name": "Twice "})
    assert again.status_code == 409
    assert again.mimetype == "application/problem+json"
    assert again.get_json()["identity_id"] == first["identity_id"]
    assert again.headers["Location"] == f"/identity/{first['identity_id']}"


def test_same_content_by_another_creator_is_still_409(create, admin_key):
    create({"display_name": "Shared"})
    again = create({"display_name": "Shared", "creator": OTHER_WALLET}, key=admin_key)
    assert again.status_code == 409


def test_a_409_leaves_no_user_for_a_creator_it_would_have_made(app, create, admin_key):
    create({"display_name": "Shared"})
    assert create({"display_name": "Shared", "creator": OTHER_WALLET}, key=admin_key).status_code == 409
    with app.app_context():
        assert db.session.execute(select(User.wallet).where(User.wallet == OTHER_WALLET)).all() == []


@pytest.mark.parametrize("app_config", [{"IDENTITY_DID_NAMESPACE": "acme"}])
def test_did_namespace_is_a_setting(create):
    response = create({"display_name": "ns"})
    assert response.get_json()["identity_id"].startswith("did:acme:ipfs:bafkrei")


def test_creator_defaults_to_the_wallet_of_the_calling_key(create):
    body = create({"display_name": "Mine"}).get_json()
    assert body["creator"]["wallet"] == USER_WALLET
    assert body["creator"]["role"] == "User"
    assert body["creator"]["api_key"] == ""


def test_user_key_may_name_itself_as_creator_in_any_case(create):
    response = create({"display_name": "Lower", "creator": USER_WALLET.lower()})
    assert response.status_code == 201
    assert response.get_json()["creator"]["wallet"] == USER_WALLET


def test_user_key_naming_another_creator_is_403(create):
    response = create({"display_name": "Not mine", "creator": OTHER_WALLET})
    assert response.status_code == 403
    assert response.mimetype == "application/problem+json"


def test_admin_key_may_create_for_an_unseen_wallet_which_becomes_a_user(create, admin_key):
    response = create({"display_name": "For someone", "creator": OTHER_WALLET.lower()}, key=admin_key)
    assert response.status_code == 201
    creator = response.get_json()["creator"]
    assert creator["wallet"] == OTHER_WALLET
    assert creator["role"] == "User"
    assert creator["last_login"] is None


def test_admin_creating_for_a_known_user_uses_that_user(create, admin_key):
    own = create({"display_name": "Known user"}).get_json()
    on_behalf = create({"display_name": "On behalf", "creator": USER_WALLET}, key=admin_key).get_json()
    assert on_behalf["creator"]["id"] == own["creator"]["id"]


def test_admin_key_defaults_to_its_own_wallet(create, admin_key):
    body = create({"display_name": "Admin's own"}, key=admin_key).get_json()
    assert body["creator"]["wallet"] == ADMIN_WALLET
    assert body["creator"]["role"] == "Admin"


@pytest.mark.parametrize("name", ["x", "x" * 256, "名前", "🦄 emoji", "a\u00a0b"])
def test_display_names_within_the_rules_are_accepted(create, name):
    response = create({"display_name": name})
    assert response.status_code == 201, response.get_json()
    assert response.get_json()["display_name"] == name


def test_content_id_digest_is_sha256_of_canonical_bytes(create):
    sent = {"display_name": "Digest", "image": "https://example.org/i.png"}
    content_id = create(sent).get_json()["identity_id"].rsplit(":", 1)[1]
    cid = CID.decode(content_id)
    assert cid.codec.name == "raw"
    assert cid.hashfun.name == "sha2-256"
    assert cid.raw_digest == hashlib.sha256(b'{"display_name":"Digest","image":"https://example.org/i.png"}').digest()
