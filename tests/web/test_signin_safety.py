"""What keeps the sign-in routes safe: a budget per client address (behind a trusted proxy, the address it saw),
nonces that store nothing until a sign-in spends them, logs without secrets, and no 500 for any body however malformed."""

import json
import logging
from datetime import UTC, datetime, timedelta

import pytest
from eth_account import Account
from eth_account.messages import encode_defunct
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import func, inspect, select, table, update

from identity.storage.database import db
from identity.storage.models import SpentNonce
from tests.common.apps import make_app
from tests.wallets import address_of, private_key, siwe_message

DOMAIN = "identity.example.com"
KEY = private_key("signer")
WALLET = address_of(KEY)


@pytest.fixture
def app_config():
    return {"IDENTITY_SIWE_DOMAIN": DOMAIN, "IDENTITY_RATELIMIT_SIGNIN": "3/minute", "IDENTITY_SIWE_MAX_NONCES": 5}


def nonce_from(client, address=None, peer="127.0.0.1"):
    headers = {"X-Forwarded-For": address} if address else {}
    return client.get("/auth/nonce", headers=headers, environ_base={"REMOTE_ADDR": peer})


def age_every_spent_nonce(app):
    with app.app_context():
        db.session.execute(update(SpentNonce).values(expires_at=datetime.now(UTC) - timedelta(seconds=1)))
        db.session.commit()


def signed_body(client, key=KEY):
    """A valid sign-in body (signed here with eth-account: these tests are not about the signer)."""
    message = siwe_message(DOMAIN, address_of(key), client.get("/auth/nonce").get_json()["nonce"])
    signature = Account.sign_message(encode_defunct(text=message), key).signature.to_0x_hex()
    return {"message": message, "signature": signature}


# --- budgets per client address ---------------------------------------------------------------------

def test_each_route_has_a_budget_per_client_address_answered_429_as_elsewhere(client):
    for _ in range(3):
        assert nonce_from(client, peer="198.51.100.7").status_code == 200
    response = nonce_from(client, peer="198.51.100.7")
    assert response.status_code == 429
    assert int(response.headers["Retry-After"]) >= 1
    assert "from this address" in response.get_json()["detail"] and "3/minute" in response.get_json()["detail"]
    assert nonce_from(client, peer="198.51.100.8").status_code == 200
    # POST /auth/siwe counts apart: the address's nonces are spent, its sign-ins are not.
    refused = client.post("/auth/siwe", json={"message": "x", "signature": "0x"}, environ_base={"REMOTE_ADDR": "198.51.100.7"})
    assert refused.status_code == 422
    assert refused.headers["X-RateLimit-Remaining"] == "2"


def test_behind_a_trusted_proxy_the_budget_is_the_address_the_proxy_saw(client):
    # The nginx recipe appends the address it saw to X-Forwarded-For; what comes before is the client's own say.
    for forged in ("10.0.0.1", "10.0.0.2", "10.0.0.3"):
        assert nonce_from(client, f"{forged}, 203.0.113.9").status_code == 200
    assert nonce_from(client, "10.0.0.4, 203.0.113.9").status_code == 429
    assert nonce_from(client, "203.0.113.10").status_code == 200


def test_a_proxy_on_the_unix_socket_is_trusted_as_gunicorn_trusts_it(client):
    for _ in range(3):
        assert nonce_from(client, "203.0.113.40", peer="").status_code == 200
    assert nonce_from(client, "203.0.113.40", peer="").status_code == 429
    assert nonce_from(client, "203.0.113.41", peer="").status_code == 200


def test_an_untrusted_peer_cannot_name_another_address(client):
    for number in range(3):
        assert nonce_from(client, f"203.0.113.{number}", peer="198.51.100.9").status_code == 200
    assert nonce_from(client, "203.0.113.99", peer="198.51.100.9").status_code == 429


def test_an_ipv6_client_counts_by_its_64(client):
    for suffix in ("1", "2", "3"):
        assert nonce_from(client, peer=f"2001:db8:1:2::{suffix}").status_code == 200
    assert nonce_from(client, peer="2001:db8:1:2:ffff::9").status_code == 429
    assert nonce_from(client, peer="2001:db8:1:3::1").status_code == 200


def test_forwarded_allow_ips_names_the_trusted_proxies(database_url, app_config):
    app = make_app(database_url, **app_config, FORWARDED_ALLOW_IPS="192.0.2.0/24")
    client = app.test_client()
    for number in range(3):
        assert nonce_from(client, "203.0.113.5", peer=f"192.0.2.{number + 1}").status_code == 200
    assert nonce_from(client, "203.0.113.5", peer="192.0.2.200").status_code == 429
    assert nonce_from(client, "203.0.113.5", peer="127.0.0.1").status_code == 200  # not trusted here: its own


# --- what a crowd cannot do ----------------------------------------------------------------------

def stored_for_sign_in(app):
    """Rows of every table of nonces: what sign-in keeps in the database, however it is laid out."""
    with app.app_context():
        names = [name for name in inspect(db.engine).get_table_names() if "nonce" in name]
        count = sum(db.session.execute(select(func.count()).select_from(table(name))).scalar_one() for name in names)
        db.session.commit()
    return count


