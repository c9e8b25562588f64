"""PATCH /identity/<id> and /identities/<id>: what an Admin may change, what it answers, and removal."""

import json

import pytest

from identity.storage.models import MAX_UINT256
from tests.common.apps import ADMIN_WALLET, USER_WALLET

IMMUTABLE = "content is immutable: its id is its address; create a new identity"


@pytest.fixture
def identity(create, admin_key):
    """An identity created by the User key, as a dict."""
    response = create({"display_name": "Curated", "description": "to be curated"})
    assert response.status_code == 201
    return response.get_json()


@pytest.fixture
def patch(client, admin_key):
    """patch(identity_id, body, key=admin_key, path="/identity", **headers) -> the response."""

    def send(identity_id, body, key=None, path="/identity", content_type="application/json", headers=None):
        data = body if isinstance(body, str | bytes) else json.dumps(body)
        return client.patch(
            f"{path}/{identity_id}", data=data, content_type=content_type,
            headers={"x-api-key": key or admin_key, **(headers or {})},
        )

    return send


def fetch(client, key, identity_id, suffix=""):
    return client.get(f"/identity/{identity_id}{suffix}", headers={"x-api-key": key})


def test_admin_patch_changes_every_curated_field_and_returns_the_whole_identity(patch, identity, client, user_key):
    body = {
        "status": "pending", "vault_id": str(MAX_UINT256), "num_positions": 2**53 - 1, "assets_sum": "12",
        "conviction_sum": "340282366920938463463374607431768211456", "conviction_price": "0",
        "corpora_id": "corpus-7", "semantic": "person",
    }
    response = patch(identity["identity_id"], body)
    assert response.status_code == 200
    updated = response.get_json()
    assert {name: updated[name] for name in body} == body
    assert set(updated) == set(identity)
    # Everything else is as it was; updated_at moved.
    unchanged = set(identity) - set(body) - {"updated_at", "creator"}
    assert {name: updated[name] for name in unchanged} == {name: identity[name] for name in unchanged}
    assert updated["updated_at"] > identity["updated_at"]
    assert fetch(client, user_key, identity["identity_id"]).get_json() == updated


def test_both_paths_and_both_media_types_are_served(patch, identity):
    first = patch(identity["identity_id"], {"status": "pending"}, path="/identities")
    second = patch(identity["identity_id"], {"status": "error"}, content_type="application/merge-patch+json")
    assert (first.status_code, second.status_code) == (200, 200)
    assert second.get_json()["status"] == "error"


def test_num_positions_may_be_written_with_a_zero_fraction_as_json_schema_allows(patch, identity):
    response = patch(identity["identity_id"], '{"num_positions": 12.0}')
    assert response.status_code == 200
    assert response.get_json()["num_positions"] == 12


def test_null_clears_corpora_id_and_semantic(patch, identity):
    patch(identity["identity_id"], {"corpora_id": "c", "semantic": "s"})
    response = patch(identity["identity_id"], {"corpora_id": None, "semantic": None})
    assert response.status_code == 200
    assert (response.get_json()["corpora_id"], response.get_json()["semantic"]) == (None, None)


def test_user_key_is_403_and_changes_nothing(patch, identity, client, user_key):
    response = patch(identity["identity_id"], {"status": "removed"}, key=user_key)
    assert response.status_code == 403
    assert response.mimetype == "application/problem+json"
    assert fetch(client, user_key, identity["identity_id"]).get_json()["status"] == "complete"


def test_user_key_is_403_even_with_an_invalid_body(patch, identity, user_key):
    assert patch(identity["identity_id"], {"nickname": 1}, key=user_key).status_code == 403


def test_no_key_is_401(client, identity):
    response = client.patch(f"/identity/{identity['identity_id']}", json={"status": "removed"})
    assert response.status_code == 401
    assert "WWW-Authenticate" in response.headers


