"""GET /identity/<identity_id> and /identities/<identity_id>."""

from datetime import UTC, datetime, timedelta, timezone

import pytest
from sqlalchemy import update

from identity.storage.database import db
from identity.storage.models import MAX_UINT256, Identity
from tests.common.apps import without_last_login


def test_get_returns_what_create_returned_but_for_last_login(client, create, user_key):
    created = create({"display_name": "Round trip", "image": "https://example.org/a.png"}).get_json()
    fetched = client.get(f"/identity/{created['identity_id']}", headers={"x-api-key": user_key})
    assert fetched.status_code == 200
    assert without_last_login(fetched.get_json()) == without_last_login(created)


def test_both_fetch_paths_are_served(client, create, user_key):
    identity_id = create({"display_name": "Plural"}).get_json()["identity_id"]
    singular = client.get(f"/identity/{identity_id}", headers={"x-api-key": user_key})
    plural = client.get(f"/identities/{identity_id}", headers={"x-api-key": user_key})
    assert singular.status_code == plural.status_code == 200
    assert singular.get_json() == plural.get_json()


def test_any_valid_key_may_fetch_any_identity(client, create, admin_key):
    identity_id = create({"display_name": "Public"}).get_json()["identity_id"]
    assert client.get(f"/identity/{identity_id}", headers={"x-api-key": admin_key}).status_code == 200


def test_unknown_identity_is_404_problem(client, user_key):
    response = client.get(
        "/identity/did:identity:ipfs:bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku",
        headers={"x-api-key": user_key},
    )
    assert response.status_code == 404
    assert response.mimetype == "application/problem+json"
    assert response.get_json()["status"] == 404


def test_malformed_identity_id_is_404(client, user_key):
    for identity_id in ("nope", "did:identity:ipfs:", "%00", "did:x:ipfs:" + "a" * 5000):
        response = client.get(f"/identity/{identity_id}", headers={"x-api-key": user_key})
        assert response.status_code == 404, identity_id


def test_bigint_fields_round_trip_exactly_up_to_2_256_minus_1(app, client, create, user_key):
    identity_id = create({"display_name": "Rich"}).get_json()["identity_id"]
    with app.app_context():
        db.session.execute(
            update(Identity)
            .where(Identity.identity_id == identity_id)
            .values(vault_id=MAX_UINT256, assets_sum=MAX_UINT256, conviction_sum=MAX_UINT256 - 1,
                    conviction_price=10**40, user_conviction=1, user_conviction_value=MAX_UINT256)
        )
        db.session.commit()
    body = client.get(f"/identity/{identity_id}", headers={"x-api-key": user_key}).get_json()
    assert body["vault_id"] == body["assets_sum"] == body["user_conviction_value"] == str(2**256 - 1)
    assert body["conviction_sum"] == str(2**256 - 2)
    assert body["conviction_price"] == "1" + "0" * 40
    assert body["user_conviction"] == "1"


def test_get_with_head_has_no_body(client, create, user_key):
    identity_id = create({"display_name": "Head"}).get_json()["identity_id"]
    response = client.head(f"/identity/{identity_id}", headers={"x-api-key": user_key})
    assert response.status_code == 200
    assert response.data == b""


@pytest.mark.parametrize(
    "when",
    [
        datetime(2026, 11, 21, 9, 30, 0, 123456, tzinfo=UTC),
        datetime(2026, 11, 21, 9, 30, 0, 0, tzinfo=UTC),  # isoformat would leave the fraction out
        datetime(1999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
        datetime(2026, 11, 21, 11, 30, 0, 7, tzinfo=timezone(timedelta(hours=2))),
    ],
)
def test_timestamps_are_written_in_utc_with_microseconds_and_z(app, client, create, user_key, when):
    identity_id = create({"display_name": f"Text {when.isoformat()}"}).get_json()["identity_id"]
    with app.app_context():
        db.session.execute(
            update(Identity)
            .where(Identity.identity_id == identity_id)
            .values(created_at=when, updated_at=when + timedelta(microseconds=1))
        )
        db.session.commit()
    body = client.get(f"/identity/{identity_id}", headers={"x-api-key": user_key}).get_json()
    assert body["created_at"] == when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    assert body["updated_at"] == (when + timedelta(microseconds=1)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
