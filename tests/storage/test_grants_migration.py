"""Migration 0009 (sign-in grants, stateless nonces): existing users are granted what their keys say, and the
nonces waiting go."""

from datetime import UTC, datetime

from flask_migrate import downgrade, upgrade
from sqlalchemy import column, insert, select, table

from identity.storage.database import db
from identity.storage.models import User
from tests.common.apps import make_app

AT = datetime(2026, 11, 1, 12, 0, 0, tzinfo=UTC)
# Each user's keys before the migration, as (scope, created_by), and the grant it must have after.
USERS = {
    "0x1000000000000000000000000000000000000001": ([("read", "cli")], "read"),  # a mirror's wallet
    "0x1000000000000000000000000000000000000002": ([("read", "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"),
                                                    ("read", "cli")], "read"),
    # A read-only wallet that signed itself into a write key already: a sign-in's keys do not count.
    "0x1000000000000000000000000000000000000003": ([("read", "cli"), ("write", "siwe")], "read"),
    "0x1000000000000000000000000000000000000004": ([("read", "cli"), ("write", "cli")], "write"),
    "0x1000000000000000000000000000000000000005": ([("write", "siwe")], "write"),  # came in by a sign-in
    "0x1000000000000000000000000000000000000006": ([], "write"),  # an identity's creator, never issued a key
}


def test_existing_users_are_granted_read_when_every_key_an_admin_or_the_cli_issued_them_is_read(empty_database_url):
    app = make_app(empty_database_url)
    with app.app_context():
        upgrade(revision="0008")
        # The tables as 0008 left them: the model's new column does not exist yet.
        users = table("users", *(column(name) for name in ("id", "wallet", "role", "created_at", "updated_at")))
        keys = table("api_keys", *(column(name) for name in (
            "id", "user_id", "key_hash", "hint", "created_at", "scope", "created_by")))
        for number, (wallet, (issued, _)) in enumerate(USERS.items()):
            user_id = f"u{number}"
            db.session.execute(insert(users).values(id=user_id, wallet=wallet, role="User", created_at=AT,
                                                    updated_at=AT))
            for index, (scope, created_by) in enumerate(issued):
                db.session.execute(insert(keys).values(
                    id=f"k{number}-{index}", user_id=user_id, key_hash=f"{number:032d}{index:032d}", hint="idsk_xxxx",
                    created_at=AT, scope=scope, created_by=created_by))
        db.session.commit()
        upgrade()
        grants = dict(db.session.execute(select(User.wallet, User.grant)).all())
        db.session.commit()
        assert grants == {wallet: grant for wallet, (_, grant) in USERS.items()}
        db.engine.dispose()


def test_migration_0009_goes_down_and_up_again(empty_database_url):
    app = make_app(empty_database_url)
    with app.app_context():
        upgrade()
        downgrade(revision="0008")
        inspector = db.inspect(db.engine)
        assert "grant" not in {column["name"] for column in inspector.get_columns("users")}
        assert "signin_nonces" in inspector.get_table_names()
        assert "signin_spent_nonces" not in inspector.get_table_names()
        upgrade()
        inspector = db.inspect(db.engine)
        assert "grant" in {column["name"] for column in inspector.get_columns("users")}
        assert "signin_nonces" not in inspector.get_table_names()
        assert "signin_spent_nonces" in inspector.get_table_names()
        db.engine.dispose()
