"""A sign-in never gives a wallet more than it was granted (users.grant): a wallet that came into being with a read
key, or that an Admin narrowed, gets read keys alone from a sign-in, and asking for write is 403 with its nonce
spent; a write key that an Admin issues it widens the grant. The grant shows in GET /users/{wallet} and `flask keys
list`. On SQLite and on PostgreSQL; messages signed with eth-account (these tests are not about the signer)."""

import pytest
from eth_account import Account
from eth_account.messages import encode_defunct

from tests.common.apps import ADMIN_WALLET
from tests.wallets import address_of, private_key, siwe_message

DOMAIN = "identity.example.com"
KEY = private_key("granted wallet")
WALLET = address_of(KEY)


@pytest.fixture
def app_config():
    return {"IDENTITY_SIWE_DOMAIN": DOMAIN, "IDENTITY_RATELIMIT_SIGNIN": "100000/minute"}


def signed_body(client, **fields):
    message = siwe_message(DOMAIN, WALLET, client.get("/auth/nonce").get_json()["nonce"])
    signature = Account.sign_message(encode_defunct(text=message), KEY).signature.to_0x_hex()
    return {"message": message, "signature": signature, **fields}


def sign_in(client, **fields):
    return client.post("/auth/siwe", json=signed_body(client, **fields))


def grant_of(client, key, wallet=WALLET):
    response = client.get(f"/users/{wallet.lower()}", headers={"x-api-key": key})
    assert response.status_code == 200, response.text
    return response.get_json()["grant"]


def cli(runner, *args):
    result = runner.invoke(args=["keys", *args])
    assert result.exit_code == 0, result.output
    return result


def refused_beyond_grant(client, body):
    response = client.post("/auth/siwe", json=body)
    assert response.status_code == 403, response.text
    assert response.mimetype == "application/problem+json"
    detail = response.get_json()["detail"]
    assert f"{WALLET} is granted read access only" in detail and '"scope": "read"' in detail
    # Refused after every check passed: the nonce is spent all the same.
    again = client.post("/auth/siwe", json={**body, "scope": "read"})
    assert again.status_code == 401 and "used it already" in again.get_json()["detail"]
    return detail


def test_a_mirrors_read_admin_wallet_made_by_the_cli_signs_in_to_read_keys_alone(runner, client, admin_key):
    """The issue's case: `keys create --role Admin --scope read`, as docs/mirroring.md says, then a sign-in."""
    cli(runner, "create", "--wallet", WALLET, "--role", "Admin", "--scope", "read")
    assert grant_of(client, admin_key) == "read"
    refused_beyond_grant(client, signed_body(client, scope="write"))
    # Without a scope, the grant: a read Admin key, which cannot issue itself a write key.
    issued = sign_in(client)
    assert issued.status_code == 201, issued.text
    body = issued.get_json()
    assert (body["role"], body["scope"]) == ("Admin", "read")
    escalate = client.post("/keys", json={"wallet": WALLET, "scope": "write"}, headers={"x-api-key": body["key"]})
    assert escalate.status_code == 403
    assert sign_in(client, scope="read").get_json()["scope"] == "read"
    assert grant_of(client, admin_key) == "read"


def test_a_wallet_made_by_post_keys_with_a_read_key_is_granted_read(client, admin_key):
    made = client.post("/keys", json={"wallet": WALLET.lower(), "scope": "read"}, headers={"x-api-key": admin_key})
    assert made.status_code == 201
    assert grant_of(client, admin_key) == "read"
    refused_beyond_grant(client, signed_body(client, scope="write"))


def test_a_write_key_issued_by_an_admin_widens_the_grant_and_a_read_key_narrows_nothing(client, admin_key):
    client.post("/keys", json={"wallet": WALLET, "scope": "read"}, headers={"x-api-key": admin_key})
    widened = client.post("/keys", json={"wallet": WALLET, "scope": "write"}, headers={"x-api-key": admin_key})
    assert widened.status_code == 201
    assert grant_of(client, admin_key) == "write"
    assert sign_in(client, scope="write").get_json()["scope"] == "write"
    # Another read key for a write-granted wallet (a status page's) leaves its grant as it is.
    client.post("/keys", json={"wallet": WALLET, "scope": "read"}, headers={"x-api-key": admin_key})
    assert grant_of(client, admin_key) == "write"
    assert sign_in(client).get_json()["scope"] == "write"


