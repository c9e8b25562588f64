"""GET /identities and /identities/search: paging, cursors, sorting, the creator and status filters, errors."""

from datetime import UTC, datetime
from urllib.parse import urlencode

import pytest
from flask_migrate import upgrade
from sqlalchemy import column, insert, table, text, update

from identity import seed
from identity.core import content
from identity.storage.database import db
from identity.storage.models import OFF_CHAIN, Identity, new_id, utcnow
from tests.common.apps import ADMIN_WALLET, OTHER_WALLET, USER_WALLET, make_app


@pytest.fixture
def listing(client, user_key):
    """listing(key=user_key, path="/identities", **params) -> the response of a GET."""

    def get(key=None, path="/identities", **params):
        return client.get(f"{path}?{urlencode(params)}", headers={"x-api-key": key or user_key})

    return get


@pytest.fixture
def make(app):
    """make(count, prefix="Item", creator=USER_WALLET, **fields) -> the identities created, oldest first."""

    def create(count, prefix="Item", creator=USER_WALLET, **fields):
        return [
            seed.create_identity(app, f"{prefix} {number:03d}", creator=creator, **fields) for number in range(count)
        ]

    return create


def set_column(app, identity_id, **values):
    """What an Admin's PATCH (issue 15) does to a row: an UPDATE of its status, num_positions, ..."""
    with app.app_context():
        db.session.execute(update(Identity).where(Identity.identity_id == identity_id).values(**values))
        db.session.commit()


def ids(response):
    return [item["identity_id"] for item in response.get_json()["data"]]


def walk(listing, **params):
    """Every page from the first by following next; returns the pages."""
    pages = [listing(**params).get_json()]
    while pages[-1]["next"]:
        pages.append(listing(cursor=pages[-1]["next"]).get_json())
    return pages


def test_listing_is_newest_first_with_the_page_shape(listing, make):
    made = make(3)
    response = listing()
    assert response.status_code == 200
    body = response.get_json()
    assert set(body) == {"page", "limit", "total", "data", "next"}
    assert (body["page"], body["limit"], body["total"], body["next"]) == (1, 20, 3, None)
    assert ids(response) == [identity["identity_id"] for identity in reversed(made)]


def test_each_item_is_the_identity_object_get_returns(client, listing, make, user_key):
    make(2, description="Listed", image="https://example.org/i.png")
    for item in listing().get_json()["data"]:
        fetched = client.get(f"/identity/{item['identity_id']}", headers={"x-api-key": user_key}).get_json()
        item["creator"].pop("last_login")
        fetched["creator"].pop("last_login")
        assert item == fetched


def test_search_path_is_the_same_listing(listing, make):
    make(3)
    assert listing(path="/identities/search").get_json() == listing().get_json()


def test_an_empty_service_lists_nothing(listing):
    assert listing().get_json() == {"page": 1, "limit": 20, "total": 0, "data": [], "next": None}


def test_limit_sizes_the_page_and_total_counts_them_all(listing, make):
    made = make(5)
    body = listing(limit=2).get_json()
    assert (body["limit"], body["total"], len(body["data"])) == (2, 5, 2)
    assert ids(listing(limit=2)) == [made[4]["identity_id"], made[3]["identity_id"]]
    assert body["next"] is not None


def test_limit_default_is_20(listing, make):
    make(21)
    body = listing().get_json()
    assert (body["limit"], len(body["data"]), body["total"]) == (20, 20, 21)


@pytest.mark.parametrize("value", ["0", "101", "-1", "ten", "1.5", ""])
def test_limit_out_of_range_is_400_naming_it(listing, value):
    response = listing(limit=value)
    assert response.status_code == 400
    assert response.mimetype == "application/problem+json"
    assert list(response.get_json()["errors"]) == ["limit"]
    assert "limit" in response.get_json()["detail"]


def test_page_numbers_count_from_one(listing, make):
    made = make(5)
    newest_first = [identity["identity_id"] for identity in reversed(made)]
    assert ids(listing(limit=2, page=1)) == newest_first[0:2]
    assert ids(listing(limit=2, page=2)) == newest_first[2:4]
    third = listing(limit=2, page=3).get_json()
    assert [item["identity_id"] for item in third["data"]] == newest_first[4:]
    assert (third["page"], third["next"]) == (3, None)
    assert listing(limit=2, page=4).get_json()["data"] == []


@pytest.mark.parametrize(("page", "limit"), [("0", "20"), ("501", "20"), ("101", "100"), ("10001", "1"), ("x", "5")])
def test_page_beyond_ten_thousand_items_or_below_one_is_400_naming_page(listing, page, limit):
    response = listing(page=page, limit=limit)
    assert response.status_code == 400
    assert list(response.get_json()["errors"]) == ["page"]


