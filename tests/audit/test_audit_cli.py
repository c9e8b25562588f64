"""The audit log on the command line, on SQLite and on PostgreSQL: the commands' own entries (via cli), `audit
list` and `export`, `audit verify` naming the first entry changed, removed or inserted in the database, and
retention that keeps the chain verifiable."""

import json
import time
from datetime import timedelta

import pytest
from sqlalchemy import delete, insert, select, update

from identity.core import audit, audit_retention, keys
from identity.storage.audit import AuditChain, AuditEntry
from identity.storage.database import db
from identity.storage.models import utcnow
from tests.common.apps import ADMIN_WALLET, USER_WALLET
from tests.common.audit import assert_no_secret, entries, only, verified

ENTRIES = AuditEntry.__table__


def invoke(runner, *args):
    result = runner.invoke(args=list(args))
    assert result.exit_code == 0, result.output
    return result


def test_keys_commands_leave_entries_via_cli_with_the_command_and_one_id_per_run(app, runner):
    key = invoke(runner, "keys", "create", "--wallet", USER_WALLET, "--label", "ci").stdout.strip().splitlines()[-1]
    key_id = only(app, "key.issue")["target"]["id"]
    rotated = invoke(runner, "keys", "rotate", key_id).stdout.strip().splitlines()[-1]
    invoke(runner, "keys", "revoke", "--wallet", USER_WALLET)
    issue, rotate, revoke = only(app, "key.issue"), only(app, "key.rotate"), only(app, "key.revoke")
    assert issue["actor"] == {"user_id": None, "wallet": None, "role": None, "key_id": None, "key_hint": None,
                              "via": "cli"}
    assert issue["user_agent"] == "flask keys create" and rotate["user_agent"] == "flask keys rotate"
    assert issue["after"]["label"] == "ci" and issue["after"]["created_by"] == "cli"
    assert rotate["target"]["id"] == key_id and revoke["target"]["id"] == rotate["after"]["replaced_by"]
    assert len({issue["request_id"], rotate["request_id"], revoke["request_id"]}) == 3
    assert_no_secret(app, key, rotated)


def test_identities_set_status_by_a_wallet_names_it_as_the_actor(app, runner, create):
    identity_id = create({"display_name": "Ada"}).get_json()["identity_id"]
    invoke(runner, "identities", "set-status", identity_id, "removed", "--by", ADMIN_WALLET.lower())
    entry = only(app, "identity.take_down")
    assert entry["actor"]["wallet"] == ADMIN_WALLET and entry["actor"]["via"] == "cli"
    assert (entry["before"], entry["after"]) == ({"status": "complete"}, {"status": "removed"})


def test_identities_import_leaves_one_entry_with_its_counts(app, runner, create, tmp_path):
    create({"display_name": "Ada"})
    exported = tmp_path / "identities.jsonl"
    invoke(runner, "identities", "export", str(exported))
    invoke(runner, "identities", "import", str(exported))
    entry = only(app, "identities.import")
    assert entry["after"] == {"imported": 0, "skipped": 1, "refused": 0} and entry["actor"]["via"] == "cli"


def test_audit_list_shows_the_newest_entries_and_takes_the_filters(app, runner, issue_key):
    issue_key(USER_WALLET)
    issue_key(ADMIN_WALLET, "Admin")
    lines = invoke(runner, "audit", "list").stdout.strip().splitlines()
    assert len(lines) == 2 and "key.issue" in lines[0]
    assert int(lines[0].split()[0]) > int(lines[1].split()[0])
    assert invoke(runner, "audit", "list", "--action", "key.revoke").stdout == ""
    refused = runner.invoke(args=["audit", "list", "--actor", "0x12"])
    assert refused.exit_code != 0 and "--actor" in refused.output


