"""Seeding the service from code, and giving it settings of your own."""

import pytest

from identity.seed import IdentityExists, create_identity


@pytest.fixture
def identity_config():
    # Overrides the plugin's fixture for this module; a conftest.py can do it for a whole folder.
    return {"IDENTITY_DID_NAMESPACE": "acme"}


def test_seeded_identities_are_served_like_created_ones(identity_app, identity_client, identity_api_key):
    seeded = create_identity(identity_app, "Grace Hopper", description="Wrote the first compiler.")
    assert seeded["identity_id"].startswith("did:acme:ipfs:")

    fetched = identity_client.get(f"/identity/{seeded['identity_id']}", headers={"x-api-key": identity_api_key()})
    assert fetched.get_json() == seeded


def test_seeding_refuses_what_the_api_refuses(identity_app):
    create_identity(identity_app, "Grace Hopper")
    with pytest.raises(IdentityExists):
        create_identity(identity_app, "  Grace Hopper ")
