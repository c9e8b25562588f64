"""Sign-in with Ethereum (GET /auth/nonce, POST /auth/siwe): every check of the contract, in its order, with
messages signed by an independent wallet (ethers, run by node), on SQLite and on PostgreSQL."""

import threading
import time
from datetime import UTC, datetime, timedelta

import pytest

from identity.config import settings_from_env
from tests.common.apps import make_app
from tests.wallets import address_of, private_key, sign_messages, siwe_message

DOMAIN = "identity.example.com"
KEY = private_key("signer")
WALLET = address_of(KEY)
OTHER_KEY = private_key("someone else")


@pytest.fixture
def app_config():
    return {"IDENTITY_SIWE_DOMAIN": DOMAIN, "IDENTITY_RATELIMIT_SIGNIN": "100000/minute"}


@pytest.fixture(autouse=True)
def _signer(ethers):
    """Every test here signs with ethers (installed once)."""


def new_nonce(client):
    response = client.get("/auth/nonce")
    assert response.status_code == 200, response.text
    return response.get_json()["nonce"]


def sign_in(client, message, signature, **fields):
    return client.post("/auth/siwe", json={"message": message, "signature": signature, **fields})


def signed(client, key=KEY, **message_fields):
    """A fresh nonce's message for the wallet of `key`, and ethers' signature of it by `key`."""
    message = siwe_message(DOMAIN, address_of(key), new_nonce(client), **message_fields)
    return message, sign_messages([(key, message)])[0]


def refused(response, check):
    assert response.status_code == 401, response.text
    assert response.mimetype == "application/problem+json"
    assert response.headers["WWW-Authenticate"] == f'SIWE realm="{DOMAIN}"'
    detail = response.get_json()["detail"]
    assert detail.startswith(f"Sign-in refused at check {check}"), detail
    return detail


def near(timestamp, moment, seconds=5):
    return abs(datetime.fromisoformat(timestamp) - moment) < timedelta(seconds=seconds)


# --- success ---------------------------------------------------------------------------------------

def test_the_nonce_answer_names_the_domain_and_uri_and_is_not_stored_by_caches(client):
    response = client.get("/auth/nonce")
    body = response.get_json()
    assert set(body) == {"nonce", "expires_at", "domain", "uri"}
    assert (body["domain"], body["uri"]) == (DOMAIN, f"https://{DOMAIN}")
    assert len(body["nonce"]) >= 20 and body["nonce"].isascii() and body["nonce"].isalnum()
    assert near(body["expires_at"], datetime.now(UTC) + timedelta(seconds=600))
    assert response.headers["Cache-Control"] == "no-store"


def test_a_fresh_wallet_signs_in_to_a_new_user_and_a_write_key_issued_by_siwe(client):
    message, signature = signed(client)
    response = sign_in(client, message, signature)
    assert response.status_code == 201, response.text
    body = response.get_json()
    now = datetime.now(UTC)
    assert (body["wallet"], body["role"], body["scope"], body["label"], body["created_by"]) == (
        WALLET, "User", "write", "sign-in", "siwe")
    assert near(body["expires_at"], now + timedelta(days=7))
    assert body["user"]["wallet"] == WALLET and body["user"]["role"] == "User" and body["user"]["api_key"] == ""
    assert near(body["user"]["last_login"], now)
    assert response.headers["Cache-Control"] == "no-store"
    me = client.get("/me", headers={"x-api-key": body["key"]})
    assert me.status_code == 200
    assert me.get_json()["key"]["id"] == body["id"]


def test_an_admin_wallet_signs_in_to_an_admin_key(client, issue_key):
    issue_key(WALLET, "Admin")
    message, signature = signed(client)
    body = sign_in(client, message, signature).get_json()
    assert body["role"] == "Admin" and body["user"]["role"] == "Admin"
    assert client.get("/keys", headers={"x-api-key": body["key"]}).status_code == 200


