"""GET /identity/<id> makes an identity's body once for each state of its row (identity.web.identities).

What must hold whatever the cache holds: the answer is the identity as it is now, and the body made
from the row is the one the schema writes.
"""

import pytest

from identity.core import identities as service
from identity.schemas import identity_schema


@pytest.fixture
def identity_id(client, create, admin_key):
    created = create({"display_name": "Written meanwhile"}).get_json()["identity_id"]
    figures = {"num_positions": 7, "assets_sum": str(2**200), "semantic": "a person"}
    response = client.patch(f"/identity/{created}", json=figures, headers={"x-api-key": admin_key})
    assert response.status_code == 200, response.get_json()
    return created


def get(client, key, identity_id):
    return client.get(f"/identity/{identity_id}", headers={"x-api-key": key})


def schema_dump(app, identity_id):
    with app.app_context():
        return identity_schema.dump(service.get_identity(identity_id))


def test_a_body_served_from_the_cache_is_what_the_schema_writes(app, client, user_key, identity_id):
    first = get(client, user_key, identity_id)  # made and kept
    again = get(client, user_key, identity_id)

    assert again.status_code == 200
    assert again.get_json() == schema_dump(app, identity_id)
    assert again.data == first.data and again.headers["ETag"] == first.headers["ETag"]


def test_a_write_after_a_kept_body_is_served_at_once(app, client, user_key, admin_key, identity_id):
    before = get(client, user_key, identity_id)
    changed = client.patch(f"/identity/{identity_id}", json={"num_positions": 5}, headers={"x-api-key": admin_key})
    after = get(client, user_key, identity_id)

    assert changed.status_code == 200
    assert after.get_json()["num_positions"] == 5 and before.get_json()["num_positions"] == 7
    assert after.headers["ETag"] != before.headers["ETag"]
    assert after.get_json() == schema_dump(app, identity_id)


def test_a_removal_after_a_kept_body_is_a_410(client, user_key, admin_key, identity_id):
    assert get(client, user_key, identity_id).status_code == 200
    removed = client.patch(f"/identity/{identity_id}", json={"status": "removed"}, headers={"x-api-key": admin_key})

    response = get(client, user_key, identity_id)

    assert removed.status_code == 200
    assert response.status_code == 410
    assert response.headers["Content-Type"] == "application/problem+json"
