"""HTTP caching of an identity (ETag, If-None-Match, Cache-Control) and headers every response carries."""

import hashlib
import json
from datetime import UTC, datetime

import pytest
from sqlalchemy import update

from identity.core import key_use, keys
from identity.storage.database import db
from identity.storage.models import User
from tests.common.apps import USER_WALLET


@pytest.fixture
def identity_id(create):
    return create({"display_name": "Cached"}).get_json()["identity_id"]


def get(client, key, identity_id, path="/identity", **headers):
    return client.get(f"{path}/{identity_id}", headers={"x-api-key": key, **headers})


def test_an_identity_carries_a_strong_etag_of_its_body_and_is_private(client, user_key, identity_id):
    response = get(client, user_key, identity_id)
    assert response.status_code == 200
    etag = response.headers["ETag"]
    assert not etag.startswith("W/")
    assert etag == f'"{hashlib.sha1(response.data).hexdigest()}"'
    assert response.headers["Cache-Control"] == "private"


def test_both_paths_give_the_same_etag(client, user_key, identity_id):
    singular = get(client, user_key, identity_id)
    plural = get(client, user_key, identity_id, path="/identities")
    assert singular.headers["ETag"] == plural.headers["ETag"]


def test_if_none_match_with_the_current_etag_is_304_without_a_body(client, user_key, identity_id):
    etag = get(client, user_key, identity_id).headers["ETag"]
    response = get(client, user_key, identity_id, **{"If-None-Match": etag})
    assert response.status_code == 304
    assert response.data == b""
    assert response.headers["ETag"] == etag
    assert response.headers["Cache-Control"] == "private"


@pytest.mark.parametrize("tags", ["*", '"nope", {etag}, "other"', 'W/{etag}', '"nope",{etag}'])
def test_if_none_match_star_lists_and_weak_forms_match(client, user_key, identity_id, tags):
    etag = get(client, user_key, identity_id).headers["ETag"]
    response = get(client, user_key, identity_id, **{"If-None-Match": tags.format(etag=etag)})
    assert response.status_code == 304
    assert response.data == b""


def test_head_with_the_current_etag_is_304(client, user_key, identity_id):
    etag = get(client, user_key, identity_id).headers["ETag"]
    response = client.head(f"/identity/{identity_id}", headers={"x-api-key": user_key, "If-None-Match": etag})
    assert response.status_code == 304


@pytest.mark.parametrize("tags", ['"something-else"', '"a", "b"', 'W/"x"'])
def test_if_none_match_with_other_tags_is_200_with_the_body(client, user_key, identity_id, tags):
    response = get(client, user_key, identity_id, **{"If-None-Match": tags})
    assert response.status_code == 200
    assert response.get_json()["identity_id"] == identity_id


def test_the_etag_changes_when_the_body_does(app, client, user_key, identity_id):
    before = get(client, user_key, identity_id)
    # The creator's last_login is part of the body; move it as a later login would.
    with app.app_context():
        db.session.execute(update(User).values(last_login=datetime(2020, 1, 1, tzinfo=UTC)))
        db.session.commit()
    after = get(client, user_key, identity_id, **{"If-None-Match": before.headers["ETag"]})
    assert after.status_code == 200
    assert after.headers["ETag"] != before.headers["ETag"]


def test_a_refused_or_missing_identity_gets_no_etag(client, user_key, identity_id):
    assert "ETag" not in get(client, "idsk_" + "A" * 43, identity_id).headers
    assert "ETag" not in get(client, user_key, "did:identity:ipfs:nope").headers


def test_a_304_needs_a_valid_key_first(client, user_key, identity_id):
    etag = get(client, user_key, identity_id).headers["ETag"]
    assert get(client, "idsk_" + "A" * 43, identity_id, **{"If-None-Match": etag}).status_code == 401


