"""What a hostile upstream cannot do to its mirror (the contract's "Mirroring another instance"): against a
real HTTP server on 127.0.0.1 (tests.common.hostile_upstream) that sends an event that never ends, a page far
larger than asked for, entries that cannot be stored and entries out of order, the follower reads a
bounded amount, logs a bounded number of lines, rejects and counts what it cannot store and goes on,
and shows a failure that repeats on the mirror's row."""

import logging
import time
from contextlib import contextmanager

import pytest
from sqlalchemy import text

from identity.data import follower, mirror_batches, mirrors
from identity.data.upstream import MAX_EVENT_BYTES, PAGE, Upstream, UpstreamError
from identity.storage.database import db
from tests.common.hostile_upstream import HostileUpstream
from tests.common.mirroring import doc, entry, state, stored, tampered, wait_for

KEY = "idsk_what-the-hostile-upstream-is-sent"
POISON_AT = "0001-01-01T00:00:00+14:00"  # RFC 3339, but before year 1 once in UTC
MB = 1024 * 1024


def register(app, upstream):
    with app.app_context():
        return mirrors.register(upstream.url, KEY).id


# --- memory: what one answer may make the mirror read ----------------------------------------------

def test_an_event_that_never_ends_is_an_error_once_past_the_bound_and_no_more_of_it_is_read():
    with HostileUpstream(endless_event=True, cap=64 * MB) as upstream:
        with pytest.raises(UpstreamError, match=f"an event of over {MAX_EVENT_BYTES} bytes"):
            for _ in Upstream(upstream.url, KEY).events(0):
                pass
    # What the mirror read is the bound and a read; the socket's buffers add a few MB at most.
    assert upstream.sent < 12 * MB


def test_a_page_with_more_entries_than_asked_for_is_an_error_at_the_first_one_too_many():
    with HostileUpstream(oversized_page=True, streams=False, page_entries=1_000_000) as upstream:  # ~120 MB
        reads = Upstream(upstream.url, KEY).longpoll(0)
        taken = []
        with pytest.raises(UpstreamError, match=f"more entries than the {PAGE} asked for"):
            for entries, _ in reads:
                taken.extend(entries)
    assert len(taken) <= PAGE
    assert upstream.sent < 16 * MB


def test_a_short_page_with_one_entry_too_many_is_refused_too():
    with HostileUpstream(oversized_page=True, streams=False, page_entries=2000) as upstream:
        with pytest.raises(UpstreamError, match="more entries than"):
            list(Upstream(upstream.url, KEY).longpoll(0))


def test_an_entry_of_a_page_larger_than_an_event_may_be_is_an_error():
    with HostileUpstream(oversized_page=True, streams=False, page_entries=1000, entry_bytes=2 * MB) as upstream:
        with pytest.raises(UpstreamError, match=f"an entry of over {MAX_EVENT_BYTES} bytes"):
            list(Upstream(upstream.url, KEY).longpoll(0))
    assert upstream.sent < 12 * MB


def test_a_follower_fed_an_endless_event_says_so_on_the_mirrors_row_and_reads_a_bounded_amount(app, following):
    with HostileUpstream(endless_event=True, cap=96 * MB) as upstream:
        mirror_id = register(app, upstream)
        following()
        found = wait_for(app, mirror_id, lambda s: s["last_error"] is not None)
        time.sleep(1.5)  # a retry or two, each ending at the bound
        follower.stop(app)
        assert f"an event of over {MAX_EVENT_BYTES} bytes" in found["last_error"] and found["failing"]
        assert found["active"] and found["position"] == 0
        assert upstream.sent < 12 * MB * len(upstream.requests)
        assert upstream.sent < 64 * MB


def test_a_follower_given_an_oversized_page_says_so_on_the_mirrors_row_and_logs_a_line_per_try(app, following, caplog):
    caplog.set_level(logging.INFO, "identity.data")
    with HostileUpstream(oversized_page=True, streams=False, page_entries=1_000_000) as upstream:  # ~120 MB a page
        mirror_id = register(app, upstream)
        following()
        found = wait_for(app, mirror_id, lambda s: s["last_error"] is not None and "more entries" in s["last_error"])
        time.sleep(1.5)  # a retry or two
        follower.stop(app)
    assert found["failing"] and found["active"] and (found["position"], found["applied"]) == (0, 0)
    # Nothing of the refused page is applied; the log has a line per try of the upstream, not one per entry.
    lines = [record for record in caplog.records if record.name.startswith("identity.data")]
    assert 0 < len(lines) <= 2 * len(upstream.requests) <= 20
    assert upstream.sent < 16 * MB * len(upstream.requests)


