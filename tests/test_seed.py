"""identity.seed: keys and identities made from code say and store what the HTTP API would."""

import pytest
from sqlalchemy import func, select

from identity import create_app
from identity.seed import (
    IdentityExists,
    IdentityNotFound,
    InvalidFields,
    create_identity,
    issue_key,
    new_wallet,
    set_status,
)
from identity.storage.database import db
from identity.storage.models import Identity
from identity.web.problems import status_of
from tests.common.apps import OTHER_WALLET


def fetch(client, key, identity_id):
    return client.get(f"/identity/{identity_id}", headers={"x-api-key": key})


def identity_count(app):
    with app.app_context():
        return db.session.scalar(select(func.count(Identity.id)))


def test_created_identity_is_what_the_route_then_serves(app, client, user_key):
    seeded = create_identity(app, "Ada Lovelace", description="First programmer", image="https://example.org/ada.png")
    response = fetch(client, user_key, seeded["identity_id"])
    assert response.status_code == 200
    assert response.get_json() == seeded


def test_created_identity_has_every_key_the_route_returns(app, create):
    over_http = create({"display_name": "Over HTTP"}).get_json()
    seeded = create_identity(app, "Seeded")
    assert set(seeded) == set(over_http)
    assert set(seeded["creator"]) == set(over_http["creator"])
    assert seeded["status"] == "complete"
    assert seeded["vault_id"] == "0"


def test_same_content_as_an_http_create_is_the_same_identity(app, create):
    over_http = create({"display_name": "Twice", "description": "same"}).get_json()
    with pytest.raises(IdentityExists) as refused:
        create_identity(app, " Twice", description="same\n")
    assert refused.value.identity_id == over_http["identity_id"]
    assert status_of(refused.value) == 409  # what the route answers for it


def test_http_create_of_seeded_content_is_409_naming_it(app, create):
    seeded = create_identity(app, "Cafe\u0301", external_reference="https://example.org/cafe")
    response = create({"display_name": "Café", "external_reference": "https://example.org/cafe"})
    assert response.status_code == 409
    assert response.get_json()["identity_id"] == seeded["identity_id"]


@pytest.mark.parametrize(
    "fields",
    [
        {"display_name": ""},
        {"display_name": 42},
        {"display_name": None},
        {"display_name": "ok", "image": "ftp://example.org/a.png", "creator": "0xabc"},
        {"display_name": "bell\x07", "description": "nul\x00", "external_reference": "ipfs://x"},
        {"display_name": "ok", "creator": "0xFB6916095ca1df60bB79Ce92cE3Ea74c37c5d359"},  # bad checksum
    ],
)
def test_invalid_fields_raise_the_routes_422_errors_and_store_nothing(app, create, fields):
    response = create(fields)
    assert response.status_code == 422
    with pytest.raises(InvalidFields) as refused:
        create_identity(app, **fields)
    assert status_of(refused.value) == 422
    assert refused.value.errors == response.get_json()["errors"]
    assert refused.value.detail == response.get_json()["detail"]
    assert identity_count(app) == 0


def test_creator_may_be_any_wallet_which_becomes_a_user_without_key(app):
    creator = create_identity(app, "For someone", creator=OTHER_WALLET.lower())["creator"]
    assert creator["wallet"] == OTHER_WALLET
    assert creator["role"] == "User"
    assert creator["last_login"] is None


def test_creator_defaults_to_a_new_wallet(app):
    first = create_identity(app, "One")["creator"]
    second = create_identity(app, "Two")["creator"]
    assert first["wallet"] != second["wallet"]
    assert first["wallet"].startswith("0x") and len(first["wallet"]) == 42


def test_identities_of_one_creator_share_its_user(app):
    wallet = new_wallet()
    first = create_identity(app, "First", creator=wallet)
    second = create_identity(app, "Second", creator=wallet)
    assert first["creator"]["id"] == second["creator"]["id"]


@pytest.mark.parametrize("app_config", [{"IDENTITY_DID_NAMESPACE": "acme"}])
def test_identity_id_uses_the_apps_did_namespace(app):
    assert create_identity(app, "Namespaced")["identity_id"].startswith("did:acme:ipfs:bafkrei")


def test_issued_key_authenticates(app, client, create):
    key = issue_key(app)
    assert create({"display_name": "With a seeded key"}, key=key).status_code == 201
    assert create({"display_name": "With no key"}, key="idsk_unknown").status_code == 401


def test_issued_key_is_a_user_key_by_default(app, create):
    key = issue_key(app)
    response = create({"display_name": "Not mine", "creator": OTHER_WALLET}, key=key)
    assert response.status_code == 403


def test_issued_admin_key_may_create_for_any_wallet(app, create):
    key = issue_key(app, role="Admin")
    response = create({"display_name": "On behalf", "creator": OTHER_WALLET}, key=key)
    assert response.status_code == 201
    assert response.get_json()["creator"]["wallet"] == OTHER_WALLET


def test_key_for_a_given_wallet_creates_as_that_wallet(app, create):
    key = issue_key(app, wallet=OTHER_WALLET.lower())
    assert create({"display_name": "Mine"}, key=key).get_json()["creator"]["wallet"] == OTHER_WALLET


@pytest.mark.parametrize(("wallet", "role"), [("0x123", "User"), (None, "Owner")])
def test_issue_key_refuses_a_malformed_wallet_or_unknown_role(app, wallet, role):
    with pytest.raises(ValueError):
        issue_key(app, wallet=wallet, role=role)


def test_works_inside_the_apps_own_context_with_an_open_transaction(app, client):
    with app.app_context():
        # A read leaves the context's session in a transaction, as application code might.
        assert db.session.scalar(select(func.count(Identity.id))) == 0
        key = issue_key(app)
        seeded = create_identity(app, "Inside")
        assert db.session.scalar(select(func.count(Identity.id))) == 1
    assert fetch(client, key, seeded["identity_id"]).status_code == 200


def test_works_inside_another_apps_context(app, client, tmp_path):
    other = create_app({"DATABASE_URL": f"sqlite:///{tmp_path / 'other.db'}", "TESTING": True})
    with other.app_context():
        key = issue_key(app)
        seeded = create_identity(app, "Elsewhere")
    assert fetch(client, key, seeded["identity_id"]).status_code == 200


def test_set_status_removed_makes_the_route_answer_410_and_another_brings_it_back(app, client, user_key):
    seeded = create_identity(app, "To take down")
    removed = set_status(app, seeded["identity_id"], "removed")
    assert removed["status"] == "removed"
    assert removed["updated_at"] > seeded["updated_at"]
    assert fetch(client, user_key, seeded["identity_id"]).status_code == 410
    restored = set_status(app, seeded["identity_id"], "complete")
    response = fetch(client, user_key, seeded["identity_id"])
    assert response.status_code == 200
    assert response.get_json()["status"] == restored["status"] == "complete"


def test_set_status_refuses_an_unknown_status_and_an_unknown_identity(app):
    seeded = create_identity(app, "Kept")
    with pytest.raises(InvalidFields) as refused:
        set_status(app, seeded["identity_id"], "deleted")
    assert list(refused.value.errors) == ["status"]
    with pytest.raises(IdentityNotFound) as unknown:
        set_status(app, seeded["identity_id"].replace("bafkrei", "bafkrej"), "removed")
    assert status_of(unknown.value) == 404
