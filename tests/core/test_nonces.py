"""Sign-in nonces (identity.core.nonces): letters and digits that carry over 96 random bits, their expiry and a
proof under the service's secret, so that issuing one stores nothing; on SQLite and on PostgreSQL (whose
database holds the secret)."""

from datetime import UTC, datetime, timedelta

from identity.core import nonces, siwe
from identity.storage.database import db, write_transaction
from identity.storage.models import ServiceSecret, SpentNonce
from tests.common.apps import make_app


def test_a_nonce_is_letters_and_digits_the_grammar_accepts_carrying_over_96_random_bits(app):
    now = datetime.now(UTC)
    with app.app_context():
        issued = [nonces.issue(now, 600) for _ in range(1000)]
    assert len({nonce for nonce, _ in issued}) == 1000
    assert nonces.RANDOM_BYTES * 8 >= 96
    for nonce, expires_at in issued:
        assert len(nonce) == siwe.NONCE_LENGTH and nonce.isascii() and nonce.isalnum()
        assert timedelta(seconds=599) <= expires_at - now <= timedelta(seconds=600)
    # Every symbol turns up: the alphabet is used whole.
    assert set("".join(nonce for nonce, _ in issued)) == set(siwe.NONCE_ALPHABET)
    nonce = issued[0][0]
    assert siwe.parse(SIGNED.replace("Nonce: 32891756", f"Nonce: {nonce}")).nonce == nonce


def test_a_nonce_tells_its_expiry_to_every_node_of_the_database_and_to_no_other_service(app, database_url):
    now = datetime.now(UTC)
    with app.app_context():
        nonce, expires_at = nonces.issue(now, 600)
    with make_app(database_url).app_context():
        assert nonces.expiry_of(nonce) == expires_at
    # Another service (another database, another secret) issued nothing that this one accepts.
    with app.app_context():
        db.session.execute(db.update(ServiceSecret).values(value="another secret"))
        db.session.commit()
    with make_app(database_url).app_context():
        assert nonces.expiry_of(nonce) is None


def test_a_nonce_whose_expiry_is_moved_later_is_not_one_this_service_issued(app):
    with app.app_context():
        nonce, _ = nonces.issue(datetime.now(UTC), 600)
        raw = nonces._decode(nonce)
        later = (int.from_bytes(raw[13:18], "big") + 86_400).to_bytes(5, "big")
        forged = nonces._encode(raw[:13] + later + raw[18:])
        assert forged != nonce and nonces.expiry_of(forged) is None
        for other in ("", "0" * 46, "z" * 46, nonce + "0", nonce[:-1], nonce.lower(), None, 46):
            assert nonces.expiry_of(other) is None


def test_a_nonce_is_spent_once_and_spent_nonces_go_when_they_expire(app):
    now = datetime.now(UTC)
    with app.app_context():
        nonce, expires_at = nonces.issue(now, 600)
        old, old_expiry = nonces.issue(now - timedelta(seconds=700), 600)
        with write_transaction() as session:
            assert nonces.spend(session, old, old_expiry, now - timedelta(seconds=650))
        with write_transaction() as session:
            assert nonces.spend(session, nonce, expires_at, now)
        with write_transaction() as session:
            assert not nonces.spend(session, nonce, expires_at, now)
        kept = db.session.execute(db.select(SpentNonce.nonce)).scalars().all()
        db.session.commit()
    assert kept == [nonce]


SIGNED = "\n".join([
    "identity.example.com wants you to sign in with your Ethereum account:",
    "0x25F0de053303DC1E4F857Befe51E283754fD249a", "", "Sign in.", "", "URI: https://identity.example.com",
    "Version: 1", "Chain ID: 1", "Nonce: 32891756", "Issued At: 2026-11-21T09:30:00Z",
])