def test_audit_export_writes_json_lines_oldest_first_with_their_hashes(app, runner, issue_key):
    for wallet in (USER_WALLET, ADMIN_WALLET):
        issue_key(wallet)
    lines = [json.loads(line) for line in invoke(runner, "audit", "export").stdout.splitlines()]
    assert [line["seq"] for line in lines] == [1, 2]
    assert lines[1]["prev_hash"] == lines[0]["hash"] and lines[0]["prev_hash"] == audit.GENESIS
    assert [line["after"]["wallet"] for line in lines] == [USER_WALLET, ADMIN_WALLET]


# --- verify -------------------------------------------------------------------------------------------

@pytest.fixture
def chain(app, issue_key):
    """Five entries (keys issued), the chain verified."""
    for number in range(5):
        issue_key(f"0x{number + 1:040x}")
    assert verified(app).finding is None
    return app


def edit(app, *statements):
    with app.app_context():
        for statement in statements:
            db.session.execute(statement)
        db.session.commit()
        db.session.remove()


def verify_fails(runner, *args):
    result = runner.invoke(args=["audit", "verify", *args])
    assert result.exit_code == 1, result.output
    return result.output


def test_audit_verify_says_the_chain_holds(chain, runner):
    output = invoke(runner, "audit", "verify").stdout
    assert "verifies: 5 entries" in output and "seq 5" in output


def test_audit_verify_names_an_entry_changed_in_the_database(chain, runner):
    edit(chain, update(ENTRIES).where(ENTRIES.c.seq == 3).values(actor_wallet=USER_WALLET))
    assert "entry 3 changed" in verify_fails(runner)


def test_audit_verify_names_an_entry_changed_with_its_hash_made_again(chain, runner):
    with chain.app_context():
        row = dict(db.session.execute(select(ENTRIES).where(ENTRIES.c.seq == 2)).mappings().one())
        db.session.remove()
    row["detail"] = "nothing happened here"
    edit(chain, update(ENTRIES).where(ENTRIES.c.seq == 2).values(detail=row["detail"], hash=audit.entry_hash(row)))
    assert "entry 2 changed" in verify_fails(runner)


def test_audit_verify_names_an_entry_removed(chain, runner):
    edit(chain, delete(ENTRIES).where(ENTRIES.c.seq == 3))
    assert "entry 3 removed" in verify_fails(runner)


def test_audit_verify_names_the_last_entry_removed(chain, runner):
    edit(chain, delete(ENTRIES).where(ENTRIES.c.seq == 5))
    assert "entry 5 removed" in verify_fails(runner)


def test_audit_verify_names_an_entry_removed_and_the_later_ones_renumbered(chain, runner):
    edit(chain, delete(ENTRIES).where(ENTRIES.c.seq == 2))
    for seq in (3, 4, 5):
        edit(chain, update(ENTRIES).where(ENTRIES.c.seq == seq).values(seq=seq - 1))
    assert "entry 2 removed" in verify_fails(runner)


def forged(app, seq, prev_hash):
    """An entry as an intruder would write it, its own hash right, numbered `seq`, after `prev_hash`."""
    row = {"seq": seq, "at": utcnow(), "actor_user_id": None, "actor_wallet": ADMIN_WALLET, "actor_role": "Admin",
           "actor_key_id": None, "actor_key_hint": None, "via": "api", "action": "key.issue", "target_kind": "key",
           "target_id": "forged", "outcome": "ok", "detail": None, "request_id": None, "client_address": None,
           "user_agent": None, "before": None, "after": None, "prev_hash": prev_hash}
    return {**row, "hash": audit.entry_hash(row)}


def test_audit_verify_names_an_entry_inserted_after_the_head(chain, runner):
    head = verified(chain)
    edit(chain, insert(ENTRIES).values(**forged(chain, 6, head.head_hash)))
    assert "entry 6 inserted" in verify_fails(runner)


