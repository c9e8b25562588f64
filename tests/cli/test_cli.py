"""flask keys ...: issue, list, rotate, revoke, bootstrap; and db upgrade."""

import re

from tests.common.apps import ADMIN_WALLET, USER_WALLET

KEY = re.compile(r"idsk_[A-Za-z0-9_-]{43}")


def issue(runner, *args):
    result = runner.invoke(args=["keys", "create", *args])
    assert result.exit_code == 0, result.output
    return result.stdout.strip().splitlines()[-1]


def test_keys_create_prints_the_key_alone_on_the_last_line(runner, client):
    key = issue(runner, "--wallet", USER_WALLET.lower())
    assert KEY.fullmatch(key)
    response = client.post("/identity", json={"display_name": "From the CLI"}, headers={"x-api-key": key})
    assert response.status_code == 201
    assert response.get_json()["creator"]["wallet"] == USER_WALLET
    assert response.get_json()["creator"]["role"] == "User"


def test_keys_create_with_admin_role(runner, client):
    key = issue(runner, "--wallet", ADMIN_WALLET, "--role", "Admin")
    body = client.post("/identity", json={"display_name": "x", "creator": USER_WALLET}, headers={"x-api-key": key})
    assert body.status_code == 201


def test_keys_create_refuses_a_bad_wallet(runner):
    for wallet in ("0x123", "nonsense", "0xFb6916095ca1df60bB79Ce92cE3Ea74c37c5d359"):
        result = runner.invoke(args=["keys", "create", "--wallet", wallet])
        assert result.exit_code != 0
        assert "wallet" in result.output.lower()
        assert not KEY.search(result.output)


def test_keys_create_refuses_an_unknown_role(runner):
    result = runner.invoke(args=["keys", "create", "--wallet", USER_WALLET, "--role", "Root"])
    assert result.exit_code != 0
    assert "Root" in result.output


def test_keys_create_requires_a_wallet(runner):
    result = runner.invoke(args=["keys", "create"])
    assert result.exit_code != 0
    assert "--wallet" in result.output


def test_keys_list_shows_keys_without_their_secrets(runner):
    key = issue(runner, "--wallet", USER_WALLET)
    result = runner.invoke(args=["keys", "list"])
    assert result.exit_code == 0
    assert key not in result.output
    assert key[:9] in result.output
    assert USER_WALLET in result.output


def test_keys_revoke_by_id_stops_that_key(runner, client):
    key = issue(runner, "--wallet", USER_WALLET)
    other = issue(runner, "--wallet", USER_WALLET)
    listing = runner.invoke(args=["keys", "list"]).output
    key_id = next(line.split()[0] for line in listing.splitlines() if key[:9] in line)
    result = runner.invoke(args=["keys", "revoke", key_id])
    assert result.exit_code == 0, result.output
    assert client.get("/identity/x", headers={"x-api-key": key}).status_code == 401
    assert client.get("/identity/x", headers={"x-api-key": other}).status_code == 404
    line = next(line for line in runner.invoke(args=["keys", "list"]).output.splitlines() if line.startswith(key_id))
    assert line.split()[-1] != "-"  # the revoked_at column is filled


def test_keys_revoke_by_wallet_stops_all_its_keys(runner, client):
    keys = [issue(runner, "--wallet", USER_WALLET) for _ in range(2)]
    result = runner.invoke(args=["keys", "revoke", "--wallet", USER_WALLET.lower()])
    assert result.exit_code == 0
    assert "2" in result.output
    for key in keys:
        assert client.get("/identity/x", headers={"x-api-key": key}).status_code == 401


def test_keys_revoke_of_nothing_fails(runner):
    assert runner.invoke(args=["keys", "revoke", "no-such-id"]).exit_code != 0
    assert runner.invoke(args=["keys", "revoke"]).exit_code != 0


def key_id_of(runner, key):
    listing = runner.invoke(args=["keys", "list"]).output
    return next(line.split()[0] for line in listing.splitlines() if key[:9] in line)


def test_keys_rotate_issues_a_new_key_for_the_same_user_and_revokes_the_old(runner, client):
    old = issue(runner, "--wallet", USER_WALLET, "--role", "Admin")
    old_id = key_id_of(runner, old)
    result = runner.invoke(args=["keys", "rotate", old_id])
    assert result.exit_code == 0, result.output
    new = result.stdout.strip().splitlines()[-1]
    assert KEY.fullmatch(new) and new != old
    assert old_id in result.stderr
    assert client.get("/identity/x", headers={"x-api-key": old}).status_code == 401
    created = client.post("/identity", json={"display_name": "rotated", "creator": ADMIN_WALLET}, headers={"x-api-key": new})
    assert created.status_code == 201  # same user, same role
    assert created.get_json()["creator"]["wallet"] == ADMIN_WALLET
    listing = runner.invoke(args=["keys", "list"]).output.splitlines()
    assert sum(USER_WALLET in line for line in listing) == 2
    assert next(line for line in listing if line.startswith(old_id)).split()[-1] != "-"
    assert next(line for line in listing if new[:9] in line).split()[-1] == "-"


def test_keys_rotate_leaves_the_users_other_keys_alone(runner, client):
    first, second = issue(runner, "--wallet", USER_WALLET), issue(runner, "--wallet", USER_WALLET)
    assert runner.invoke(args=["keys", "rotate", key_id_of(runner, first)]).exit_code == 0
    assert client.get("/identity/x", headers={"x-api-key": second}).status_code == 404


def test_keys_rotate_refuses_an_unknown_or_revoked_key(runner):
    key = issue(runner, "--wallet", USER_WALLET)
    key_id = key_id_of(runner, key)
    assert runner.invoke(args=["keys", "revoke", key_id]).exit_code == 0
    for candidate in (key_id, "no-such-id"):
        result = runner.invoke(args=["keys", "rotate", candidate])
        assert result.exit_code != 0
        assert not KEY.search(result.output)
    assert runner.invoke(args=["keys", "rotate"]).exit_code != 0


def test_keys_bootstrap_issues_a_first_admin_key_only_once(runner, client):
    first = runner.invoke(args=["keys", "bootstrap"])
    assert first.exit_code == 0
    key = first.stdout.strip().splitlines()[-1]
    assert KEY.fullmatch(key)
    assert "curl" in first.stderr and key in first.stderr
    assert client.post("/identity", json={"display_name": "boot"}, headers={"x-api-key": key}).status_code == 201
    second = runner.invoke(args=["keys", "bootstrap"])
    assert second.exit_code == 0
    assert not KEY.search(second.stdout)


def test_db_upgrade_creates_the_schema(empty_database_url):
    from sqlalchemy import inspect

    from identity import create_app
    from identity.storage.database import db

    app = create_app({"DATABASE_URL": empty_database_url})
    result = app.test_cli_runner().invoke(args=["db", "upgrade"])
    assert result.exit_code == 0, result.output
    with app.app_context():
        assert {"users", "api_keys", "identities"} <= set(inspect(db.engine).get_table_names())
        db.engine.dispose()