def test_scope_and_label_come_from_the_body_and_the_key_expires_with_the_message(client):
    soon = datetime.now(UTC) + timedelta(hours=1)
    message, signature = signed(client, expiration_time=soon)
    body = sign_in(client, message, signature, scope="read", label="dashboard").get_json()
    assert (body["scope"], body["label"]) == ("read", "dashboard")
    assert near(body["expires_at"], soon, seconds=1)
    refused_write = client.post("/identity", json={"display_name": "Read only"}, headers={"x-api-key": body["key"]})
    assert refused_write.status_code == 403


def test_a_key_never_outlives_identity_siwe_key_seconds(app, client):
    app.config["IDENTITY_SIWE_KEY_SECONDS"] = 3600
    message, signature = signed(client, expiration_time=datetime.now(UTC) + timedelta(days=30))
    body = sign_in(client, message, signature).get_json()
    assert near(body["expires_at"], datetime.now(UTC) + timedelta(hours=1))


def test_a_nonce_issued_by_another_node_is_accepted_here(database_url, app_config, client):
    other_node = make_app(database_url, **app_config)
    message = siwe_message(DOMAIN, WALLET, new_nonce(other_node.test_client()))
    assert sign_in(client, message, sign_messages([(KEY, message)])[0]).status_code == 201


def test_a_message_without_a_statement_naming_its_scheme_and_within_all_its_times_is_accepted(client):
    now = datetime.now(UTC)
    message, signature = signed(client, statement=None, scheme="https", not_before=now - timedelta(minutes=1),
                                expiration_time=now + timedelta(minutes=10), issued_at=now + timedelta(minutes=4))
    assert sign_in(client, message, signature).status_code == 201


# --- check 1: the message's grammar (422) ------------------------------------------------------------

def test_a_lower_case_address_is_422_naming_line_2_and_its_checksummed_form(client):
    message, signature = signed(client)
    response = sign_in(client, message.replace(WALLET, WALLET.lower()), signature)
    assert response.status_code == 422
    body = response.get_json()
    assert "line 2" in body["detail"] and WALLET in body["detail"]
    assert body["errors"]["message"][0].startswith("line 2: ")


def test_a_message_with_a_line_missing_is_422_naming_the_line(client):
    message, signature = signed(client)
    without_version = "\n".join(line for line in message.split("\n") if not line.startswith("Version: "))
    response = sign_in(client, without_version, signature)
    assert response.status_code == 422
    assert "line 7: expected \"Version: \"" in response.get_json()["detail"]


@pytest.mark.parametrize("body", [{"signature": "0x00"}, {"message": "hello"}, {"message": 42, "signature": "0x"},
                                  {"message": "m", "signature": "s", "scope": "admin"}, {"message": "m", "signature": "s",
                                                                                         "nickname": "x"}])
def test_a_body_that_lacks_or_mistypes_a_field_is_422_naming_it(client, body):
    response = client.post("/auth/siwe", json=body)
    assert response.status_code == 422
    assert set(response.get_json()["errors"]) & {"message", "signature", "scope", "nickname"}


def test_a_body_that_is_not_json_is_400_and_not_sent_as_json_415(client):
    assert client.post("/auth/siwe", data="{", content_type="application/json").status_code == 400
    assert client.post("/auth/siwe", data="message=x", content_type="text/plain").status_code == 415


# --- checks 2 to 6 (401), and what each spends ---------------------------------------------------------

def refused_then_spent(client, nonce, first, check):
    """`first` (a message naming `nonce`) refused at `check`; then the same nonce in a message that passes every
    other check, refused at check 4: the refusal spent it. Returns the first refusal's detail."""
    retried = siwe_message(DOMAIN, WALLET, nonce)
    first_signature, retried_signature = sign_messages([(KEY, first), (KEY, retried)])
    detail = refused(sign_in(client, first, first_signature), check)
    assert "used it already" in refused(sign_in(client, retried, retried_signature), 4)
    return detail


def test_a_message_for_another_domain_is_refused_and_its_nonce_spent(client):
    nonce = new_nonce(client)
    detail = refused_then_spent(client, nonce, siwe_message("evil.example.net", WALLET, nonce), 2)
    assert "evil.example.net" in detail and DOMAIN in detail