def test_unknown_identity_is_404(patch):
    assert patch("did:identity:ipfs:bafkreie4qnqptqtkp7dhls3cv5mstrcf52olspzugrjhduqgsxtxrmyxci", {"status": "removed"}).status_code == 404
    assert patch("not-an-id", {"status": "removed"}).status_code == 404
    assert patch("did:identity:ipfs:bafkrei%00", {"status": "removed"}).status_code == 404


@pytest.mark.parametrize("field", ["display_name", "description", "image", "external_reference"])
def test_a_content_field_is_422_content_is_immutable(patch, identity, field):
    response = patch(identity["identity_id"], {field: "https://example.org/x", "status": "pending"})
    assert response.status_code == 422
    assert response.get_json()["errors"] == {field: [IMMUTABLE]}


@pytest.mark.parametrize(
    "body, field",
    [
        ({"nickname": "x"}, "nickname"),
        ({"status": "deleted"}, "status"),
        ({"status": None}, "status"),
        ({"status": 1}, "status"),
        ({"vault_id": 5}, "vault_id"),
        ({"vault_id": "-1"}, "vault_id"),
        ({"vault_id": "007"}, "vault_id"),
        ({"vault_id": "1e3"}, "vault_id"),
        ({"assets_sum": str(MAX_UINT256 + 1)}, "assets_sum"),
        ({"conviction_sum": "9" * 79}, "conviction_sum"),
        ({"conviction_price": None}, "conviction_price"),
        ({"num_positions": -1}, "num_positions"),
        ({"num_positions": 2**53}, "num_positions"),
        ({"num_positions": "3"}, "num_positions"),
        ({"num_positions": 1.5}, "num_positions"),
        ({"num_positions": 1e300}, "num_positions"),
        ({"num_positions": True}, "num_positions"),
        ({"corpora_id": "x" * 257}, "corpora_id"),
        ({"semantic": "a\x00b"}, "semantic"),
        ({"semantic": ["a"]}, "semantic"),
    ],
)
def test_invalid_or_unknown_field_is_422_naming_it(patch, identity, client, user_key, body, field):
    response = patch(identity["identity_id"], body)
    assert response.status_code == 422
    problem = response.get_json()
    assert set(problem["errors"]) == {field}
    assert field in problem["detail"]
    assert fetch(client, user_key, identity["identity_id"]).get_json()["updated_at"] == identity["updated_at"]


@pytest.mark.parametrize("body", ["{}", ""])
def test_empty_body_is_422_naming_the_body(patch, identity, body):
    response = patch(identity["identity_id"], body)
    assert response.status_code == 422
    assert set(response.get_json()["errors"]) == {"body"}


def test_body_that_is_not_an_object_is_422(patch, identity):
    assert patch(identity["identity_id"], "[1]").status_code == 422


def test_invalid_json_is_400_and_other_media_type_is_415(patch, identity):
    assert patch(identity["identity_id"], "{nope").status_code == 400
    assert patch(identity["identity_id"], '{"status": "pending"}', content_type="text/plain").status_code == 415


def test_patch_changes_the_etag_and_the_new_etag_is_what_get_serves(patch, identity, client, admin_key):
    before = fetch(client, admin_key, identity["identity_id"]).headers["ETag"]
    response = patch(identity["identity_id"], {"num_positions": 4})
    assert response.headers["ETag"] != before
    assert response.headers["ETag"] == fetch(client, admin_key, identity["identity_id"]).headers["ETag"]


def test_if_match_with_the_current_etag_applies_the_change(patch, identity, client, admin_key):
    etag = fetch(client, admin_key, identity["identity_id"]).headers["ETag"]
    response = patch(identity["identity_id"], {"status": "pending"}, headers={"If-Match": etag})
    assert response.status_code == 200
    assert response.get_json()["status"] == "pending"


