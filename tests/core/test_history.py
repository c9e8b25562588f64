"""The change log: GET /identity/<id>/changes, the feed GET /changes, and the migration's backfill."""

import re
from datetime import UTC, datetime

import pytest
from flask_migrate import upgrade
from sqlalchemy import column, insert, table

from identity.core import keys
from identity.seed import create_identity, set_status
from identity.storage.database import db
from identity.storage.models import Change
from tests.common.apps import ADMIN_WALLET, OTHER_WALLET, USER_WALLET, make_app

TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")
ENTRY_KEYS = {"seq", "identity_id", "at", "wallet", "kind", "fields"}
REDACTED_KEYS = {"seq", "identity_id", "at", "kind"}


@pytest.fixture
def get(client):
    """get(path, key, **params) -> the response."""

    def send(path, key, **params):
        return client.get(path, query_string=params, headers={"x-api-key": key})

    return send


@pytest.fixture
def patch(client, admin_key):
    def send(identity_id, body, key=None):
        return client.patch(f"/identity/{identity_id}", json=body, headers={"x-api-key": key or admin_key})

    return send


def test_a_create_is_recorded_with_the_acting_wallet(create, get, admin_key, user_key):
    mine = create({"display_name": "Mine"}).get_json()
    for_other = create({"display_name": "For another", "creator": OTHER_WALLET}, key=admin_key).get_json()
    [entry] = get(f"/identity/{mine['identity_id']}/changes", user_key).get_json()["data"]
    assert set(entry) == ENTRY_KEYS
    assert (entry["identity_id"], entry["kind"], entry["wallet"], entry["fields"]) == (
        mine["identity_id"], "created", USER_WALLET, None,
    )
    assert entry["at"] == mine["created_at"]
    [entry] = get(f"/identity/{for_other['identity_id']}/changes", user_key).get_json()["data"]
    assert entry["wallet"] == ADMIN_WALLET  # who acted, not the creator


def test_a_change_records_each_changed_field_before_and_after(create, get, patch, user_key):
    identity = create({"display_name": "Changing"}).get_json()
    updated = patch(identity["identity_id"], {"status": "pending", "vault_id": "77", "num_positions": 0,
                                              "semantic": "person"}).get_json()
    entries = get(f"/identity/{identity['identity_id']}/changes", user_key).get_json()["data"]
    assert [entry["kind"] for entry in entries] == ["created", "changed"]
    change = entries[1]
    assert change["fields"] == {
        "status": {"before": "complete", "after": "pending"},
        "vault_id": {"before": "0", "after": "77"},
        "semantic": {"before": None, "after": "person"},
    }  # num_positions was 0 already: not a change
    assert change["wallet"] == ADMIN_WALLET
    assert change["at"] == updated["updated_at"]
    assert TIMESTAMP.fullmatch(change["at"])
    assert change["seq"] > entries[0]["seq"]


def test_history_is_oldest_first_on_both_paths(create, get, patch, user_key):
    identity = create({"display_name": "Ordered"}).get_json()
    for status in ("pending", "error", "complete"):
        patch(identity["identity_id"], {"status": status})
    singular = get(f"/identity/{identity['identity_id']}/changes", user_key).get_json()["data"]
    plural = get(f"/identities/{identity['identity_id']}/changes", user_key).get_json()["data"]
    assert singular == plural
    assert [entry["fields"] and entry["fields"]["status"]["after"] for entry in singular] == [
        None, "pending", "error", "complete",
    ]
    assert [entry["seq"] for entry in singular] == sorted(entry["seq"] for entry in singular)


def test_refused_writes_record_nothing(create, get, patch, client, admin_key, user_key):
    identity = create({"display_name": "Refusals"}).get_json()
    assert create({"display_name": "Refusals"}).status_code == 409
    assert patch(identity["identity_id"], {"status": "gone"}).status_code == 422
    assert patch(identity["identity_id"], {"status": "removed"}, key=user_key).status_code == 403
    stale = client.patch(f"/identity/{identity['identity_id']}", json={"status": "pending"},
                         headers={"x-api-key": admin_key, "If-Match": '"stale"'})
    assert stale.status_code == 412
    assert patch(identity["identity_id"], {"status": "complete"}).status_code == 200  # no change
    assert len(get(f"/identity/{identity['identity_id']}/changes", user_key).get_json()["data"]) == 1
    assert len(get("/changes", user_key).get_json()["data"]) == 1