@pytest.mark.parametrize("uri", ["https://evil.example/steal", "http://identity.example.com",
                                 "https://identity.example.com:8443/", "https://identity.example.com.evil.example/",
                                 "https://user@evil.example/", "urn:uuid:7f9d2a4e-0f8e-4b1a-9c3d-2e5f6a7b8c9d"])
def test_a_message_whose_uri_is_another_origin_is_refused_at_check_2_and_its_nonce_spent(client, uri):
    nonce = new_nonce(client)
    detail = refused_then_spent(client, nonce, siwe_message(DOMAIN, WALLET, nonce, uri=uri), 2)
    assert uri in detail and f"https://{DOMAIN}" in detail


@pytest.mark.parametrize("uri", ["https://identity.example.com", "https://identity.example.com/",
                                 "https://IDENTITY.example.com:443/auth/siwe?from=app#top"])
def test_a_uri_at_the_origin_of_identity_siwe_uri_is_accepted_whatever_its_path(client, uri):
    message, signature = signed(client, uri=uri)
    assert sign_in(client, message, signature).status_code == 201


def test_a_message_naming_another_scheme_is_refused_at_the_domain_check(client):
    message, signature = signed(client, scheme="http")
    refused(sign_in(client, message, signature), 2)


def test_a_chain_outside_identity_siwe_chain_ids_is_refused(app, client):
    app.config["IDENTITY_SIWE_CHAIN_IDS"] = (1, 10)
    excluded = siwe_message(DOMAIN, WALLET, new_nonce(client), chain_id=5)
    accepted = siwe_message(DOMAIN, WALLET, new_nonce(client), chain_id=10)
    excluded_signature, accepted_signature = sign_messages([(KEY, excluded), (KEY, accepted)])
    assert "Chain ID 5" in refused(sign_in(client, excluded, excluded_signature), 3)
    assert sign_in(client, accepted, accepted_signature).status_code == 201


def test_a_refusal_for_the_chain_spends_the_nonce(app, client):
    app.config["IDENTITY_SIWE_CHAIN_IDS"] = (1,)
    nonce = new_nonce(client)
    refused_then_spent(client, nonce, siwe_message(DOMAIN, WALLET, nonce, chain_id=5), 3)


def test_a_refusal_for_a_future_not_before_spends_the_nonce(client):
    nonce = new_nonce(client)
    early = siwe_message(DOMAIN, WALLET, nonce, not_before=datetime.now(UTC) + timedelta(minutes=5))
    refused_then_spent(client, nonce, early, 5)


def test_a_refusal_for_another_wallet_s_signature_spends_the_nonce(client):
    nonce = new_nonce(client)
    message = siwe_message(DOMAIN, WALLET, nonce)
    refused(sign_in(client, message, sign_messages([(OTHER_KEY, message)])[0]), 6)
    assert "used it already" in refused(sign_in(client, message, sign_messages([(KEY, message)])[0]), 4)


def test_a_used_nonce_is_refused(client):
    message, signature = signed(client)
    assert sign_in(client, message, signature).status_code == 201
    assert "used it already" in refused(sign_in(client, message, signature), 4)


def test_a_nonce_this_service_never_issued_is_refused(client):
    message = siwe_message(DOMAIN, WALLET, "Kq3m8ZtP0aR7wXy2bC5d")
    refused(sign_in(client, message, sign_messages([(KEY, message)])[0]), 4)


def test_an_expired_nonce_is_refused(app, client):
    app.config["IDENTITY_SIWE_NONCE_SECONDS"] = 1
    message, signature = signed(client)
    time.sleep(1.1)
    assert "expired" in refused(sign_in(client, message, signature), 4)


