"""Tests against the Identity service: the identity_* fixtures need no conftest.py and no import."""

OTHER_WALLET = "0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB"


def test_create_then_fetch_an_identity(identity_client, identity_api_key):
    key = identity_api_key()
    created = identity_client.post("/identity", json={"display_name": "Ada Lovelace"}, headers={"x-api-key": key})
    assert created.status_code == 201
    identity_id = created.get_json()["identity_id"]

    fetched = identity_client.get(f"/identity/{identity_id}", headers={"x-api-key": key})
    assert fetched.status_code == 200
    assert fetched.get_json()["display_name"] == "Ada Lovelace"


def test_only_an_admin_key_may_create_for_another_wallet(identity_client, identity_api_key):
    body = {"display_name": "Grace Hopper", "creator": OTHER_WALLET}
    as_user = identity_client.post("/identity", json=body, headers={"x-api-key": identity_api_key()})
    as_admin = identity_client.post("/identity", json=body, headers={"x-api-key": identity_api_key("Admin")})
    assert as_user.status_code == 403
    assert as_admin.status_code == 201
    assert as_admin.get_json()["creator"]["wallet"] == OTHER_WALLET


def test_each_test_starts_from_an_empty_database(identity_client, identity_api_key):
    # The first test created this content too, in its own database: here it is new again.
    again = identity_client.post("/identity", json={"display_name": "Ada Lovelace"}, headers={"x-api-key": identity_api_key()})
    assert again.status_code == 201