# --- logs and poison: what a batch rejects, and how it says so -------------------------------------

@pytest.fixture
def mirror_id(app):
    with app.app_context():
        return mirrors.register("http://127.0.0.1:9/", "idsk_upstream-key").id


def apply(app, mirror_id, entries, position=0):
    with app.app_context():
        return mirror_batches.apply(mirror_id, "m", entries, position, max(e["seq"] for e in entries))


def test_a_batch_of_rejected_entries_is_one_log_line_with_its_count_and_first_reasons(app, mirror_id, caplog):
    caplog.set_level(logging.DEBUG, "identity.data.mirror_batches")
    done = apply(app, mirror_id, [entry(n, tampered(n)) for n in range(1, 51)] + [entry(51, doc(51))])
    assert (done.position, done.applied, done.rejected) == (51, 1, 50)
    [line] = caplog.records
    assert line.levelname == "WARNING" and line.rejected == 50
    assert [reason["seq"] for reason in line.reasons] == [1, 2, 3, 4, 5]
    assert "50 upstream entries rejected" in line.getMessage() and "(and 45 more)" in line.getMessage()


@pytest.mark.parametrize("poison", [
    {"at": POISON_AT},
    {"at": "9999-12-31T23:59:59-14:00"},
    {"doc": doc(2, created_at=POISON_AT)},
    {"doc": doc(2, updated_at="9999-12-31T23:00:00-10:00")},
], ids=["at-before-year-1", "at-after-year-9999", "created-at-before-year-1", "updated-at-after-year-9999"])
def test_an_entry_out_of_range_is_rejected_and_the_batch_goes_on(app, mirror_id, poison):
    done = apply(app, mirror_id, [entry(1, doc(1)), {**entry(2, doc(2)), **poison}, entry(3, doc(3))])
    assert (done.position, done.applied, done.rejected) == (3, 2, 1)
    assert stored(app) == {doc(1)["identity_id"], doc(3)["identity_id"]}
    assert state(app, mirror_id)["rejected"] == 1


def test_entries_out_of_order_are_rejected_and_counted(app, mirror_id):
    done = apply(app, mirror_id, [entry(1, doc(1)), entry(4, doc(4)), entry(2, doc(2)), entry(4, doc(5)),
                                  entry(6, doc(6))])
    assert (done.position, done.applied, done.rejected) == (6, 3, 2)
    assert stored(app) == {doc(n)["identity_id"] for n in (1, 4, 6)}


@contextmanager
def refusing(app, table, condition_sqlite, condition_postgres, name="refuse_in_test"):
    """A trigger that makes the database refuse a row of `table`, as a constraint would; dropped at the end."""
    with app.app_context():
        if db.engine.dialect.name == "sqlite":
            statements = [f"CREATE TRIGGER {name} BEFORE {condition_sqlite} BEGIN SELECT RAISE(ABORT, 'refused "
                          "by the test'); END"]
            drop = [f"DROP TRIGGER {name}"]
        else:
            statements = [
                f"CREATE FUNCTION {name}() RETURNS trigger AS $$ BEGIN IF {condition_postgres} THEN RAISE EXCEPTION "
                f"'refused by the test' USING ERRCODE = '22023'; END IF; RETURN NEW; END $$ LANGUAGE plpgsql",
                f"CREATE TRIGGER {name} BEFORE INSERT OR UPDATE ON {table} FOR EACH ROW EXECUTE FUNCTION {name}()",
            ]
            drop = [f"DROP TRIGGER {name} ON {table}", f"DROP FUNCTION {name}()"]
        with db.engine.begin() as connection:
            for statement in statements:
                connection.execute(text(statement))
    try:
        yield
    finally:
        with app.app_context(), db.engine.begin() as connection:
            for statement in drop:
                connection.execute(text(statement))


