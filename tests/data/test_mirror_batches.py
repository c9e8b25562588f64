"""A mirror's batches (identity.data.mirror_batches), applied to a real database: what verifies is stored as
the upstream has it, with the position, in one transaction; what does not is counted and nothing of it
is stored; changes reach only the identities that came from that upstream."""

import logging

import pytest

from identity.core import content
from identity.data import exports, mirror_batches, mirrors
from identity.storage.database import db
from identity.storage.models import Change, Identity, Mirror
from tests.common.mirroring import (
    CREATOR,
    doc,
    entry,
    forged,
    redacted,
    sign,
    tampered,
    wrong_id,
)


@pytest.fixture
def mirror(app):
    with app.app_context():
        registered = mirrors.register("http://127.0.0.1:9/", "idsk_upstream-key")
    return registered


def apply(app, mirror, entries, position=0, head=None):
    with app.app_context():
        return mirror_batches.apply(mirror.id, mirror.name, entries, position,
                                    head if head is not None else max([e["seq"] for e in entries], default=position))


def state(app, mirror):
    with app.app_context():
        row = db.session.get(Mirror, mirror.id)
        db.session.commit()
        return row


def identities(app):
    with app.app_context():
        found = {i.identity_id: i for i in db.session.query(Identity).all()}
        db.session.commit()
        return found


def exported(app):
    import io

    with app.app_context():
        stream = io.BytesIO()
        exports.export_identities(stream)
    return stream.getvalue()


def test_created_entries_are_stored_as_the_upstream_has_them(app, mirror):
    docs = [doc(1), doc(2, status="removed", vault_id="7", num_positions=3, assets_sum=str(2**255),
                       updated_at="2026-11-22T10:00:00.000001Z")]
    done = apply(app, mirror, [entry(1, docs[0]), entry(2, docs[1])])
    assert (done.position, done.applied, done.already_present, done.rejected) == (2, 2, 0, 0)
    stored = identities(app)
    second = stored[docs[1]["identity_id"]]
    assert second.id == docs[1]["id"] and second.status == "removed" and second.vault_id == 7
    assert second.num_positions == 3 and second.assets_sum == 2**255
    assert second.creator.wallet == CREATOR
    lines = exported(app).splitlines()
    assert [line for line in lines if docs[1]["identity_id"].encode() in line][0].count(b"2026-11-22T10:00:00.000001Z") == 1
    row = state(app, mirror)
    assert (row.position, row.upstream_head, row.applied) == (2, 2, 2)
    # Each stored identity has a created entry in this instance's own feed, for a mirror of this mirror.
    with app.app_context():
        kinds = [(c.identity_id, c.kind, c.wallet) for c in db.session.query(Change).order_by(Change.seq)]
        db.session.commit()
    assert kinds == [(d["identity_id"], "created", mirror_batches.MIRROR_WALLET) for d in docs]


@pytest.mark.parametrize("lie", [tampered, wrong_id, forged], ids=["tampered-content", "wrong-id", "forged-signature"])
def test_what_does_not_verify_is_counted_logged_and_not_stored(app, mirror, lie, caplog):
    caplog.set_level(logging.WARNING, "identity.data.mirror_batches")
    done = apply(app, mirror, [entry(1, doc(1)), entry(2, lie(2)), entry(3, doc(3))])
    assert (done.position, done.applied, done.rejected) == (3, 2, 1)
    assert set(identities(app)) == {doc(1)["identity_id"], doc(3)["identity_id"]}
    assert state(app, mirror).rejected == 1
    [line] = [record for record in caplog.records if "rejected" in record.getMessage()]
    assert line.rejected == 1 and [reason["seq"] for reason in line.reasons] == [2]
    assert "1 upstream entries rejected: entry 2: " in line.getMessage()


def test_a_signed_identity_whose_signature_is_its_creators_is_stored(app, mirror):
    made = doc(1)
    signed = {**made, "creator_signature": sign(content.address(made).content_id)}
    assert apply(app, mirror, [entry(1, signed)]).applied == 1