def test_page_at_exactly_ten_thousand_items_is_allowed(listing):
    assert listing(page=100, limit=100).status_code == 200
    assert listing(page=500).status_code == 200


def test_following_next_visits_every_identity_once_in_order(listing, make):
    made = make(7)
    pages = walk(listing, limit=3)
    assert [page["page"] for page in pages] == [1, 2, 3]
    assert [len(page["data"]) for page in pages] == [3, 3, 1]
    visited = [item["identity_id"] for page in pages for item in page["data"]]
    assert visited == [identity["identity_id"] for identity in reversed(made)]
    assert all(page["total"] == 7 for page in pages)


def test_a_cursor_continues_after_creates_without_repeating_or_skipping(listing, make):
    made = make(4)
    first = listing(limit=2).get_json()
    make(3, prefix="Later")
    second = listing(cursor=first["next"]).get_json()
    assert [item["identity_id"] for item in second["data"]] == [made[1]["identity_id"], made[0]["identity_id"]]
    assert second["total"] == 7  # exact now


def test_a_cursor_from_a_page_number_continues_after_that_page(listing, make):
    made = make(5)
    second = listing(limit=2, page=2).get_json()
    third = listing(cursor=second["next"]).get_json()
    assert third["page"] == 3
    assert [item["identity_id"] for item in third["data"]] == [made[0]["identity_id"]]


def test_a_cursor_keeps_its_filters_and_order(listing, make):
    make(3, prefix="Mine")
    make(3, prefix="Theirs", creator=OTHER_WALLET)
    first = listing(creator=OTHER_WALLET, sortBy="display_name", direction="asc", limit=2).get_json()
    second = listing(cursor=first["next"]).get_json()
    names = [item["display_name"] for item in first["data"] + second["data"]]
    assert names == ["Theirs 000", "Theirs 001", "Theirs 002"]
    assert second["next"] is None and second["total"] == 3


def test_a_cursor_takes_a_new_limit(listing, make):
    make(6)
    first = listing(limit=2).get_json()
    second = listing(cursor=first["next"], limit=3).get_json()
    assert (second["limit"], len(second["data"])) == (3, 3)


def test_filters_repeated_with_a_cursor_must_be_its_own(listing, make):
    make(4)
    cursor = listing(limit=2, status="complete").get_json()["next"]
    assert listing(cursor=cursor, status="complete").status_code == 200
    response = listing(cursor=cursor, status="pending")
    assert response.status_code == 400
    assert list(response.get_json()["errors"]) == ["status"]
    assert list(listing(cursor=cursor, sortBy="updated_at").get_json()["errors"]) == ["sortBy"]


def test_cursor_with_page_is_400_naming_page(listing, make):
    make(3)
    cursor = listing(limit=1).get_json()["next"]
    response = listing(cursor=cursor, page=2)
    assert response.status_code == 400
    assert list(response.get_json()["errors"]) == ["page"]


def test_a_tampered_or_forged_cursor_is_400_naming_cursor(listing, make):
    make(3)
    cursor = listing(limit=1).get_json()["next"]
    # A character of the payload changed (the last one of the signature may only carry padding bits).
    changed = cursor[:10] + ("A" if cursor[10] != "A" else "B") + cursor[11:]
    forged = [changed, cursor[::-1], "abc", "." + cursor, cursor + "x", cursor.split(".")[-1]]
    for value in forged:
        response = listing(cursor=value)
        assert response.status_code == 400, value
        assert list(response.get_json()["errors"]) == ["cursor"]


def test_a_cursor_signed_with_another_secret_is_400(app, listing, make, database_url, user_key):
    make(3)
    cursor = listing(limit=1).get_json()["next"]
    with app.app_context():
        db.session.execute(text("UPDATE service_secrets SET value = 'another-secret' WHERE name = 'cursor'"))
        db.session.commit()
    other = make_app(database_url)  # a new process reads the secret anew
    response = other.test_client().get(f"/identities?cursor={cursor}", headers={"x-api-key": user_key})
    assert response.status_code == 400
    assert list(response.get_json()["errors"]) == ["cursor"]
    with other.app_context():
        db.engine.dispose()