@pytest.mark.parametrize("app_config", [{"IDENTITY_RATELIMIT_CREATE": "4/minute"}])  # the fifth create is a 429
def test_every_response_says_nosniff_and_carries_a_request_id(failing_app, issue_key):
    key = issue_key(USER_WALLET)
    client = failing_app.test_client()
    auth = {"x-api-key": key}
    created = client.post("/identity", json={"display_name": "x"}, headers=auth)
    etag = client.get(f"/identity/{created.get_json()['identity_id']}", headers=auth).headers["ETag"]
    responses = [
        created,  # 201
        client.get(f"/identity/{created.get_json()['identity_id']}", headers={**auth, "If-None-Match": etag}),  # 304
        client.post("/identity", json={"display_name": "x"}, headers=auth),  # 409
        client.post("/identity", json={"display_name": ""}, headers=auth),  # 422
        client.post("/identity", data="x", headers=auth),  # 415
        client.post("/identity", json={"display_name": "y"}, headers=auth),  # 429
        client.get("/identity/x", headers=auth),  # 404
        client.get("/identity/x"),  # 401
        client.delete("/identity"),  # 405
        client.get("/no/such/route"),  # 404
        client.get("/boom"),  # 500
        client.get("/healthz"),
        client.get("/readyz"),
        client.get("/metrics"),
        client.get("/openapi.json"),
    ]
    assert {r.status_code for r in responses} == {201, 304, 409, 422, 415, 429, 404, 401, 405, 500, 200}
    request_ids = [r.headers["X-Request-ID"] for r in responses]
    assert len(set(request_ids)) == len(responses)
    for response in responses:
        assert response.headers["X-Content-Type-Options"] == "nosniff", response.status


def test_a_conditional_get_stays_304_while_the_creator_uses_its_key(app, client, user_key, identity_id):
    etag = get(client, user_key, identity_id).headers["ETag"]
    # The creator (user_key's wallet) uses its key for reads and a create, and the uses are recorded.
    assert client.get("/me", headers={"x-api-key": user_key}).status_code == 200
    assert client.post("/identity", json={"display_name": "Another"}, headers={"x-api-key": user_key}).status_code == 201
    with app.app_context():
        assert key_use.write_noted()
    again = get(client, user_key, identity_id, **{"If-None-Match": etag})
    assert again.status_code == 304 and again.headers["ETag"] == etag


def test_a_conditional_get_is_200_once_the_creator_changes(app, client, user_key, identity_id):
    etag = get(client, user_key, identity_id).headers["ETag"]
    with app.app_context():
        keys.issue_key(USER_WALLET, "Admin")  # the creator's role changes, and with it the body
    after = get(client, user_key, identity_id, **{"If-None-Match": etag})
    assert after.status_code == 200 and after.get_json()["creator"]["role"] == "Admin"
    assert after.headers["ETag"] == f'"{hashlib.sha1(after.data).hexdigest()}"' != etag


def test_a_patch_answers_the_etag_that_get_then_serves(client, user_key, admin_key, identity_id):
    before = get(client, user_key, identity_id).headers["ETag"]
    patched = client.patch(f"/identity/{identity_id}", json={"num_positions": 3},
                           headers={"x-api-key": admin_key, "If-Match": before})
    assert patched.status_code == 200
    assert patched.headers["ETag"] == f'"{hashlib.sha1(patched.data).hexdigest()}"' != before
    fetched = get(client, user_key, identity_id, **{"If-None-Match": patched.headers["ETag"]})
    assert fetched.status_code == 304
    again = client.patch(f"/identity/{identity_id}", json={"num_positions": 4},
                         headers={"x-api-key": admin_key, "If-Match": patched.headers["ETag"]})
    assert again.status_code == 200


def test_the_documents_etag_examples_are_what_each_route_compares(client):
    document = client.get("/openapi.json").get_json()
    paths = document["paths"]

    def header(operation, name):
        [found] = [p for p in operation["parameters"] if p["in"] == "header" and p["name"] == name]
        return found["example"]

    get_identity, patch = paths["/identity/{identity_id}"]["get"], paths["/identity/{identity_id}"]["patch"]
    example = get_identity["responses"]["200"]["content"]["application/json"]["example"]
    # The quoted hash of the example body's exact bytes, as GET serves them (compact JSON, in schema order).
    body_tag = '"{}"'.format(hashlib.sha1(
        json.dumps(example, separators=(",", ":"), ensure_ascii=False).encode()).hexdigest())
    assert header(get_identity, "If-None-Match") == body_tag
    assert header(patch, "If-Match") == body_tag
    assert get_identity["responses"]["200"]["headers"]["ETag"]["example"] == body_tag
    assert patch["responses"]["200"]["headers"]["ETag"]["example"] == body_tag

    content = paths["/identity/{identity_id}/content"]["get"]
    content_id = example["identity_id"].rsplit(":", 1)[1]
    assert header(content, "If-None-Match") == f'"{content_id}"'
    assert content["responses"]["200"]["headers"]["ETag"]["example"] == f'"{content_id}"'
