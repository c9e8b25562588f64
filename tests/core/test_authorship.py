"""Signed authorship (identity/core/authorship.py): the EIP-712 object a creator signs, checked both ways
with an independent wallet, ethers: what ethers signs recovers here, and what is signed here ethers verifies."""

import pytest
from eth_account import Account
from eth_account.messages import encode_defunct, encode_typed_data
from eth_utils import keccak

from identity.core import authorship
from identity.core.content import canonical_bytes, content_id_of
from identity.core.signatures import SignatureError
from tests.common.authorship import variant

CONTENT_ID = content_id_of(canonical_bytes({"display_name": "Ada Lovelace"}))
OTHER_CONTENT_ID = content_id_of(canonical_bytes({"display_name": "Charles Babbage"}))
KEY = "0x" + keccak(b"tests/core creator").hex()
OTHER_KEY = "0x" + keccak(b"tests/core someone else").hex()
CREATOR = Account.from_key(KEY).address


def sign_here(content_id, key=KEY):
    """eth-account's signature of typed_data(content_id), as 0x and 130 hex digits."""
    return Account.sign_message(encode_typed_data(full_message=authorship.typed_data(content_id)), key).signature.to_0x_hex()




@pytest.fixture(scope="module")
def signed(ethers):
    """One node run: ethers signs the claims, and verifies and hashes what eth-account made here."""
    claim = authorship.typed_data(CONTENT_ID)
    made_here = sign_here(CONTENT_ID)
    answers = ethers([
        {"op": "signTypedData", "privateKey": KEY, "typedData": claim},
        {"op": "signTypedData", "privateKey": OTHER_KEY, "typedData": claim},
        {"op": "signTypedData", "privateKey": KEY, "typedData": authorship.typed_data(OTHER_CONTENT_ID)},
        {"op": "verifyTypedData", "typedData": claim, "signature": made_here},
        {"op": "verifyTypedData", "typedData": authorship.typed_data(OTHER_CONTENT_ID), "signature": made_here},
        {"op": "verifyTypedData", "typedData": claim, "signature": variant(made_here, v=bytes.fromhex(made_here[2:])[64] - 27)},
        {"op": "verifyTypedData", "typedData": claim, "signature": variant(made_here, flip_s=True)},
        {"op": "hashTypedData", "typedData": claim},
        {"op": "address", "privateKey": KEY},
    ])
    names = ("by_creator", "by_other", "of_other_content", "verified", "verified_for_other_content",
             "verified_v_0_or_1", "verified_high_s", "hash", "creator")
    return dict(zip(names, answers, strict=True)) | {"made_here": made_here}


def test_typed_data_is_what_eth_sign_typed_data_v4_takes():
    assert authorship.typed_data(CONTENT_ID) == {
        "types": {
            "EIP712Domain": [{"name": "name", "type": "string"}, {"name": "version", "type": "string"}],
            "Identity": [{"name": "contentId", "type": "string"}],
        },
        "primaryType": "Identity",
        "domain": {"name": "Identity", "version": "1"},
        "message": {"contentId": CONTENT_ID},
    }


@pytest.mark.parametrize("content_id", [CONTENT_ID, OTHER_CONTENT_ID, "bafkrei" + "a" * 52, "ünïcode"])
def test_the_signed_hashes_are_the_ones_eth_account_works_out_from_the_typed_data(content_id):
    assert authorship.signable(content_id) == encode_typed_data(full_message=authorship.typed_data(content_id))


def test_typed_data_is_a_fresh_object_each_time():
    claim = authorship.typed_data(CONTENT_ID)
    claim["domain"]["chainId"] = 1
    claim["types"]["Identity"].append({"name": "extra", "type": "string"})
    assert authorship.typed_data(CONTENT_ID) == authorship.typed_data(CONTENT_ID)
    assert "chainId" not in authorship.typed_data(CONTENT_ID)["domain"]


def test_ethers_derives_the_creators_wallet_as_eth_account_does(signed):
    assert signed["creator"] == {"address": CREATOR}


def test_the_digest_is_the_one_ethers_computes_from_the_domain_alone(signed):
    signable = encode_typed_data(full_message=authorship.typed_data(CONTENT_ID))
    digest = keccak(b"\x19" + signable.version + signable.header + signable.body)
    assert signed["hash"] == {"hash": "0x" + digest.hex()}


def test_an_ethers_signed_claim_recovers_to_its_creator(signed):
    assert authorship.recover_author(CONTENT_ID, signed["by_creator"]["signature"]) == CREATOR


def test_a_claim_signed_by_another_wallet_recovers_to_that_wallet(signed):
    recovered = authorship.recover_author(CONTENT_ID, signed["by_other"]["signature"])
    assert recovered == Account.from_key(OTHER_KEY).address != CREATOR


def test_a_claim_on_other_content_does_not_recover_to_the_creator(signed):
    assert authorship.recover_author(CONTENT_ID, signed["of_other_content"]["signature"]) != CREATOR
    assert authorship.recover_author(OTHER_CONTENT_ID, signed["of_other_content"]["signature"]) == CREATOR


def test_ethers_signs_deterministically_as_eth_account_does(signed):
    # RFC 6979 nonces on both sides: one key and one digest give one signature.
    assert signed["by_creator"]["signature"] == signed["made_here"]


def test_ethers_verify_typed_data_accepts_a_claim_signed_with_eth_account(signed):
    assert signed["verified"] == {"address": CREATOR}
    assert signed["verified_for_other_content"]["address"] != CREATOR


def test_v_written_as_0_or_1_is_accepted_here_and_by_ethers(signed):
    made_here = signed["made_here"]
    as_recovery_id = variant(made_here, v=bytes.fromhex(made_here[2:])[64] - 27)
    assert authorship.recover_author(CONTENT_ID, as_recovery_id) == CREATOR
    assert signed["verified_v_0_or_1"] == {"address": CREATOR}


def test_the_high_s_twin_of_a_signature_is_refused_here_as_ethers_refuses_it(signed):
    # (r, n - s) signs the same digest for the same key; EIP-2 and ethers accept only the lower s, so a
    # stored creator_signature is always one that ethers' verifyTypedData can check.
    twin = variant(signed["made_here"], flip_s=True)
    with pytest.raises(SignatureError, match="upper half"):
        authorship.recover_author(CONTENT_ID, twin)
    assert "error" in signed["verified_high_s"]


def test_a_personal_sign_signature_of_the_content_id_is_no_claim():
    personal = Account.sign_message(encode_defunct(text=CONTENT_ID), KEY).signature.to_0x_hex()
    assert authorship.recover_author(CONTENT_ID, personal) != CREATOR


@pytest.mark.parametrize("cut", [2, 1, 130])
def test_a_truncated_signature_is_a_signature_error(signed, cut):
    signature = signed["by_creator"]["signature"]
    with pytest.raises(SignatureError, match=f"{130 - cut} characters after 0x"):
        authorship.recover_author(CONTENT_ID, signature[:-cut])


def test_a_signature_without_0x_is_a_signature_error(signed):
    with pytest.raises(SignatureError, match="does not start with 0x"):
        authorship.recover_author(CONTENT_ID, signed["by_creator"]["signature"][2:])