def test_audit_verify_names_an_entry_inserted_between_two_and_the_later_ones_renumbered(chain, runner):
    with chain.app_context():
        second = db.session.execute(select(ENTRIES.c.hash).where(ENTRIES.c.seq == 2)).scalar_one()
        db.session.remove()
    for seq in (5, 4, 3):
        edit(chain, update(ENTRIES).where(ENTRIES.c.seq == seq).values(seq=seq + 1))
    edit(chain, insert(ENTRIES).values(**forged(chain, 3, second)))
    assert "entry 3 inserted" in verify_fails(runner)


def test_audit_verify_names_the_change_of_a_log_rewritten_from_a_head_kept_elsewhere(chain, runner, app):
    kept = verified(app)
    # Every entry from 4 on rewritten, hashes and head made again: only the head kept elsewhere shows it.
    with app.app_context():
        rows = [dict(row) for row in db.session.execute(select(ENTRIES).order_by(ENTRIES.c.seq)).mappings()]
        db.session.remove()
    prev = rows[2]["hash"]
    for row in rows[3:]:
        row.update(detail="rewritten", prev_hash=prev)
        row["hash"] = prev = audit.entry_hash(row)
        edit(app, update(ENTRIES).where(ENTRIES.c.seq == row["seq"]).values(
            detail="rewritten", prev_hash=row["prev_hash"], hash=row["hash"]))
    edit(app, update(AuditChain.__table__).values(head_hash=prev))
    invoke(runner, "audit", "verify")  # consistent in itself
    assert "entry 5 changed" in verify_fails(runner, "--expect", f"{kept.head_seq}:{kept.head_hash}")
    refused = runner.invoke(args=["audit", "verify", "--expect", "five"])
    assert refused.exit_code == 2 and "--expect" in refused.output


# --- retention ----------------------------------------------------------------------------------------

def age(app, seqs, days):
    edit(app, update(ENTRIES).where(ENTRIES.c.seq.in_(seqs)).values(at=utcnow() - timedelta(days=days)))


def test_prune_deletes_the_entries_past_retention_and_the_chain_verifies_from_the_oldest_kept(chain, runner):
    age(chain, [1, 2, 3], days=400)  # an edit of `at`: their hashes no longer hold, but they are deleted
    assert "pruned 3 entries" in invoke(runner, "audit", "prune").stdout
    kept = entries(chain)
    assert [entry["seq"] for entry in kept] == [4, 5, 6]
    assert kept[-1]["action"] == "audit.prune" and kept[-1]["after"]["removed"] == 3
    assert kept[-1]["after"]["start_seq"] == 3
    assert "verifies: 3 entries from seq 4" in invoke(runner, "audit", "verify").stdout
    edit(chain, delete(ENTRIES).where(ENTRIES.c.seq == 4))  # the oldest kept, removed by hand
    assert "entry 4 removed" in verify_fails(runner)


def test_prune_in_batches_keeps_the_chain_and_zero_days_keeps_all(chain, app):
    with app.app_context():
        for number in range(7):
            keys.issue_key(f"0x{number + 100:040x}")
    age(app, list(range(1, 11)), days=30)
    with app.app_context():
        assert audit_retention.prune(0) == 0
        assert audit_retention.prune(31) == 0
        assert audit_retention.prune(29, batch=3) == 10
        db.session.remove()
    result = verified(app)
    assert result.finding is None and result.start_seq == 10 and result.checked == 3


def test_the_pruners_of_two_serving_processes_prune_at_their_start_and_the_entries_go_once(chain, app):
    age(app, [1, 2], days=400)
    first, second = audit_retention.Pruner(app), audit_retention.Pruner(app)
    first.interval = second.interval = 0.05
    first.start()
    second.start()
    try:
        deadline = time.monotonic() + 20
        while verified(app).start_seq < 2:
            assert time.monotonic() < deadline, "the pruner did not prune"
            time.sleep(0.05)
    finally:
        first.stop()
        second.stop()
    # One pruned (the lease holder), the other found nothing left: one audit.prune entry.
    assert [entry["after"]["removed"] for entry in entries(app, "audit.prune")] == [2]
    assert verified(app).finding is None