def test_an_entry_the_database_refuses_is_found_rejected_and_the_others_stored(app, mirror_id):
    name = doc(5)["display_name"]
    with refusing(app, "identities", f"INSERT ON identities WHEN NEW.display_name = '{name}'",
                  f"NEW.display_name = '{name}'"):
        done = apply(app, mirror_id, [entry(n, doc(n)) for n in range(1, 9)])
    assert (done.position, done.applied, done.rejected) == (8, 7, 1)
    assert stored(app) == {doc(n)["identity_id"] for n in range(1, 9) if n != 5}
    found = state(app, mirror_id)
    assert (found["position"], found["applied"], found["rejected"]) == (8, 7, 1)


def test_a_follower_rejects_poison_and_entries_out_of_order_and_goes_on_with_later_ones(app, following, caplog):
    caplog.set_level(logging.INFO, "identity.data")
    served = [entry(1, doc(1)), {**entry(2, doc(2)), "at": POISON_AT}, entry(3, doc(3)),
              entry(4, doc(4, created_at=POISON_AT)), entry(6, doc(6)), entry(5, doc(5)), entry(7, doc(7))]
    with HostileUpstream(served) as upstream:
        mirror_id = register(app, upstream)
        following()
        found = wait_for(app, mirror_id, lambda s: s["position"] == 7)
    assert (found["applied"], found["rejected"], found["lag_entries"]) == (4, 3, 0)
    assert stored(app) == {doc(n)["identity_id"] for n in (1, 3, 6, 7)}
    assert not found["failing"]
    rejected = [record for record in caplog.records if record.name == "identity.data.mirror_batches"]
    assert sum(record.rejected for record in rejected) == 3 and len(rejected) <= 3


def test_a_failure_that_repeats_at_one_position_is_on_the_mirrors_row_and_the_mirror_recovers(app, following):
    with HostileUpstream([entry(1, doc(1)), entry(2, doc(2))]) as upstream:
        mirror_id = register(app, upstream)
        # The database refuses to move this mirror's position, whatever the entry: not one entry's doing.
        with refusing(app, "mirrors", "UPDATE OF position ON mirrors WHEN NEW.position > 0",
                      "NEW.position > 0"):
            following()
            stuck = wait_for(app, mirror_id, lambda s: s["last_error"] is not None)
            assert "after position 0 failed" in stuck["last_error"] and stuck["failing"]
            assert (stuck["position"], stuck["rejected"]) == (0, 0)
        recovered = wait_for(app, mirror_id, lambda s: s["position"] == 2, timeout=10)
    assert recovered["applied"] == 2 and recovered["rejected"] == 0
    assert recovered["last_error"] == stuck["last_error"] and not recovered["failing"]


# --- back-off: doubled as webhooks', cut short by a change of the mirror -----------------------------

def test_the_wait_after_each_failure_doubles_up_to_the_longest():
    for attempt in range(1, 9):
        ceiling = min(60.0, 2.0 ** (attempt - 1))
        waits = [follower.retry_wait(attempt, 60.0) for _ in range(40)]
        assert all(max(1.0, ceiling / 2) <= wait <= ceiling for wait in waits), (attempt, waits)


@pytest.mark.parametrize("change", [{"key": "idsk_a-new-key"}, {"active": True}], ids=["new-key", "resumed"])
def test_a_changed_mirror_is_tried_again_at_once_and_its_error_shown_as_past(app, following, change):
    with HostileUpstream([entry(1, doc(1))]) as upstream:
        upstream.status, upstream.retry_after = 503, 300
        mirror_id = register(app, upstream)
        following()
        failed = wait_for(app, mirror_id, lambda s: s["last_error"] is not None)
        assert "503" in failed["last_error"]
        upstream.status = None
        time.sleep(1.5)  # the follower waits out the upstream's 300 s, unless woken
        asked = len(upstream.requests)
        with app.app_context():
            mirrors.update(mirror_id, change)
        done = wait_for(app, mirror_id, lambda s: s["position"] == 1, timeout=10)
        later = upstream.requests[asked:]
    assert done["applied"] == 1 and later and later[0]["key"] == change.get("key", KEY)
    # Its last error is kept, shown as past; while it was waiting, as present.
    assert done["last_error"] == failed["last_error"] and (failed["failing"], done["failing"]) == (True, False)