@pytest.mark.parametrize("broken", [
    {"doc": "not an object"},
    {"doc": None, "wallet": "0x0", "fields": None},
    {"kind": "deleted"},
    {"at": "yesterday"},
    {"doc": {**doc(1), "status": "gone"}},
    {"doc": {**doc(1), "creator": "0x0000000000000000000000000000000000000001"}},
    {"doc": {**doc(1), "creator_signature": 42}},
    {"identity_id": doc(5)["identity_id"]},
], ids=["doc-not-object", "no-doc", "unknown-kind", "bad-at", "bad-status", "creator-not-user", "signature-not-text",
        "doc-of-another-entry"])
def test_an_entry_not_in_the_contracts_shape_is_rejected(app, mirror, broken):
    done = apply(app, mirror, [{**entry(1, doc(1)), **broken}])
    assert (done.position, done.applied, done.rejected) == (1, 0, 1)
    assert identities(app) == {}


def test_content_already_here_is_counted_and_left_as_it_is(app, mirror, create):
    assert create({"display_name": "Upstream identity 1", "description": "Number 1."}).status_code == 201
    local = identities(app)[doc(1)["identity_id"]]
    done = apply(app, mirror, [entry(1, doc(1, status="error")), entry(2, doc(2)), entry(3, doc(2))])
    assert (done.applied, done.already_present, done.rejected) == (1, 2, 0)
    kept = identities(app)[doc(1)["identity_id"]]
    assert (kept.id, kept.status) == (local.id, "complete")
    # A change upstream does not reach it: it did not come from this mirror.
    apply(app, mirror, [entry(4, doc(1, status="removed"), kind="changed")], position=3)
    assert identities(app)[doc(1)["identity_id"]].status == "complete"


def test_changes_apply_status_and_figures_to_identities_from_this_mirror(app, mirror):
    apply(app, mirror, [entry(1, doc(1)), entry(2, doc(2))])
    changed = doc(1, status="removed", vault_id="42", conviction_price="5", updated_at="2026-11-23T00:00:00.000000Z")
    done = apply(app, mirror, [entry(3, changed, kind="changed", fields={"status": {"before": "complete", "after": "removed"}}),
                               redacted(4, doc(2)["identity_id"])], position=2)
    assert (done.position, done.applied, done.rejected) == (4, 2, 0)
    stored = identities(app)
    assert (stored[changed["identity_id"]].status, stored[changed["identity_id"]].vault_id) == ("removed", 42)
    assert stored[changed["identity_id"]].updated_at.isoformat().startswith("2026-11-23T00:00:00")
    assert stored[doc(2)["identity_id"]].status == "removed"  # redacted to a User key: taken down upstream
    with app.app_context():
        recorded = [c.fields for c in db.session.query(Change).filter(Change.kind == "changed").order_by(Change.seq)]
        db.session.commit()
    assert recorded[0] == {"status": {"before": "complete", "after": "removed"}, "vault_id": {"before": "0", "after": "42"},
                           "conviction_price": {"before": "0", "after": "5"}}


def test_a_redacted_create_is_not_copied_and_not_rejected(app, mirror):
    done = apply(app, mirror, [redacted(1, doc(1)["identity_id"], kind="created")])
    assert (done.position, done.applied, done.rejected) == (1, 0, 0)
    assert identities(app) == {}


def test_a_batch_for_a_stale_position_writes_nothing(app, mirror):
    apply(app, mirror, [entry(1, doc(1))])
    assert apply(app, mirror, [entry(2, doc(2))], position=0) is None  # another follower moved it to 1
    assert set(identities(app)) == {doc(1)["identity_id"]}
    assert state(app, mirror).position == 1


def test_a_paused_mirror_applies_nothing(app, mirror):
    with app.app_context():
        mirrors.update(mirror.id, {"active": False})
    assert apply(app, mirror, [entry(1, doc(1))]) is None
    assert identities(app) == {}


def test_entries_given_again_are_rejected_as_out_of_order_and_skipped(app, mirror):
    apply(app, mirror, [entry(1, doc(1)), entry(2, doc(2))])
    done = apply(app, mirror, [entry(1, doc(1)), entry(2, doc(2)), entry(3, doc(3))], position=2)
    assert (done.position, done.applied, done.already_present, done.rejected) == (3, 1, 0, 2)
