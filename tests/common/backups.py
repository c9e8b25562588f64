"""The backup tests' steps: identities to back up and where the feed ends, through the API; a backup taken by
the CLI; what /metrics and the console's Status page say of them."""

import uuid

from identity.storage.database import db
from tests.common.apps import ADMIN_WALLET
from tests.common.console import Console, sign_in


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


WRONG_SECRET = "not-the-secret-but-long-enough-0123456789"


def status_page(app, key):
    client = app.test_client()
    assert sign_in(client, key).status_code == 303
    return Console(client).text("/admin/status")


def metric(app, name):
    body = app.test_client().get("/metrics").get_data(as_text=True)
    values = [line.split()[-1] for line in body.splitlines() if line.startswith(name + " ")]
    return float(values[0]) if values else None


def cli(app, *args):
    return app.test_cli_runner().invoke(args=list(args))


def take(app):
    result = cli(app, "backup")
    assert result.exit_code == 0, result.output
    return result.stdout.strip().splitlines()[-1]


def backed_up_then_written(app):
    """A backup of two identities, then a third written: (backup name, API key, the feed's end with the third)."""
    with app.app_context():
        key = create_identities(app, 2)
    name = take(app)
    with app.app_context():
        create_identities(app, 1, key)
        end = feed_end(app, key)
        db.engine.dispose()
    return name, key, end
