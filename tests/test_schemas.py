"""The fast response shape (identity_json) is exactly what marshmallow's generic dump of IdentitySchema gives."""

from datetime import UTC, datetime, timedelta, timezone

import pytest
from marshmallow import Schema

from identity.models import MAX_UINT256
from identity.schemas import IdentitySchema, identity_schema
from identity.service import IdentityRecord, UserRecord

WHEN = datetime(2026, 11, 21, 9, 30, 0, 123456, tzinfo=UTC)


def record(**changes):
    user = UserRecord(id="u-1", wallet="0x" + "ab" * 20, role="User", created_at=WHEN, updated_at=WHEN, last_login=None)
    fields = dict(
        id="i-1", identity_id="did:identity:ipfs:bafkrei", content_id="bafkrei", identity_hash="0x00", vault_id=0,
        display_name="Name", description=None, image=None, external_reference=None, corpora_id=None, semantic=None,
        creator_id="u-1", created_at=WHEN, updated_at=WHEN, num_positions=0, assets_sum=0, conviction_sum=0,
        conviction_price=0, status="complete", is_user=False, user_conviction=0, user_conviction_value=0, creator=user,
    )
    fields.update(changes)
    return IdentityRecord(**fields)


def generic_dump(obj, many=False):
    return Schema.dump(IdentitySchema(many=many), obj)


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"description": "d", "image": "https://example.org/i.png", "external_reference": "https://example.org"},
        {"vault_id": MAX_UINT256, "assets_sum": MAX_UINT256 - 1, "conviction_price": 10**40, "num_positions": 7},
        {"is_user": True, "status": "pending", "corpora_id": "c", "semantic": "s"},
        {"created_at": WHEN.astimezone(timezone(timedelta(hours=5, minutes=30)))},
        {"updated_at": WHEN.replace(microsecond=0)},
    ],
)
def test_fast_dump_equals_the_generic_dump(changes):
    obj = record(**changes)
    assert identity_schema.dump(obj) == generic_dump(obj)
    assert list(identity_schema.dump(obj)) == list(generic_dump(obj))  # the same key order too


def test_fast_dump_of_a_creator_with_a_last_login():
    obj = record()
    obj.creator.last_login = WHEN + timedelta(seconds=5)
    assert identity_schema.dump(obj)["creator"] == generic_dump(obj)["creator"]
    assert identity_schema.dump(obj)["creator"]["last_login"] == "2026-11-21T09:30:05.123456Z"


def test_fast_dump_of_many():
    objs = [record(), record(id="i-2", display_name="Other")]
    assert IdentitySchema(many=True).dump(objs) == generic_dump(objs, many=True)


@pytest.mark.parametrize("value", [
    datetime(2026, 11, 21, 9, 30, 0, 123456, tzinfo=UTC),
    datetime(2026, 11, 21, 9, 30, 0, 0, tzinfo=UTC),
    datetime(2026, 11, 21, 9, 30, 0, 7),
    datetime(2026, 11, 21, 9, 30),
    datetime(2026, 11, 21, 11, 30, 0, 5, tzinfo=timezone(timedelta(hours=2))),
    datetime(1999, 12, 31, 23, 59, 59, 999999, tzinfo=timezone(timedelta(hours=-5))),
])
def test_timestamps_are_utc_with_six_digits_of_microseconds_and_a_z(value):
    from identity.schemas import _timestamp

    utc = value if value.tzinfo is None else value.astimezone(UTC)
    assert _timestamp(value) == utc.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
