"""GET /identity/<identity_id>/content and /identities/<identity_id>/content: the bytes the content_id hashes."""

import json

import pytest
import rfc8785
from multiformats import CID, multihash

UNKNOWN_ID = "did:identity:ipfs:bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku"


def cid_of(data):
    """The CID anyone would compute from downloaded bytes: CIDv1, raw, sha2-256, base32."""
    return str(CID("base32", 1, "raw", multihash.digest(data, "sha2-256")))


@pytest.mark.parametrize("path", ["/identity/{}/content", "/identities/{}/content"])
def test_content_bytes_recompute_to_the_content_id_of_the_identity(client, create, user_key, path):
    sent = {
        "display_name": "  Cafe\u0301 ",
        "description": "Line one\nLine two",
        "image": "ipfs://bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku",
        "external_reference": "https://example.org/ref?q=1",
    }
    identity_id = create(sent).get_json()["identity_id"]
    response = client.get(path.format(identity_id), headers={"x-api-key": user_key})
    assert response.status_code == 200
    assert response.mimetype == "application/json"
    content_id = identity_id.rsplit(":", 1)[1]
    assert cid_of(response.data) == content_id
    assert response.headers["ETag"] == f'"{content_id}"'


def test_content_is_the_normalized_fields_as_rfc8785_bytes(client, create, user_key):
    sent = {"display_name": " Zoe\u0308 ", "description": None, "image": "https://example.org/z.png"}
    identity_id = create(sent).get_json()["identity_id"]
    data = client.get(f"/identity/{identity_id}/content", headers={"x-api-key": user_key}).data
    expected = {"display_name": "Zo\u00eb", "image": "https://example.org/z.png"}
    assert data == rfc8785.dumps(expected)
    assert json.loads(data) == expected


def test_content_of_a_name_alone_holds_only_the_name(client, create, user_key):
    identity_id = create({"display_name": "Only"}).get_json()["identity_id"]
    data = client.get(f"/identity/{identity_id}/content", headers={"x-api-key": user_key}).data
    assert data == b'{"display_name":"Only"}'


def test_content_needs_a_key(client, create):
    identity_id = create({"display_name": "Guarded"}).get_json()["identity_id"]
    response = client.get(f"/identity/{identity_id}/content")
    assert response.status_code == 401
    assert response.mimetype == "application/problem+json"
    assert response.headers["WWW-Authenticate"] == 'ApiKey header="x-api-key"'


def test_content_of_an_unknown_identity_is_404_problem(client, user_key):
    response = client.get(f"/identity/{UNKNOWN_ID}/content", headers={"x-api-key": user_key})
    assert response.status_code == 404
    assert response.mimetype == "application/problem+json"
    assert response.get_json()["status"] == 404
