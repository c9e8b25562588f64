"""Identities to back up, and where the feed ends, through the API as a client makes them."""

import uuid

from tests.common.apps import ADMIN_WALLET


def create_identities(app, count, key=None):
    """Create `count` identities through the API; returns the key used."""
    client = app.test_client()
    if key is None:
        runner = app.test_cli_runner()
        result = runner.invoke(args=["keys", "create", "--wallet", ADMIN_WALLET, "--role", "Admin"])
        assert result.exit_code == 0, result.output
        key = result.stdout.strip().splitlines()[-1]
    for number in range(count):
        response = client.post("/identity", json={"display_name": f"Backed up {uuid.uuid4().hex[:6]} {number}"},
                               headers={"x-api-key": key})
        assert response.status_code == 201, response.get_data(as_text=True)
    return key


def feed_end(app, key):
    response = app.test_client().get("/changes", query_string={"after": 0, "limit": 1000}, headers={"x-api-key": key})
    assert response.status_code == 200
    return max((entry["seq"] for entry in response.get_json()["data"]), default=0)
