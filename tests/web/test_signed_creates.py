"""Signed authorship: POST /identity/preview gives the typed data a creator signs, a create carries the signature,
and anyone checks it from the fetched Identity with a stock library (ethers' verifyTypedData, eth-account)."""

import pytest
from eth_account import Account
from eth_account.messages import encode_typed_data
from sqlalchemy import func, select

from identity.core import authorship, keys
from identity.storage.database import db
from identity.storage.models import Change, Identity
from tests.common.authorship import variant
from tests.wallets import address_of, private_key, sign_typed_data

CREATOR_KEY = private_key("creator")
CREATOR = address_of(CREATOR_KEY)
OTHER_KEY = private_key("not the creator")
BODY = {"display_name": "Ada Lovelace", "description": "First programmer"}


@pytest.fixture
def creator_key(issue_key):
    """A User key of the wallet whose private key the tests sign with."""
    return issue_key(CREATOR)


def preview(client, key, body=BODY):
    response = client.post("/identity/preview", json=body, headers={"x-api-key": key})
    assert response.status_code == 200, response.text
    return response.get_json()


def typed_data_of(identity):
    """The typed data of an Identity as anyone rebuilds it from the contract: its content id, the fixed domain."""
    return {
        "types": {"EIP712Domain": [{"name": "name", "type": "string"}, {"name": "version", "type": "string"}],
                  "Identity": [{"name": "contentId", "type": "string"}]},
        "primaryType": "Identity",
        "domain": {"name": "Identity", "version": "1"},
        "message": {"contentId": identity["identity_id"].rsplit(":", 1)[1]},
    }


def test_a_signed_create_is_stored_and_ethers_and_eth_account_recover_the_creator_from_the_fetched_identity(
        client, creator_key, ethers):
    typed = preview(client, creator_key)["typed_data"]
    signature = sign_typed_data([(CREATOR_KEY, typed)])[0]
    created = client.post("/identity", json={**BODY, "signature": signature}, headers={"x-api-key": creator_key})
    assert created.status_code == 201, created.text
    fetched = client.get(created.headers["Location"], headers={"x-api-key": creator_key}).get_json()
    assert fetched["creator_signature"] == created.get_json()["creator_signature"] == signature.lower()
    assert fetched["creator"]["wallet"] == CREATOR
    [verified] = ethers([{"op": "verifyTypedData", "typedData": typed_data_of(fetched),
                          "signature": fetched["creator_signature"]}])
    assert verified == {"address": CREATOR}
    recovered = Account.recover_message(encode_typed_data(full_message=typed_data_of(fetched)),
                                        signature=fetched["creator_signature"])
    assert recovered == CREATOR


def test_an_unsigned_create_has_a_null_creator_signature(client, creator_key):
    created = client.post("/identity", json=BODY, headers={"x-api-key": creator_key}).get_json()
    assert created["creator_signature"] is None


def test_a_signature_by_another_wallet_is_422_and_nothing_is_stored(app, client, creator_key):
    signature = sign_typed_data([(OTHER_KEY, preview(client, creator_key)["typed_data"])])[0]
    response = client.post("/identity", json={**BODY, "signature": signature}, headers={"x-api-key": creator_key})
    assert response.status_code == 422
    [message] = response.get_json()["errors"]["signature"]
    assert address_of(OTHER_KEY) in message and CREATOR in message
    with app.app_context():
        assert db.session.execute(select(func.count()).select_from(Identity)).scalar_one() == 0
        assert db.session.execute(select(func.count()).select_from(Change)).scalar_one() == 0
        db.session.commit()


def test_a_signature_of_other_content_is_422(client, creator_key):
    signature = sign_typed_data([(CREATOR_KEY, preview(client, creator_key, {"display_name": "Other"})["typed_data"])])[0]
    response = client.post("/identity", json={**BODY, "signature": signature}, headers={"x-api-key": creator_key})
    assert response.status_code == 422 and "signature" in response.get_json()["errors"]


def test_an_admin_creates_for_a_wallet_that_signed(client, admin_key):
    body = {**BODY, "creator": CREATOR.lower()}
    typed = preview(client, admin_key, body)["typed_data"]
    creator_signature, other_signature = sign_typed_data([(CREATOR_KEY, typed), (OTHER_KEY, typed)])
    refused = client.post("/identity", json={**body, "signature": other_signature}, headers={"x-api-key": admin_key})
    assert refused.status_code == 422
    created = client.post("/identity", json={**body, "signature": creator_signature}, headers={"x-api-key": admin_key})
    assert created.status_code == 201
    assert created.get_json()["creator"]["wallet"] == CREATOR
    assert created.get_json()["creator"]["role"] == "User"  # a wallet never seen before
    assert Account.recover_message(encode_typed_data(full_message=typed), signature=created.get_json()["creator_signature"]) == CREATOR


