"""The contract's "Clients and the OpenAPI document", proven with the real tools on the live document.

A real gunicorn serves /openapi.json; openapi-spec-validator and Redocly's linter find no error in it;
openapi-python-client generates a Python client and openapi-typescript + openapi-fetch a TypeScript one
(`tsc --strict` checks it); each runs the same scenario (tests/clients/scenario.py, .../ts/scenario.ts)
against that server using only generated code: identities, their history and feed (long poll included),
keys and users, and the problems of each. The event stream (text/event-stream) is not JSON: the
scenarios leave it out, but the TypeScript types must compile with it documented. openapi-generator's
Python client runs a shorter one (tests/clients/generator_scenario.py). The npm tools are pinned in
tests/clients/ts's package-lock.json and installed once (`npm ci`) into its node_modules, reused while
the lock is unchanged.
"""

import json
import os
import shutil
import subprocess
import sys

import pytest
import requests
from openapi_spec_validator import validate

from identity.seed import new_wallet
from tests.clients import generator_scenario
from tests.clients.scenario import PACKAGE, STEPS, Scenario
from tests.common.clients import TS, run
from tests.common.live import BIN, LiveServer, flask_cli, prepare_database

# Few creates a minute: the scenario's `limited` key runs out (429); the others stay within it.
CREATE_BUDGET = "30/minute"
# A revoked key is refused within this many seconds (the scenarios poll a little longer for the 401).
KEY_CACHE_SECONDS = "1"


def key_for(database_url, role, wallet=None):
    wallet = wallet or new_wallet()
    return flask_cli(database_url, "keys", "create", "--wallet", wallet, "--role", role).strip().splitlines()[-1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    database_url = f"sqlite:///{tmp_path_factory.mktemp('clients') / 'identity.db'}"
    prepare_database(database_url, new_wallet())
    server = LiveServer(database_url, workers=1, env={
        "IDENTITY_RATELIMIT_CREATE": CREATE_BUDGET, "IDENTITY_KEY_CACHE_SECONDS": KEY_CACHE_SECONDS,
        # The scenarios build their sign-in messages from what GET /auth/nonce names.
        "IDENTITY_SIWE_DOMAIN": "identity.test",
        # The scenarios register mirrors of made-up upstreams: this server must not follow them.
        "IDENTITY_MIRRORS_FOLLOW": "0",
    }).start()
    server.database = database_url
    yield server
    server.stop()


def scenario_keys(server):
    """Fresh keys for one run of the scenario: each language spends its own budgets."""
    wallet = new_wallet()
    keys = {
        "admin": key_for(server.database, "Admin"),
        "user": key_for(server.database, "User", wallet),
        "limited": key_for(server.database, "User"),
    }
    return keys, wallet


@pytest.fixture(scope="module")
def document_path(server, tmp_path_factory):
    response = requests.get(server.url + "/openapi.json", timeout=10)
    assert response.status_code == 200
    path = tmp_path_factory.mktemp("document") / "openapi.json"
    path.write_bytes(response.content)
    return path




def test_openapi_spec_validator_finds_no_error(document_path):
    validate(json.loads(document_path.read_text()))


def test_redocly_lint_finds_no_error(document_path, npm_tools):
    result = run([str(npm_tools / "redocly"), "lint", str(document_path), "--format=json"], cwd=TS)
    report = json.loads(result.stdout)
    errors = [problem for problem in report["problems"] if problem["severity"] == "error"]
    assert errors == []


def test_generated_python_client_runs_the_scenario(server, document_path, tmp_path):
    config = tmp_path / "config.json"
    # No post hooks: the generated code is used as generated (the hooks would only reformat it).
    config.write_text(json.dumps({"package_name_override": PACKAGE, "post_hooks": []}))
    output = tmp_path / "generated" / PACKAGE
    run([
        str(BIN / "openapi-python-client"), "generate", "--path", str(document_path), "--config", str(config),
        "--meta", "none", "--output-path", str(output),
    ])
    keys, wallet = scenario_keys(server)
    sys.path.insert(0, str(output.parent))
    try:
        assert Scenario(server.url, keys, wallet).run() == list(STEPS)
    finally:
        sys.path.remove(str(output.parent))
        for name in [name for name in sys.modules if name == PACKAGE or name.startswith(PACKAGE + ".")]:
            del sys.modules[name]


def test_openapi_generator_python_client_runs_a_short_scenario(server, document_path, tmp_path):
    """openapi-generator's own `python` generator, from the jar the openapi-generator-cli package ships
    (pinned in requirements-dev.txt); it needs a Java runtime, 11 or newer."""
    if not shutil.which("java"):
        pytest.skip("java is missing: install Debian's default-jre-headless (.ci/run does)")
    package = generator_scenario.PACKAGE
    output = tmp_path / "generated"
    run([
        str(BIN / "openapi-generator-cli"), "generate", "--input-spec", str(document_path), "--generator-name",
        "python", "--output", str(output), "--package-name", package,
    ])
    wallet = new_wallet()
    sys.path.insert(0, str(output))
    try:
        scenario = generator_scenario.GeneratorScenario(
            server.url, key_for(server.database, "User", wallet), wallet, admin_key=key_for(server.database, "Admin"))
        assert scenario.run() == list(generator_scenario.STEPS)
    finally:
        sys.path.remove(str(output))
        for name in [name for name in sys.modules if name == package or name.startswith(package + ".")]:
            del sys.modules[name]


def test_generated_typescript_client_type_checks_strictly_and_runs_the_scenario(server, npm_tools):
    generated = TS / "generated" / "schema.d.ts"
    run([str(npm_tools / "openapi-typescript"), server.url + "/openapi.json", "-o", str(generated)], cwd=TS)
    assert '"text/event-stream"' in generated.read_text()  # GET /changes's stream is in what tsc checks
    shutil.rmtree(TS / "build", ignore_errors=True)
    run([str(npm_tools / "tsc"), "-p", str(TS)], cwd=TS)
    keys, wallet = scenario_keys(server)
    env = {**os.environ, "IDENTITY_SCENARIO": json.dumps({"base_url": server.url, "keys": keys, "user_wallet": wallet})}
    result = subprocess.run(["node", str(TS / "build" / "scenario.js")], cwd=TS, env=env, capture_output=True,
                            text=True, timeout=300)
    assert result.stdout.split("\n")[:-1] == [f"ok {step}" for step in STEPS], result.stdout + result.stderr
    assert result.returncode == 0
