"""Migration 0004 (keys over HTTP): keys issued before it keep working unchanged."""

import hashlib
from datetime import UTC, datetime

from flask_migrate import downgrade, upgrade
from sqlalchemy import column, insert, table

from identity.storage.database import db
from tests.common.apps import USER_WALLET, make_app

OLD_KEY = "idsk_" + "k" * 43
AT = datetime(2026, 11, 1, 12, 0, 0, 123456, tzinfo=UTC)


def test_a_key_issued_before_the_migration_keeps_working_as_a_write_key_without_expiry(empty_database_url):
    app = make_app(empty_database_url)
    with app.app_context():
        upgrade(revision="0003")
        user = {"id": "u1", "wallet": USER_WALLET, "role": "User", "created_at": AT, "updated_at": AT}
        db.session.execute(insert(table("users", *(column(name) for name in user))).values(user))
        key_hash = hashlib.sha256(OLD_KEY.encode()).hexdigest()
        old_key = {"id": "5d1c2b3a-0e4f-4a6b-8c7d-9e0f1a2b3c4d", "user_id": "u1", "key_hash": key_hash, "hint": OLD_KEY[:9], "created_at": AT}
        # The table as 0003 left it: the model's new columns (and their defaults) do not exist yet.
        api_keys_0003 = table("api_keys", *(column(name) for name in old_key))
        db.session.execute(insert(api_keys_0003).values(old_key))
        db.session.commit()
        upgrade()
    client = app.test_client()
    me = client.get("/me", headers={"x-api-key": OLD_KEY})
    assert me.status_code == 200
    key = me.get_json()["key"]
    assert (key["scope"], key["label"], key["expires_at"], key["revoked_at"], key["created_by"]) == (
        "write", None, None, None, "cli"
    )
    created = client.post("/identity", json={"display_name": "after 0004"}, headers={"x-api-key": OLD_KEY})
    assert created.status_code == 201
    with app.app_context():
        db.engine.dispose()


def test_migration_0004_goes_down_and_up_again(empty_database_url):
    app = make_app(empty_database_url)
    with app.app_context():
        upgrade()
        downgrade(revision="0003")
        columns = {column["name"] for column in db.inspect(db.engine).get_columns("api_keys")}
        assert not columns & {"scope", "label", "expires_at", "last_used_at", "created_by"}
        upgrade()
        columns = {column["name"] for column in db.inspect(db.engine).get_columns("api_keys")}
        assert {"scope", "label", "expires_at", "last_used_at", "created_by"} <= columns
        db.engine.dispose()