def test_an_expired_message_is_refused_and_its_nonce_spent(client):
    now = datetime.now(UTC)
    nonce = new_nonce(client)
    expired = siwe_message(DOMAIN, WALLET, nonce, issued_at=now - timedelta(minutes=10),
                           expiration_time=now - timedelta(minutes=1))
    retried = siwe_message(DOMAIN, WALLET, nonce)
    expired_signature, retried_signature = sign_messages([(KEY, expired), (KEY, retried)])
    assert "Expiration Time has passed" in refused(sign_in(client, expired, expired_signature), 5)
    refused(sign_in(client, retried, retried_signature), 4)


def test_a_future_not_before_is_refused(client):
    message, signature = signed(client, not_before=datetime.now(UTC) + timedelta(minutes=5))
    assert "Not Before" in refused(sign_in(client, message, signature), 5)


def test_issued_at_more_than_five_minutes_ahead_is_refused(client):
    message, signature = signed(client, issued_at=datetime.now(UTC) + timedelta(minutes=6))
    assert "Issued At" in refused(sign_in(client, message, signature), 5)


def test_a_signature_by_another_wallet_is_refused_naming_the_chain_and_the_setting_without_an_endpoint(client):
    message = siwe_message(DOMAIN, WALLET, new_nonce(client))
    detail = refused(sign_in(client, message, sign_messages([(OTHER_KEY, message)])[0]), 6)
    assert "another wallet" in detail and "EIP-1271" in detail
    assert "chain 1" in detail and "IDENTITY_ETH_RPC_URLS" in detail


def test_a_truncated_signature_is_refused_and_its_nonce_spent(client):
    message, signature = signed(client)
    assert "128 characters" in refused(sign_in(client, message, signature[:-2]), 6)
    refused(sign_in(client, message, signature), 4)


def test_a_signature_of_other_text_is_refused(client):
    message, _ = signed(client)
    other = sign_messages([(KEY, message + " ")])[0]
    refused(sign_in(client, message, other), 6)


# --- concurrency -------------------------------------------------------------------------------------

def test_of_two_concurrent_sign_ins_with_one_nonce_exactly_one_succeeds(database_url, app_config, client):
    """Two nodes on one database, each sent the same signed message at once, round after round."""
    nodes = [make_app(database_url, **app_config) for _ in range(2)]
    rounds = 8
    messages = [siwe_message(DOMAIN, WALLET, new_nonce(client)) for _ in range(rounds)]
    signatures = sign_messages([(KEY, message) for message in messages])
    for message, signature in zip(messages, signatures, strict=True):
        barrier = threading.Barrier(2)
        statuses = []

        def post(node, message=message, signature=signature, barrier=barrier, statuses=statuses):
            node_client = node.test_client()
            barrier.wait()
            statuses.append(sign_in(node_client, message, signature).status_code)

        threads = [threading.Thread(target=post, args=(node,)) for node in nodes]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(statuses) == [201, 401]


# --- off ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("method, path, body", [("get", "/auth/nonce", None), ("post", "/auth/siwe", "not json")])
def test_both_routes_are_404_naming_the_setting_until_the_domain_is_set(database_url, method, path, body):
    off = make_app(database_url).test_client()
    response = getattr(off, method)(path, data=body, content_type="application/json" if body else None)
    assert response.status_code == 404
    assert "IDENTITY_SIWE_DOMAIN" in response.get_json()["detail"]
    assert "X-RateLimit-Limit" not in response.headers


@pytest.mark.parametrize("uri", ["urn:uuid:7f9d2a4e-0f8e-4b1a-9c3d-2e5f6a7b8c9d", "https://identity.example.com:port/",
                                 "identity.example.com"])
def test_an_identity_siwe_uri_without_an_origin_is_refused_at_start_saying_what_it_must_be(uri):
    with pytest.raises(ValueError, match="must be an absolute URI with a host, such as https://"):
        settings_from_env({"IDENTITY_SIWE_DOMAIN": DOMAIN, "IDENTITY_SIWE_URI": uri})
    assert settings_from_env({"IDENTITY_SIWE_URI": "http://127.0.0.1:8000"})["IDENTITY_SIWE_URI"] == "http://127.0.0.1:8000"