@pytest.mark.parametrize(
    ("sort", "values"),
    [
        ("created_at", None),
        ("updated_at", [datetime(2026, 3, 1, tzinfo=UTC), datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 2, 1, tzinfo=UTC)]),
        ("num_positions", [5, 1, 3]),
        ("display_name", None),
    ],
)
def test_every_sort_key_in_both_directions(app, listing, sort, values):
    names = ["Bravo", "alpha", "Charlie"]
    made = [seed.create_identity(app, name, creator=USER_WALLET) for name in names]
    if values is not None:
        for identity, value in zip(made, values, strict=True):
            set_column(app, identity["identity_id"], **{sort: value})
    if sort == "created_at":
        expected = ["Charlie", "alpha", "Bravo"]
    elif sort == "display_name":
        expected = ["alpha", "Charlie", "Bravo"]  # code point order: capitals first
    else:
        expected = ["Bravo", "Charlie", "alpha"]
    descending = [item["display_name"] for item in listing(sortBy=sort).get_json()["data"]]
    ascending = [item["display_name"] for item in listing(sortBy=sort, direction="asc").get_json()["data"]]
    assert descending == expected
    assert ascending == list(reversed(expected))


def test_equal_sort_keys_are_ordered_by_a_tie_breaker_and_paged_without_loss(listing, make):
    made = make(7)  # every num_positions is 0
    pages = walk(listing, sortBy="num_positions", limit=2)
    visited = [item["identity_id"] for page in pages for item in page["data"]]
    assert sorted(visited) == sorted(identity["identity_id"] for identity in made)
    assert len(set(visited)) == 7


@pytest.mark.parametrize(("name", "value"), [("sortBy", "name"), ("sortBy", "id"), ("direction", "up"), ("direction", "DESC")])
def test_unknown_sort_or_direction_is_400_naming_it(listing, name, value):
    response = listing(**{name: value})
    assert response.status_code == 400
    assert list(response.get_json()["errors"]) == [name]


def test_creator_filter_takes_a_wallet_in_any_case(listing, make):
    mine = make(2)
    make(3, prefix="Other", creator=OTHER_WALLET)
    expected = [identity["identity_id"] for identity in reversed(mine)]
    for wallet in (USER_WALLET, USER_WALLET.lower(), "0x" + USER_WALLET[2:].upper()):
        body = listing(creator=wallet).get_json()
        assert ([item["identity_id"] for item in body["data"]], body["total"]) == (expected, 2)


def test_creator_who_created_nothing_lists_nothing(listing, make):
    make(2)
    assert listing(creator=ADMIN_WALLET).get_json()["total"] == 0
    unseen = listing(creator="0x" + "ab" * 20).get_json()
    assert (unseen["total"], unseen["data"], unseen["next"]) == (0, [], None)


@pytest.mark.parametrize("value", ["0x123", "abc", "0x" + "g" * 40, USER_WALLET + "0"])
def test_malformed_creator_is_400_naming_creator(listing, value):
    response = listing(creator=value)
    assert response.status_code == 400
    assert list(response.get_json()["errors"]) == ["creator"]


def test_status_filter_and_totals_follow_status_changes(app, listing, make):
    made = make(4)
    set_column(app, made[0]["identity_id"], status="pending")
    set_column(app, made[1]["identity_id"], status="error")
    assert ids(listing(status="pending")) == [made[0]["identity_id"]]
    assert listing(status="error").get_json()["total"] == 1
    assert listing(status="complete").get_json()["total"] == 2
    assert listing().get_json()["total"] == 4
    set_column(app, made[0]["identity_id"], status="complete")
    assert listing(status="pending").get_json()["total"] == 0
    assert listing(status="complete", creator=USER_WALLET).get_json()["total"] == 3


def test_removed_identities_are_left_out_unless_an_admin_asks_for_them(app, listing, make, admin_key):
    made = make(3)
    set_column(app, made[1]["identity_id"], status="removed")
    for key in (None, admin_key):
        body = listing(key=key).get_json()
        assert made[1]["identity_id"] not in [item["identity_id"] for item in body["data"]]
        assert body["total"] == 2
    assert listing(creator=USER_WALLET).get_json()["total"] == 2
    removed = listing(key=admin_key, status="removed").get_json()
    assert ([item["identity_id"] for item in removed["data"]], removed["total"]) == ([made[1]["identity_id"]], 1)


def test_a_user_key_asking_for_removed_identities_is_403(listing, make):
    make(1)
    response = listing(status="removed")
    assert response.status_code == 403
    assert response.mimetype == "application/problem+json"


def test_a_user_key_cannot_follow_an_admins_cursor_into_removed_identities(app, listing, make, admin_key):
    made = make(3)
    for identity in made:
        set_column(app, identity["identity_id"], status="removed")
    cursor = listing(key=admin_key, status="removed", limit=1).get_json()["next"]
    assert listing(cursor=cursor).status_code == 403
    assert listing(key=admin_key, cursor=cursor).status_code == 200


