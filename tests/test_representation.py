"""GET /identity/<id> makes an identity's body once for each state of its row (identity.representation).

What must hold whatever the cache holds: the answer is the identity as it is, and a row read before a
write never gets the body of the row after it.
"""

import pytest

from identity import representation, service
from identity.schemas import identity_schema


@pytest.fixture
def identity_id(create):
    return create({"display_name": "Written meanwhile"}).get_json()["identity_id"]


def get(client, key, identity_id):
    return client.get(f"/identity/{identity_id}", headers={"x-api-key": key})


def written_after_the_first_read(monkeypatch, client, admin_key, identity_id, change):
    """Make the next GET read its row, then `change` lands, then the GET makes the body: the
    interleaving of a write that commits between the GET's two reads."""
    first_read = service.get_identity_row

    def read_then_write(wanted):
        row = first_read(wanted)
        response = client.patch(f"/identity/{wanted}", json=change, headers={"x-api-key": admin_key})
        assert response.status_code == 200, response.get_json()
        return row

    monkeypatch.setattr(representation, "get_identity_row", read_then_write)


def test_a_write_between_the_two_reads_of_a_first_get_is_answered_from_the_later_read(
    client, user_key, admin_key, identity_id, monkeypatch
):
    written_after_the_first_read(monkeypatch, client, admin_key, identity_id, {"num_positions": 5})
    during = get(client, user_key, identity_id)
    monkeypatch.undo()
    after = get(client, user_key, identity_id)

    assert during.status_code == 200 and during.get_json()["num_positions"] == 5
    assert after.data == during.data and after.headers["ETag"] == during.headers["ETag"]


def test_a_removal_between_the_two_reads_of_a_first_get_is_a_410(client, user_key, admin_key, identity_id, monkeypatch):
    written_after_the_first_read(monkeypatch, client, admin_key, identity_id, {"status": "removed"})

    response = get(client, user_key, identity_id)

    assert response.status_code == 410
    assert response.headers["Content-Type"] == "application/problem+json"


def test_a_body_served_from_the_cache_is_what_the_schema_writes(app, client, user_key, identity_id):
    get(client, user_key, identity_id)  # made and kept
    again = get(client, user_key, identity_id)
    with app.app_context():
        expected = identity_schema.dump(service.get_identity(identity_id))

    assert again.status_code == 200
    assert again.get_json() == expected
