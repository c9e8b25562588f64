"""What a newcomer meets in the first hour: each mistake gets an answer that says what to do."""

import pytest

from identity import service
from identity.extensions import db
from tests.conftest import ADMIN_WALLET, make_app

UUID = "3f6c2a9e-8b1d-4c7a-9e52-0a4b6d8c1f27"
CONTENT_ID = "bafkreibm6jg3ux5qumhcn2b3flc3tyu6dmlb4xa7u5bvkuxqxdpmydhvfa"


@pytest.fixture
def unmigrated_app(empty_database_url):
    app = make_app(empty_database_url)
    yield app
    with app.app_context():
        db.engine.dispose()


@pytest.mark.parametrize(
    "method, path",
    [("GET", f"/identity/did:identity:ipfs:{CONTENT_ID}"), ("POST", "/identity"), ("GET", "/identities"),
     ("GET", "/changes"), ("PATCH", f"/identity/did:identity:ipfs:{CONTENT_ID}")],
)
def test_never_migrated_database_is_a_503_naming_the_upgrade_command_without_retry_after(unmigrated_app, method, path):
    response = unmigrated_app.test_client().open(path, method=method, json={}, headers={"x-api-key": "idsk_x"})
    assert response.status_code == 503
    assert response.mimetype == "application/problem+json"
    detail = response.get_json()["detail"]
    assert "not at the latest migration" in detail and "never migrated" in detail
    assert "flask --app app db upgrade" in detail
    assert "Retry-After" not in response.headers


def test_readyz_on_a_never_migrated_database_says_so_without_retry_after(unmigrated_app):
    response = unmigrated_app.test_client().get("/readyz")
    assert response.status_code == 503
    assert "never migrated" in response.get_json()["detail"]
    assert "Retry-After" not in response.headers


def test_the_first_request_after_db_upgrade_is_served(unmigrated_app):
    from flask_migrate import upgrade

    client = unmigrated_app.test_client()
    assert client.get("/identities", headers={"x-api-key": "idsk_x"}).status_code == 503
    with unmigrated_app.app_context():
        upgrade()
        key, _ = service.issue_key(ADMIN_WALLET, "Admin")
    assert client.get("/identities", headers={"x-api-key": key}).status_code == 200


@pytest.mark.parametrize(
    "identity_id",
    [UUID, CONTENT_ID, f"did:other:ipfs:{CONTENT_ID}", "did:identity:ipfs:bafkreiTOOSHORT", "ada"],
)
def test_a_malformed_identity_id_is_told_what_an_identity_id_looks_like(client, user_key, identity_id):
    for path in (f"/identity/{identity_id}", f"/identities/{identity_id}", f"/identity/{identity_id}/changes"):
        response = client.get(path, headers={"x-api-key": user_key})
        assert response.status_code == 404, path
        detail = response.get_json()["detail"]
        assert "did:identity:ipfs:<content_id>" in detail and "bafkrei" in detail, path


def test_a_well_formed_unknown_identity_id_is_simply_not_found(client, user_key):
    response = client.get(f"/identity/did:identity:ipfs:{CONTENT_ID}", headers={"x-api-key": user_key})
    assert response.status_code == 404
    assert response.get_json()["detail"] == "No Identity exists for the provided id."