@pytest.mark.parametrize("value", ["deleted", "Complete", ""])
def test_unknown_status_is_400_naming_status(listing, value):
    response = listing(status=value)
    assert response.status_code == 400
    assert list(response.get_json()["errors"]) == ["status"]


def test_totals_follow_deletes(app, listing, make):
    made = make(3)
    with app.app_context():
        db.session.execute(Identity.__table__.delete().where(Identity.identity_id == made[0]["identity_id"]))
        db.session.commit()
    assert listing().get_json()["total"] == 2
    assert listing(creator=USER_WALLET).get_json()["total"] == 2


@pytest.mark.parametrize("name", ["offset", "sort", "Limit", "display_name", "per_page"])
def test_unknown_parameter_is_400_naming_it(listing, name):
    response = listing(**{name: "1"})
    assert response.status_code == 400
    assert response.get_json()["errors"] == {name: ["Unknown field."]}
    assert name in response.get_json()["detail"]


def test_a_key_is_required(client, make):
    make(1)
    for headers in ({}, {"x-api-key": "idk_unknown"}):
        response = client.get("/identities", headers=headers)
        assert response.status_code == 401
        assert response.headers["WWW-Authenticate"] == 'ApiKey header="x-api-key"'


@pytest.mark.parametrize("app_config", [{"IDENTITY_RATELIMIT_READ": "2/minute"}])
def test_listing_spends_the_read_budget(client, listing, user_key):
    assert listing().status_code == 200
    assert client.get("/identity/did:identity:ipfs:x", headers={"x-api-key": user_key}).status_code == 404
    response = listing()
    assert response.status_code == 429
    assert "Retry-After" in response.headers


def _row(number, creator_id):
    """An identity row as a create at revision 0001 wrote it, addressed by the service's own code."""
    address = content.address({"display_name": f"Élodie Früh {number}", "description": "Before"})
    return {
        **OFF_CHAIN, "id": new_id(), "identity_id": address.identity_id, "content_id": address.content_id,
        "identity_hash": address.identity_hash, "display_name": f"Élodie Früh {number}", "description": "Before",
        "creator_id": creator_id, "created_at": utcnow(), "updated_at": utcnow(),
    }


def test_migration_backfills_counts_and_indexes_of_identities_made_before_it(empty_database_url):
    app = make_app(empty_database_url)
    with app.app_context():
        upgrade(revision="0001")
        now = utcnow()
        user = {"id": "u1", "wallet": USER_WALLET, "role": "User", "created_at": now, "updated_at": now}
        db.session.execute(insert(table_of('users', user)), [user])
        rows = [_row(n, "u1") for n in range(3)]
        db.session.execute(insert(table_of('identities', rows[0])), rows)
        db.session.commit()
        upgrade()
        db.engine.dispose()
    key = seed.issue_key(app, USER_WALLET)
    client = app.test_client()

    def get(query):
        return client.get(f"/identities?{query}", headers={"x-api-key": key}).get_json()

    assert get("")["total"] == 3
    assert get(f"creator={USER_WALLET}")["total"] == 3
    assert get("q=elodie+fru")["total"] == 3
    assert get("displayName=LODIE")["total"] == 3
    assert {item["identity_id"] for item in get("q=before")["data"]} == {row["identity_id"] for row in rows}
    with app.app_context():
        db.engine.dispose()


def test_an_admins_patch_of_status_moves_the_identity_between_listings(client, listing, make, admin_key):
    made = make(3)
    for identity, status in ((made[0], "removed"), (made[1], "pending")):
        response = client.patch(
            f"/identity/{identity['identity_id']}", json={"status": status}, headers={"x-api-key": admin_key}
        )
        assert response.status_code == 200, response.get_json()
    assert ids(listing()) == [made[2]["identity_id"], made[1]["identity_id"]]
    assert listing().get_json()["total"] == 2
    assert ids(listing(status="pending")) == [made[1]["identity_id"]]
    removed = listing(key=admin_key, status="removed").get_json()
    assert (removed["total"], [item["identity_id"] for item in removed["data"]]) == (1, [made[0]["identity_id"]])
    assert listing(creator=USER_WALLET, status="complete").get_json()["total"] == 1


def table_of(name, row):
    """The table `name` with only `row`'s columns: a row written as an early migration left the table, whatever the
    models have added since."""
    return table(name, *(column(key) for key in row))