def test_a_flood_of_nonces_from_many_ipv6_64s_keeps_no_one_from_signing_in_and_stores_nothing(app, client):
    """400 /64s (less than a /55), each asking past its budget, as a crowd of browsers or one customer's /48 can."""
    statuses = []
    for network in range(400):
        for host in range(4):
            statuses.append(nonce_from(client, peer=f"2001:db8:{network:x}:0:{host + 1}::7").status_code)
    assert statuses.count(200) == 400 * 3 and statuses.count(429) == 400 and set(statuses) == {200, 429}
    assert stored_for_sign_in(app) == 0
    # A user elsewhere asks for a nonce and signs in as usual; the one nonce spent is all that is kept.
    response = client.post("/auth/siwe", json=signed_body(client))
    assert response.status_code == 201, response.text
    assert stored_for_sign_in(app) == 1


def test_a_spent_nonce_is_kept_until_it_expires_and_purged_by_a_later_sign_in(app, client):
    app.config["IDENTITY_SIWE_NONCE_SECONDS"] = 10
    assert client.post("/auth/siwe", json=signed_body(client)).status_code == 201
    assert stored_for_sign_in(app) == 1
    age_every_spent_nonce(app)
    assert client.post("/auth/siwe", json=signed_body(client)).status_code == 201
    assert stored_for_sign_in(app) == 1


def test_a_sign_in_spends_the_nonce_it_names_whatever_its_outcome(app, client):
    body = signed_body(client)
    assert stored_for_sign_in(app) == 0
    bad = {**body, "signature": body["signature"][:-2]}
    assert client.post("/auth/siwe", json=bad).status_code == 401
    assert stored_for_sign_in(app) == 1
    again = client.post("/auth/siwe", json=body)
    assert again.status_code == 401 and "used it already" in again.get_json()["detail"]


@pytest.mark.parametrize("tamper", ["last character", "first character", "longer", "shorter"])
def test_a_nonce_altered_in_any_way_is_refused_at_check_4_and_stores_nothing(app, client, tamper):
    nonce = client.get("/auth/nonce").get_json()["nonce"]
    swap = {"0": "1"}.get
    altered = {
        "last character": nonce[:-1] + (swap(nonce[-1]) or "0"),
        "first character": (swap(nonce[0]) or "0") + nonce[1:],
        "longer": nonce + "a",
        "shorter": nonce[:-1],
    }[tamper]
    message = siwe_message(DOMAIN, WALLET, altered)
    signature = Account.sign_message(encode_defunct(text=message), KEY).signature.to_0x_hex()
    response = client.post("/auth/siwe", json={"message": message, "signature": signature})
    assert response.status_code == 401
    assert response.get_json()["detail"].startswith("Sign-in refused at check 4 (nonce)")
    assert stored_for_sign_in(app) == 0


# --- logs ------------------------------------------------------------------------------------------

def test_a_sign_in_is_logged_with_its_wallet_and_key_id_and_nothing_secret(client, caplog):
    caplog.set_level(logging.INFO)
    body = signed_body(client)
    issued = client.post("/auth/siwe", json=body).get_json()
    refused = client.post("/auth/siwe", json=body)
    assert refused.status_code == 401
    issued_line = next(record for record in caplog.records if getattr(record, "key_id", None) == issued["id"])
    assert issued_line.wallet == WALLET and issued_line.acting_wallet == "siwe"
    refusal = next(record for record in caplog.records if getattr(record, "check", None) == "nonce")
    assert refusal.wallet == WALLET
    logged = caplog.text + "".join(json.dumps(vars(record), default=str) for record in caplog.records)
    for secret in (issued["key"], body["signature"], body["signature"][2:], body["message"]):
        assert secret not in logged


# --- no input is a 500 --------------------------------------------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
LINES = st.lists(st.sampled_from([
    f"{DOMAIN} wants you to sign in with your Ethereum account:", WALLET, WALLET.lower(), "", "URI: https://x",
    "Version: 1", "Version: 2", "Chain ID: 1", "Chain ID: 99999999999999999999999999999999999999999999999999999999999999999999999999999999",
    "Nonce: Kq3m8ZtP0aR7wXy2bC5d", "Issued At: 2026-11-21T09:30:00Z", "Issued At: 9999-12-31T23:59:60Z",
    "Expiration Time: 0001-01-01T00:00:00+23:59", "Resources:", "- https://x", "\r", "\x00", "é",
]), max_size=14).map("\n".join)
SIGNATURES = st.sampled_from(["", "0x", "0x" + "ff" * 65, "0x" + "00" * 65, "0x" + "11" * 64 + "1b", "0X" + "11" * 65]) | st.text()


@pytest.fixture
def unlimited(database_url):
    return make_app(database_url, IDENTITY_SIWE_DOMAIN=DOMAIN, IDENTITY_RATELIMIT_SIGNIN="1000000/minute").test_client()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(message=LINES | st.text(max_size=300) | JSON, signature=SIGNATURES | JSON, extra=st.dictionaries(
    st.sampled_from(["scope", "label", "nickname"]), JSON, max_size=2))
def test_no_body_however_malformed_is_a_500(unlimited, message, signature, extra):
    response = unlimited.post("/auth/siwe", json={"message": message, "signature": signature, **extra})
    assert response.status_code in (400, 401, 422), response.text  # 400: Infinity, which is not JSON
    assert response.mimetype == "application/problem+json"


def test_a_huge_message_is_a_422_and_a_huge_body_a_413(client):
    response = client.post("/auth/siwe", json={"message": "a" * 60_000, "signature": "0x"})
    assert response.status_code == 422 and "longer than 8192" in response.get_json()["detail"]
    assert client.post("/auth/siwe", json={"message": "a" * 70_000, "signature": "0x"}).status_code == 413