def test_an_admin_narrows_a_wallet_to_read_and_widens_it_again_on_the_command_line(runner, client, admin_key):
    assert sign_in(client).get_json()["scope"] == "write"  # a new wallet: a User granted write
    assert grant_of(client, admin_key) == "write"
    narrowed = cli(runner, "grant", "--wallet", WALLET.lower(), "read")
    assert f"{WALLET} (User) is granted read" in narrowed.output
    assert grant_of(client, admin_key) == "read"
    refused_beyond_grant(client, signed_body(client, scope="write"))
    assert sign_in(client).get_json()["scope"] == "read"
    cli(runner, "grant", "--wallet", WALLET, "write")
    assert sign_in(client, scope="write").get_json()["scope"] == "write"


def test_an_admin_narrows_a_wallet_to_read_over_http_and_widens_it_again(client, admin_key):
    assert sign_in(client).get_json()["scope"] == "write"
    narrowed = client.patch(f"/users/{WALLET.lower()}", json={"grant": "read"}, headers={"x-api-key": admin_key})
    assert narrowed.status_code == 200, narrowed.text
    assert (narrowed.get_json()["wallet"], narrowed.get_json()["grant"]) == (WALLET, "read")
    refused_beyond_grant(client, signed_body(client, scope="write"))
    assert sign_in(client).get_json()["scope"] == "read"
    widened = client.patch(f"/users/{WALLET}", json={"grant": "write"}, headers={"x-api-key": admin_key})
    assert widened.get_json()["grant"] == "write"
    assert sign_in(client, scope="write").get_json()["scope"] == "write"


def test_only_an_admins_write_key_sets_a_grant_and_a_bad_one_says_why(client, issue_key, admin_key):
    user_key = sign_in(client).get_json()["key"]  # the wallet's own write key, a User's
    assert client.patch(f"/users/{WALLET}", json={"grant": "write"}, headers={"x-api-key": user_key}).status_code == 403
    read_admin = client.post("/keys", json={"wallet": ADMIN_WALLET, "scope": "read"},
                             headers={"x-api-key": admin_key}).get_json()["key"]
    as_read = client.patch(f"/users/{WALLET}", json={"grant": "read"}, headers={"x-api-key": read_admin})
    assert as_read.status_code == 403 and "read-only" in as_read.get_json()["detail"]
    assert grant_of(client, admin_key) == "write"
    unknown = client.patch("/users/0x" + "ab" * 20, json={"grant": "read"}, headers={"x-api-key": admin_key})
    assert unknown.status_code == 404 and unknown.mimetype == "application/problem+json"
    for body in ({"grant": "admin"}, {"grant": None}, {}, {"grant": "read", "role": "Admin"}, ["read"]):
        invalid = client.patch(f"/users/{WALLET}", json=body, headers={"x-api-key": admin_key})
        assert invalid.status_code == 422, (body, invalid.text)
    assert client.patch("/users/not-a-wallet", json={"grant": "read"}, headers={"x-api-key": admin_key}).status_code == 404
    assert grant_of(client, admin_key) == "write"


def test_granting_an_unknown_wallet_is_refused_saying_how_to_make_one(runner):
    result = runner.invoke(args=["keys", "grant", "--wallet", WALLET, "read"])
    assert result.exit_code != 0 and "no user has this wallet" in result.output and "--scope read" in result.output
    assert runner.invoke(args=["keys", "grant", "--wallet", WALLET, "admin"]).exit_code != 0


def test_keys_list_shows_each_users_grant(runner, admin_key):
    cli(runner, "create", "--wallet", WALLET, "--scope", "read", "--label", "mirror")
    lines = cli(runner, "list").output.splitlines()
    header = lines[0].split()
    assert header[3:6] == ["role", "grant", "scope"]
    mirror = next(line.split() for line in lines if WALLET in line)
    admin = next(line.split() for line in lines if ADMIN_WALLET in line)
    assert mirror[3:6] == ["User", "read", "read"] and admin[3:6] == ["Admin", "write", "write"]