def test_a_user_key_may_not_create_for_another_wallet_even_with_its_signature(client, user_key):
    body = {**BODY, "creator": CREATOR}
    typed = authorship.typed_data(preview(client, user_key, {"display_name": BODY["display_name"],
                                                             "description": BODY["description"]})["content_id"])
    signature = sign_typed_data([(CREATOR_KEY, typed)])[0]
    response = client.post("/identity", json={**body, "signature": signature}, headers={"x-api-key": user_key})
    assert response.status_code == 403


def test_known_content_is_409_signed_or_not_and_the_identity_is_unchanged(client, creator_key):
    first = client.post("/identity", json=BODY, headers={"x-api-key": creator_key}).get_json()
    signature = sign_typed_data([(CREATOR_KEY, preview(client, creator_key)["typed_data"])])[0]
    again = client.post("/identity", json={**BODY, "signature": signature}, headers={"x-api-key": creator_key})
    assert again.status_code == 409
    assert again.get_json()["identity_id"] == first["identity_id"]
    fetched = client.get(f"/identity/{first['identity_id']}", headers={"x-api-key": creator_key}).get_json()
    assert fetched["creator_signature"] is None


def test_a_signature_with_v_as_0_or_1_or_in_upper_case_is_stored_in_its_one_form(client, creator_key):
    signature = sign_typed_data([(CREATOR_KEY, preview(client, creator_key)["typed_data"])])[0]
    sent = "0x" + variant(signature, v=int(signature[-2:], 16) - 27)[2:].upper()
    created = client.post("/identity", json={**BODY, "signature": sent}, headers={"x-api-key": creator_key})
    assert created.status_code == 201, created.text
    assert created.get_json()["creator_signature"] == signature.lower()


@pytest.mark.parametrize("signature, words", [
    ("0x1234", "has 4 characters"),
    ("0x" + "zz" * 65, "not a hex digit"),
    ("1b" * 66, "does not start with 0x"),
    ("0x" + "11" * 64 + "05", "v is 5"),
    (42, "Not a valid string"),
])
def test_a_malformed_signature_is_422_saying_what_is_wrong(client, creator_key, signature, words):
    response = client.post("/identity", json={**BODY, "signature": signature}, headers={"x-api-key": creator_key})
    assert response.status_code == 422
    assert words in " ".join(response.get_json()["errors"]["signature"])


def test_the_high_s_twin_of_a_valid_signature_is_refused(client, creator_key):
    signature = sign_typed_data([(CREATOR_KEY, preview(client, creator_key)["typed_data"])])[0]
    response = client.post("/identity", json={**BODY, "signature": variant(signature, flip_s=True)},
                           headers={"x-api-key": creator_key})
    assert response.status_code == 422 and "EIP-2" in response.get_json()["errors"]["signature"][0]


# --- the preview -------------------------------------------------------------------------------------

def test_the_preview_gives_the_normalized_content_its_ids_and_the_typed_data_and_writes_nothing(app, client, creator_key):
    body = {"display_name": "  Cafe\u0301  ", "image": None}
    previewed = preview(client, creator_key, body)
    assert previewed["content"] == {"display_name": "Caf\u00e9"}
    assert previewed["identity_id"] == f"did:identity:ipfs:{previewed['content_id']}"
    assert previewed["identity_hash"].startswith("0x") and previewed["exists"] is False
    assert previewed["typed_data"] == authorship.typed_data(previewed["content_id"])
    with app.app_context():
        assert db.session.execute(select(func.count()).select_from(Identity)).scalar_one() == 0
        db.session.commit()
    created = client.post("/identity", json=body, headers={"x-api-key": creator_key}).get_json()
    assert created["identity_id"] == previewed["identity_id"]
    assert preview(client, creator_key, body)["exists"] is True


def test_the_preview_refuses_what_a_create_refuses_but_known_content(client, creator_key):
    headers = {"x-api-key": creator_key}
    assert client.post("/identity/preview", json={"display_name": ""}, headers=headers).status_code == 422
    assert client.post("/identity/preview", json={**BODY, "creator": address_of(OTHER_KEY)}, headers=headers).status_code == 403
    assert client.post("/identity/preview", json={**BODY, "signature": "0x12"}, headers=headers).status_code == 422
    assert client.post("/identity/preview", json=BODY).status_code == 401


def test_a_read_only_key_may_not_preview(app, client):
    with app.app_context():
        read_key, _ = keys.issue_key(CREATOR, scope="read")
    assert client.post("/identity/preview", json=BODY, headers={"x-api-key": read_key}).status_code == 403