def test_history_of_an_unknown_identity_is_404_and_needs_a_key(get, client, user_key):
    unknown = "did:identity:ipfs:bafkreie4qnqptqtkp7dhls3cv5mstrcf52olspzugrjhduqgsxtxrmyxci"
    assert get(f"/identity/{unknown}/changes", user_key).status_code == 404
    assert get("/identity/nonsense/changes", user_key).status_code == 404
    assert get("/identity/did:identity:ipfs:bafkrei%00/changes", user_key).status_code == 404
    assert client.get(f"/identity/{unknown}/changes").status_code == 401
    assert client.get("/changes").status_code == 401


def test_feed_pages_in_order_and_next_after_continues(create, get, patch, user_key):
    created = [create({"display_name": f"feed {n}"}).get_json() for n in range(5)]
    patch(created[0]["identity_id"], {"status": "pending"})
    first = get("/changes", user_key, limit=4).get_json()
    assert [entry["identity_id"] for entry in first["data"]] == [identity["identity_id"] for identity in created[:4]]
    assert first["next_after"] == first["data"][-1]["seq"]
    second = get("/changes", user_key, after=first["next_after"], limit=4).get_json()
    assert [(entry["identity_id"], entry["kind"]) for entry in second["data"]] == [
        (created[4]["identity_id"], "created"), (created[0]["identity_id"], "changed"),
    ]
    end = get("/changes", user_key, after=second["next_after"]).get_json()
    assert end == {"data": [], "next_after": second["next_after"]}
    everything = get("/changes", user_key).get_json()["data"]
    assert everything == first["data"] + second["data"]


def test_feed_limit_defaults_to_100_and_goes_to_1000(app, get, user_key):
    for n in range(101):
        create_identity(app, f"many {n}")
    assert len(get("/changes", user_key).get_json()["data"]) == 100
    assert len(get("/changes", user_key, limit=1000).get_json()["data"]) == 101


def last_seq(get, key):
    return get("/changes", key, limit=1000).get_json()["data"][-1]["seq"]


def test_feed_at_its_end_is_empty_and_keeps_after(app, get, user_key):
    create_identity(app, "The only one")
    end = last_seq(get, user_key)
    assert get("/changes", user_key, after=end).get_json() == {"data": [], "next_after": end}


@pytest.mark.parametrize("feed", ["normal", "longpoll", "eventsource"])
def test_a_position_beyond_every_seq_ever_issued_is_a_409_naming_the_feeds_end(app, get, user_key, feed):
    """Nothing would ever come after it: the entries to come are numbered end + 1, end + 2, ... and a client
    asking for those above end + 4 would miss them. Long polls and streams answer at once instead of waiting."""
    create_identity(app, "The only one")
    end = last_seq(get, user_key)
    response = get("/changes", user_key, after=end + 4, feed=feed, timeout=60_000)
    assert response.status_code == 409
    assert response.content_type == "application/problem+json"
    problem = response.get_json()
    assert problem["feed_end"] == end
    assert f"after {end + 4} is beyond the end" in problem["detail"] and "after=0" in problem["detail"]


def test_a_stream_resuming_beyond_the_feeds_end_is_told_so(app, get, client, user_key):
    create_identity(app, "The only one")
    end = last_seq(get, user_key)
    headers = {"x-api-key": user_key, "Accept": "text/event-stream", "Last-Event-ID": str(end + 1)}
    response = client.get("/changes", headers=headers)
    assert response.status_code == 409
    assert response.get_json()["feed_end"] == end
    assert response.get_json()["detail"].startswith(f"Last-Event-ID {end + 1} is beyond the end")


def test_the_feeds_end_is_the_highest_seq_ever_issued_not_the_last_entry_left(app, get, user_key):
    """Numbers are never reused: a seq issued once counts, even when its entry is gone (a restore raises the
    sequence this way, identity.data.restore)."""
    create_identity(app, "One")
    create_identity(app, "Two")
    end = last_seq(get, user_key)
    with app.app_context():
        db.session.execute(Change.__table__.delete().where(Change.seq == end))
        db.session.commit()
    assert get("/changes", user_key, after=end).get_json() == {"data": [], "next_after": end}
    assert get("/changes", user_key, after=end + 1).get_json()["feed_end"] == end


