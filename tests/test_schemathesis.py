"""Schemathesis fuzzes the live service (gunicorn) against the live /openapi.json, with a valid key.

Every check runs (`--checks all`) on valid and invalid data (`--mode all`); none is excluded. Whatever it
finds is fixed in the code or the document. The seed is fixed so that a failure can be replayed, and the
time budget keeps the suite quick.
"""

import json
import subprocess

import requests

from tests.live import BIN, ROOT

SEED = 20261121
BUDGET_SECONDS = 30
EXAMPLES_PER_OPERATION = 50
REPORTS = ROOT / "test-artifacts" / "schemathesis"
# Its settings: 410 (a removed identity) is an accepted answer to valid data, as 404 is; and see LISTING.
CONFIG = ROOT / "tests" / "schemathesis.toml"
# The listing may answer 400 to schema-valid data (see schemathesis.toml).
LISTING = {"GET /identities", "GET /identities/search"}
# And a webhook's URL may be refused with 422 for the address its host resolves to.
WEBHOOK_WRITES = {"POST /webhooks", "PATCH /webhooks/{webhook_id}"}


def test_schemathesis_finds_no_failure_with_every_check_on_valid_and_invalid_data(live_server, tmp_path):
    document = requests.get(f"{live_server.url}/openapi.json", timeout=10).json()
    operations = sum(1 for item in document["paths"].values() for method in item if method != "parameters")
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
    run = subprocess.run(
        [str(part) for part in command], check=False, cwd=tmp_path, capture_output=True, text=True,
        timeout=BUDGET_SECONDS + 60,
    )
    (REPORTS / "output.txt").write_text(run.stdout + run.stderr)
    assert run.returncode == 0, run.stdout[-20_000:] + run.stderr[-5_000:]

    report = json.loads(report_path.read_text())
    assert report["failures"] == [] and report["errors"] == []
    assert report["operations"]["tested"] == operations == report["operations"]["total"]
    assert {name: phase["status"] for name, phase in report["phases"].items()} == {
        "examples": "success", "coverage": "success", "fuzzing": "success", "stateful": "success",
    }
    # Warnings name what Schemathesis could not test (a pattern it cannot read, a missing auth, ...).
    warnings = {name: found for name, found in report["warnings"].items() if found}
    assert set(warnings.pop("validation_mismatch", [])) <= LISTING | WEBHOOK_WRITES
    assert warnings == {}
    # A floor, not a target: the budget ends the run, so the count depends on the machine.
    assert report["test_cases"]["generated"] >= 200, report["test_cases"]

