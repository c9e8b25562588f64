"""flask keys ...: the scope, label, expiry and last use of keys on the command line."""

import re

from identity.core import key_use
from tests.common.apps import USER_WALLET

KEY = re.compile(r"idsk_[A-Za-z0-9_-]{43}")


def issue(runner, *args):
    result = runner.invoke(args=["keys", "create", "--wallet", USER_WALLET, *args])
    assert result.exit_code == 0, result.output
    return result.stdout.strip().splitlines()[-1]


def listed(runner, key):
    """The `keys list` line of `key` (found by its hint)."""
    result = runner.invoke(args=["keys", "list"])
    assert result.exit_code == 0 and key not in result.output
    return next(line for line in result.output.splitlines() if key[:9] in line)


def test_keys_create_issues_a_read_only_labelled_expiring_key(runner, client):
    key = issue(runner, "--scope", "read", "--label", "status page", "--expires-in", "3600")
    me = client.get("/me", headers={"x-api-key": key}).get_json()["key"]
    assert (me["scope"], me["label"], me["created_by"]) == ("read", "status page", "cli")
    assert me["expires_at"] is not None
    refused = client.post("/identity", json={"display_name": "x"}, headers={"x-api-key": key})
    assert refused.status_code == 403 and "read-only" in refused.get_json()["detail"]


def test_keys_create_refuses_an_expiry_out_of_range_and_an_unknown_scope(runner):
    for args in (["--expires-in", "59"], ["--expires-in", str(10 * 365 * 86_400 + 1)], ["--scope", "admin"]):
        result = runner.invoke(args=["keys", "create", "--wallet", USER_WALLET, *args])
        assert result.exit_code != 0
        assert args[0] in result.output
        assert not KEY.search(result.output)


def test_keys_list_shows_scope_label_expiry_and_last_use(runner, client):
    key = issue(runner, "--scope", "read", "--label", "ci", "--expires-in", "600")
    line = listed(runner, key)
    id_, hint, wallet, role, grant, scope, label, created_at, expires_at, last_used_at, revoked_at = line.split()
    assert (wallet, role, grant, scope, label, last_used_at, revoked_at) == (
        USER_WALLET, "User", "read", "read", "ci", "-", "-")
    assert expires_at > created_at
    client.get("/me", headers={"x-api-key": key})
    with client.application.app_context():
        assert key_use.write_noted()  # what the serving process's writer does every IDENTITY_KEY_USE_INTERVAL
    assert listed(runner, key).split()[9] != "-"  # used now


def test_keys_rotate_with_grace_leaves_the_old_key_working_until_it_ends(runner, client):
    old = issue(runner, "--label", "deploy")
    key_id = listed(runner, old).split()[0]
    result = runner.invoke(args=["keys", "rotate", key_id, "--grace", "600"])
    assert result.exit_code == 0, result.output
    new = result.stdout.strip().splitlines()[-1]
    assert KEY.fullmatch(new) and new != old
    for key in (old, new):
        assert client.get("/me", headers={"x-api-key": key}).status_code == 200
    assert client.get("/me", headers={"x-api-key": new}).get_json()["key"]["label"] == "deploy"
    assert listed(runner, old).split()[-1] != "-"  # its revoked_at, in the future
    again = runner.invoke(args=["keys", "rotate", key_id])
    assert again.exit_code != 0 and "rotated already" in again.output