def test_if_match_with_a_stale_etag_is_412_and_changes_nothing(patch, identity, client, admin_key):
    etag = fetch(client, admin_key, identity["identity_id"]).headers["ETag"]
    assert patch(identity["identity_id"], {"status": "pending"}, headers={"If-Match": etag}).status_code == 200
    current = fetch(client, admin_key, identity["identity_id"])
    response = patch(identity["identity_id"], {"status": "error"}, headers={"If-Match": etag})
    assert response.status_code == 412
    assert response.mimetype == "application/problem+json"
    after = fetch(client, admin_key, identity["identity_id"])
    assert after.get_json() == current.get_json()
    assert after.headers["ETag"] == current.headers["ETag"]


def test_if_match_star_matches_an_existing_identity_and_a_weak_tag_never_does(patch, identity, client, admin_key):
    assert patch(identity["identity_id"], {"status": "pending"}, headers={"If-Match": "*"}).status_code == 200
    etag = fetch(client, admin_key, identity["identity_id"]).headers["ETag"]
    assert patch(identity["identity_id"], {"status": "error"}, headers={"If-Match": "W/" + etag}).status_code == 412


def test_a_patch_that_changes_nothing_keeps_updated_at(patch, identity):
    response = patch(identity["identity_id"], {"status": "complete", "vault_id": "0"})
    assert response.status_code == 200
    assert response.get_json()["updated_at"] == identity["updated_at"]


def test_removed_identity_is_410_with_its_id_on_get_and_content_for_every_key(patch, identity, client, admin_key, user_key):
    assert patch(identity["identity_id"], {"status": "removed"}).status_code == 200
    for key in (admin_key, user_key):
        for path in ("/identity", "/identities"):
            for suffix in ("", "/content"):
                response = client.get(f"{path}/{identity['identity_id']}{suffix}", headers={"x-api-key": key})
                assert response.status_code == 410
                assert response.mimetype == "application/problem+json"
                assert response.get_json()["identity_id"] == identity["identity_id"]


def test_creating_removed_content_again_is_409_pointing_at_it(patch, identity, create):
    patch(identity["identity_id"], {"status": "removed"})
    response = create({"display_name": "Curated", "description": "to be curated"})
    assert response.status_code == 409
    assert response.get_json()["identity_id"] == identity["identity_id"]


def test_another_status_brings_a_removed_identity_back(patch, identity, client, user_key):
    patch(identity["identity_id"], {"status": "removed"})
    response = patch(identity["identity_id"], {"status": "complete"})
    assert response.status_code == 200
    assert fetch(client, user_key, identity["identity_id"]).status_code == 200
    assert fetch(client, user_key, identity["identity_id"], "/content").status_code == 200


def test_cli_set_status_removes_and_brings_back(runner, identity, client, user_key):
    result = runner.invoke(args=["identities", "set-status", identity["identity_id"], "removed"])
    assert result.exit_code == 0, result.output
    assert fetch(client, user_key, identity["identity_id"]).status_code == 410
    result = runner.invoke(args=["identities", "set-status", identity["identity_id"], "complete", "--by", ADMIN_WALLET.lower()])
    assert result.exit_code == 0, result.output
    assert fetch(client, user_key, identity["identity_id"]).status_code == 200
    changes = fetch(client, user_key, identity["identity_id"], "/changes").get_json()["data"]
    assert [(entry["kind"], entry["wallet"]) for entry in changes] == [
        ("created", USER_WALLET), ("changed", "cli"), ("changed", ADMIN_WALLET),
    ]


def test_cli_set_status_refuses_unknown_identity_status_and_wallet(runner, identity):
    unknown = runner.invoke(args=["identities", "set-status", "did:identity:ipfs:nope", "removed"])
    assert unknown.exit_code != 0 and "No identity" in unknown.output
    status = runner.invoke(args=["identities", "set-status", identity["identity_id"], "deleted"])
    assert status.exit_code != 0 and "deleted" in status.output
    wallet = runner.invoke(args=["identities", "set-status", identity["identity_id"], "removed", "--by", "0x12"])
    assert wallet.exit_code != 0 and "--by" in wallet.output
