"""Schemathesis fuzzes the live service (gunicorn) against the live /openapi.json, with a valid key.

Every check runs (`--checks all`) on valid and invalid data (`--mode all`); none is excluded. Whatever it
finds is fixed in the code or the document. The seed is fixed so that a failure can be replayed, and the
time budget keeps the suite quick.
"""

import json
import os
import subprocess

import requests

from tests.common.live import BIN, ROOT

SEED = 20261121
BUDGET_SECONDS = 30
EXAMPLES_PER_OPERATION = 50
REPORTS = ROOT / "test-artifacts" / "schemathesis"
# Its settings: 410 (a removed identity) is an accepted answer to valid data, as 404 is; and see LISTING.
CONFIG = ROOT / "tests" / "schemathesis.toml"
# The listings may answer 400, and a PATCH with a made-up If-Match 412, to schema-valid data (see
# schemathesis.toml): Schemathesis warns that they mostly refuse what it generates, and rightly.
LISTING = {"GET /identities", "GET /keys", "GET /audit", "PATCH /identity/{identity_id}"}
# Operations the run leaves out: they revoke the run's own key (see schemathesis.toml).
SELF_REVOKING = {"DELETE /me/key", "POST /me/key/rotate"}
# And operations on a key by id, which the run calls with made-up ids only (404): a real one could be its own.
KEY_BY_ID = {"DELETE /keys/{key_id}", "POST /keys/{key_id}/rotate"}
# And a webhook's URL may be refused with 422 for the address its host resolves to.
WEBHOOK_WRITES = {"POST /webhooks", "PATCH /webhooks/{webhook_id}"}
# And the wallet proofs: a made-up signature is never the creator's (422), a made-up message never an EIP-4361
# one naming a nonce issued here (422, 401), on the create and its plural alias alike, which Schemathesis reads as mostly refused data, and, since the
# sign-in answers 401 to all it sends, as a missing key.
WALLET_PROOFS = {"POST /identity", "POST /identities", "POST /identity/preview", "POST /auth/siwe"}


def test_schemathesis_finds_no_failure_with_every_check_on_valid_and_invalid_data(live_server, tmp_path):
    document = requests.get(f"{live_server.url}/openapi.json", timeout=10).json()
    operations = sum(1 for item in document["paths"].values() for method in item if method != "parameters")
    operations -= len(SELF_REVOKING)
    REPORTS.mkdir(parents=True, exist_ok=True)
    report_path = REPORTS / "report.json"
    report_path.unlink(missing_ok=True)
    command = [
        BIN / "st", "--config-file", CONFIG, "run", f"{live_server.url}/openapi.json",
        "--checks", "all",
        "--mode", "all",
        "--seed", str(SEED),
        "--max-examples", str(EXAMPLES_PER_OPERATION),
        "--max-time", str(BUDGET_SECONDS),
        "--header", f"x-api-key: {live_server.api_key}",
        # Examples found by earlier runs would make this one depend on them.
        "--generation-database", "none",
        "--report", "json,junit",
        "--report-json-path", report_path,
        "--report-junit-path", REPORTS / "junit.xml",
        "--no-color",
    ]
    # The creator's format, eip55-address, which Schemathesis learns from tests/common/schemathesis_hooks.py.
    env = {**os.environ, "SCHEMATHESIS_HOOKS": "tests.common.schemathesis_hooks", "PYTHONPATH": str(ROOT)}
    run = subprocess.run(
        [str(part) for part in command], check=False, cwd=tmp_path, capture_output=True, text=True,
        timeout=BUDGET_SECONDS + 60, env=env,
    )
    (REPORTS / "output.txt").write_text(run.stdout + run.stderr)
    assert run.returncode == 0, run.stdout[-20_000:] + run.stderr[-5_000:]

    report = json.loads(report_path.read_text())
    assert report["failures"] == [] and report["errors"] == []
    assert report["operations"]["tested"] == operations == report["operations"]["selected"]
    assert report["operations"]["total"] == operations + len(SELF_REVOKING)
    assert {name: phase["status"] for name, phase in report["phases"].items()} == {
        "examples": "success", "coverage": "success", "fuzzing": "success", "stateful": "success",
    }
    # Warnings name what Schemathesis could not test (a pattern it cannot read, a missing auth, ...).
    warnings = {name: found for name, found in report["warnings"].items() if found}
    assert set(warnings.pop("validation_mismatch", [])) <= LISTING | WEBHOOK_WRITES | WALLET_PROOFS
    assert set(warnings.pop("missing_auth", [])) <= {"POST /auth/siwe"}
    assert set(warnings.pop("missing_test_data", [])) <= KEY_BY_ID
    assert warnings == {}
    # A floor, not a target: the budget ends the run, so the count depends on the machine.
    assert report["test_cases"]["generated"] >= 200, report["test_cases"]

