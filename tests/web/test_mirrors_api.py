"""The mirrors' routes (contract, "Mirroring another instance"): an Admin registers, lists, pauses, resumes and
removes upstreams; the upstream's key is never shown and never logged; bad input is a clear problem."""

import logging

import pytest

from tests.common.mirroring import doc, entry

UPSTREAM_KEY = "idsk_the-upstreams-own-key-never-shown"
SHOWN = {"id", "name", "url", "active", "position", "upstream_head", "lag_entries", "lag_seconds", "applied",
         "already_present", "rejected", "last_error", "last_error_at", "failing", "created_at", "updated_at"}


def register(client, admin_key, **body):
    return client.post("/mirrors", json={"url": "http://10.0.0.7:8000/", "key": UPSTREAM_KEY, **body},
                       headers={"x-api-key": admin_key})


def test_an_admin_registers_an_upstream_on_a_private_address_without_its_key_in_any_answer(client, admin_key, caplog):
    caplog.set_level(logging.DEBUG)
    created = register(client, admin_key, name="replica")
    assert created.status_code == 201, created.json
    mirror = created.json
    assert set(mirror) == SHOWN
    assert (mirror["url"], mirror["name"], mirror["active"], mirror["position"], mirror["lag_entries"]) == (
        "http://10.0.0.7:8000", "replica", True, 0, 0)
    headers = {"x-api-key": admin_key}
    answers = [
        created,
        client.get("/mirrors", headers=headers),
        client.get(f"/mirrors/{mirror['id']}", headers=headers),
        client.patch(f"/mirrors/{mirror['id']}", json={"active": False}, headers=headers),
        client.patch(f"/mirrors/{mirror['id']}", json={"key": "idsk_a-new-key", "active": True}, headers=headers),
    ]
    assert [answer.status_code for answer in answers] == [201, 200, 200, 200, 200]
    assert [answer.json["active"] for answer in answers[3:]] == [False, True]
    assert answers[1].json["data"][0]["id"] == mirror["id"]
    for answer in answers:
        assert UPSTREAM_KEY not in answer.get_data(as_text=True) and "idsk_a-new-key" not in answer.get_data(as_text=True)
    assert all(UPSTREAM_KEY not in record.getMessage() and UPSTREAM_KEY not in str(vars(record))
               for record in caplog.records)
    assert client.delete(f"/mirrors/{mirror['id']}", headers=headers).status_code == 204
    assert client.get(f"/mirrors/{mirror['id']}", headers=headers).status_code == 404


def test_the_name_defaults_to_the_upstreams_host_and_names_are_unique(client, admin_key):
    assert register(client, admin_key).json["name"] == "10.0.0.7:8000"
    other = register(client, admin_key, url="https://identity.example.org/api/")
    assert other.status_code == 201 and other.json["name"] == "identity.example.org/api"
    same_upstream = register(client, admin_key, name="another")
    assert same_upstream.status_code == 409 and "http://10.0.0.7:8000" in same_upstream.json["detail"]
    same_name = register(client, admin_key, url="https://identity.example.org/v2", name="10.0.0.7:8000")
    assert same_name.status_code == 409 and "name" in same_name.json["detail"]


def test_a_user_key_may_not_register_list_or_read_mirrors(client, user_key, admin_key):
    mirror = register(client, admin_key).json
    user = {"x-api-key": user_key}
    answers = [register(client, user_key), client.get("/mirrors", headers=user), client.get(f"/mirrors/{mirror['id']}", headers=user),
               client.patch(f"/mirrors/{mirror['id']}", json={"active": False}, headers=user),
               client.delete(f"/mirrors/{mirror['id']}", headers=user)]
    assert [answer.status_code for answer in answers] == [403] * 5
    assert all(answer.mimetype == "application/problem+json" for answer in answers)


@pytest.mark.parametrize("body, field", [
    ({"url": "ftp://10.0.0.7/"}, "url"),
    ({"url": "http://user:secret@10.0.0.7/"}, "url"),
    ({"url": "http://10.0.0.7/?feed=normal"}, "url"),
    ({"url": "http:///changes"}, "url"),
    ({"key": "two words"}, "key"),
    ({"key": "idsk_x\r\nX-Injected: 1"}, "key"),
    ({"key": "idsk_x\n"}, "key"),
    ({"key": ""}, "key"),
    ({"name": "   "}, "name"),
    ({"after": 3}, "after"),
], ids=["scheme", "credentials", "query", "no-host", "space-in-key", "header-in-key", "newline-after-key", "empty-key", "blank-name", "unknown"])
def test_a_bad_registration_is_422_naming_the_field(client, admin_key, body, field):
    answer = register(client, admin_key, **body)
    assert answer.status_code == 422 and field in answer.json["errors"], answer.json


@pytest.mark.parametrize("body", [{}, {"active": "yes"}, {"url": "http://10.0.0.8/"}])
def test_a_bad_change_is_422(client, admin_key, body):
    mirror = register(client, admin_key).json
    assert client.patch(f"/mirrors/{mirror['id']}", json=body, headers={"x-api-key": admin_key}).status_code == 422


def test_an_unknown_mirror_is_404_saying_where_they_are_listed(client, admin_key):
    answer = client.get("/mirrors/3f6c2a9e-8b1d-4c7a-9e52-0a4b6d8c1f27", headers={"x-api-key": admin_key})
    assert answer.status_code == 404 and "GET /mirrors" in answer.json["detail"]


def test_lag_and_counts_show_in_the_answer_and_in_metrics(app, client, admin_key):
    from identity.data import mirror_batches

    mirror = register(client, admin_key, name="eu-west").json
    with app.app_context():
        mirror_batches.apply(mirror["id"], "eu-west", [entry(1, doc(1)), entry(2, {**doc(2), "display_name": "x"})], 0, 5)
    shown = client.get(f"/mirrors/{mirror['id']}", headers={"x-api-key": admin_key}).json
    assert (shown["position"], shown["upstream_head"], shown["lag_entries"], shown["applied"], shown["rejected"]) == (2, 5, 3, 1, 1)
    assert shown["lag_seconds"] > 0
    metrics = client.get("/metrics").get_data(as_text=True)
    assert 'identity_mirror_lag_entries{mirror="eu-west"} 3.0' in metrics
    assert 'identity_mirror_rejected_total{mirror="eu-west"} 1.0' in metrics