@pytest.mark.parametrize(
    "params, named",
    [
        ({"limit": 0}, "limit"),
        ({"limit": 1001}, "limit"),
        ({"limit": "ten"}, "limit"),
        ({"after": -1}, "after"),
        ({"after": 2**53}, "after"),
        ({"after": "1.5"}, "after"),
        ({"since": 3}, "since"),
    ],
)
def test_feed_query_parameter_errors_are_400_naming_it(get, user_key, params, named):
    response = get("/changes", user_key, **params)
    assert response.status_code == 400
    assert response.mimetype == "application/problem+json"
    problem = response.get_json()
    assert set(problem["errors"]) == {named}
    assert named in problem["detail"]


def test_entries_of_a_removed_identity_are_redacted_for_non_admin_keys(create, get, patch, admin_key, user_key):
    removed = create({"display_name": "To remove"}).get_json()
    kept = create({"display_name": "To keep"}).get_json()
    patch(removed["identity_id"], {"status": "removed"})
    for path in ("/changes", f"/identity/{removed['identity_id']}/changes"):
        for entry in get(path, user_key).get_json()["data"]:
            expected = REDACTED_KEYS if entry["identity_id"] == removed["identity_id"] else ENTRY_KEYS
            assert set(entry) == expected
        assert all(set(entry) == ENTRY_KEYS for entry in get(path, admin_key).get_json()["data"])
    assert any(entry["identity_id"] == kept["identity_id"] for entry in get("/changes", user_key).get_json()["data"])
    patch(removed["identity_id"], {"status": "complete"})
    assert all(set(entry) == ENTRY_KEYS for entry in get("/changes", user_key).get_json()["data"])


def test_seed_set_status_is_recorded_with_its_wallet(app, get, user_key):
    seeded = create_identity(app, "Seeded", creator=OTHER_WALLET)
    set_status(app, seeded["identity_id"], "removed")
    set_status(app, seeded["identity_id"], "complete", by=ADMIN_WALLET)
    entries = get(f"/identity/{seeded['identity_id']}/changes", user_key).get_json()["data"]
    assert [(entry["kind"], entry["wallet"]) for entry in entries] == [
        ("created", OTHER_WALLET), ("changed", "seed"), ("changed", ADMIN_WALLET),
    ]


def test_migration_gives_existing_identities_their_created_entry_oldest_first(empty_database_url):
    app = make_app(empty_database_url)
    with app.app_context():
        upgrade(revision="0001")
        creator = {"id": "u1", "wallet": OTHER_WALLET, "role": "User", "created_at": _at(0), "updated_at": _at(0)}
        db.session.execute(insert(table_of('users', creator)), [creator])
        rows = [_identity_row(n, "u1") for n in (2, 0, 1)]
        db.session.execute(insert(table_of('identities', rows[0])), rows)
        db.session.commit()
        upgrade()
        key, _ = keys.issue_key(USER_WALLET, None)
    entries = app.test_client().get("/changes", headers={"x-api-key": key}).get_json()["data"]
    assert [(entry["identity_id"], entry["kind"], entry["wallet"], entry["fields"]) for entry in entries] == [
        (f"did:identity:ipfs:{_content_id(n)}", "created", OTHER_WALLET, None) for n in (0, 1, 2)
    ]
    assert [entry["at"] for entry in entries] == [_at(n).isoformat().replace("+00:00", "Z") for n in (0, 1, 2)]
    with app.app_context():
        db.engine.dispose()


def _at(n):
    return datetime(2026, 11, 1, 12, 0, n, 123456, tzinfo=UTC)


def _content_id(n):
    return "bafkrei" + "a" * 51 + "abcdefghijklmnopqrstuvwxyz"[n]


def _identity_row(n, creator_id):
    return {
        "id": f"i{n}", "identity_id": f"did:identity:ipfs:{_content_id(n)}", "content_id": _content_id(n),
        "identity_hash": "0x" + "0" * 64, "vault_id": 0, "display_name": f"old {n}", "creator_id": creator_id,
        "created_at": _at(n), "updated_at": _at(n), "num_positions": 0, "assets_sum": 0, "conviction_sum": 0,
        "conviction_price": 0, "status": "complete", "is_user": False, "user_conviction": 0,
        "user_conviction_value": 0,
    }


def table_of(name, row):
    """The table `name` with only `row`'s columns: a row written as an early migration left the table, whatever the
    models have added since."""
    return table(name, *(column(key) for key in row))
