"""Contract wallets sign identities (EIP-712 through EIP-1271 and EIP-6492), against real wallets on a real node
(anvil): each case also verified by viem's verifyTypedData, which must agree with the service; the chain travels
with the identity (creator_signature_chain_id) through export, import, mirrors and db copy, each checking it there
and refusing, counted, what it cannot check. On SQLite and on PostgreSQL."""

import io

import orjson
import pytest

from identity.core import keys
from identity.data import exports, mirror_batches, mirrors
from identity.storage.database import db
from tests.common.apps import ADMIN_WALLET, make_app, migrate
from tests.common.chain import HOME_CHAIN, OTHER_CHAIN
from tests.common.contract_wallets import (
    CASES,
    LIMITS,
    OWNER0,
    closed_port_url,
    preview,
    signed_bodies,
)
from tests.common.faulty_rpc import FaultyRpc

SETTING = "IDENTITY_ETH_RPC_URLS"



@pytest.fixture
def app_config(chains):
    return {SETTING: dict(chains.urls), **LIMITS}






def viem_verdicts(chains, checks):
    """viem's verifyTypedData of each (chain id, address, typed data, signature), on that chain's node."""
    verdicts = {}
    for chain, node in ((HOME_CHAIN, chains.home), (OTHER_CHAIN, chains.other)):
        mine = [(i, check) for i, check in enumerate(checks) if check[0] == chain]
        answers = node.viem([{"op": "verifyTypedData", "address": address, "typedData": typed, "signature": signature}
                             for _, (_, address, typed, signature) in mine]) if mine else []
        verdicts.update({i: answer["valid"] for (i, _), answer in zip(mine, answers, strict=True)})
    return [verdicts[i] for i in range(len(checks))]


def test_contract_wallets_sign_identities_on_their_chain_and_viem_agrees_on_every_case(client, admin_key, chains):
    bodies, typed, signatures = signed_bodies(client, admin_key, chains, CASES)
    viem = viem_verdicts(chains, [(chain, body["creator"], data, signature) for body, data, signature, (_, _, chain, _, _)
                                  in zip(bodies, typed, signatures, CASES, strict=True)])
    for (case, _, chain, _, valid), body, signature, viem_valid in zip(CASES, bodies, signatures, viem, strict=True):
        assert viem_valid is valid, case
        signed = {**body, "signature": signature, "signature_chain_id": chain}
        assert client.post("/identity/preview", json=signed,
                           headers={"x-api-key": admin_key}).status_code == (200 if valid else 422), case
        response = client.post("/identity", json=signed, headers={"x-api-key": admin_key})
        if valid:
            assert response.status_code == 201, (case, response.text)
            identity = response.get_json()
            assert identity["creator"]["wallet"] == body["creator"], case
            assert identity["creator_signature"] == signature.lower(), case
            assert identity["creator_signature_chain_id"] == chain, case
            fetched = client.get(f"/identity/{identity['identity_id']}", headers={"x-api-key": admin_key}).get_json()
            assert fetched["creator_signature_chain_id"] == chain, case
        else:
            assert response.status_code == 422, (case, response.text)
            [message] = response.get_json()["errors"]["signature"]
            assert f"chain {chain}" in message and "does not accept it" in message, (case, message)


def test_anyone_checks_a_stored_contract_wallets_signature_with_viem(client, admin_key, chains):
    bodies, typed, signatures = signed_bodies(client, admin_key, chains, CASES[:1], label="Checked")
    created = client.post("/identity", json={**bodies[0], "signature": signatures[0], "signature_chain_id": HOME_CHAIN},
                          headers={"x-api-key": admin_key}).get_json()
    # What anyone has: the identity as served, and the typed data of its content id.
    data = preview(client, admin_key, bodies[0])["typed_data"]
    [verdict] = chains.home.viem([{"op": "verifyTypedData", "address": created["creator"]["wallet"], "typedData": data,
                                   "signature": created["creator_signature"]}])
    assert verdict["valid"] is True


def test_a_contract_wallets_signature_without_its_chain_is_refused_saying_to_name_it(client, admin_key, chains):
    bodies, _, signatures = signed_bodies(client, admin_key, chains, CASES[:1], label="Chainless")
    response = client.post("/identity", json={**bodies[0], "signature": signatures[0]}, headers={"x-api-key": admin_key})
    assert response.status_code == 422
    assert "signature_chain_id" in response.get_json()["errors"]["signature"][0]
    response = client.post("/identity", json={**bodies[0], "signature_chain_id": HOME_CHAIN},
                           headers={"x-api-key": admin_key})
    assert response.status_code == 422 and "signature_chain_id" in response.get_json()["errors"]


def test_an_ordinary_wallets_signature_holds_everywhere_whatever_chain_is_named(client, admin_key, chains):
    from tests.wallets import address_of, sign_typed_data
    body = {"display_name": "Signed by a key", "creator": address_of(OWNER0)}
    signature = sign_typed_data([(OWNER0, preview(client, admin_key, body)["typed_data"])])[0]
    response = client.post("/identity", json={**body, "signature": signature, "signature_chain_id": OTHER_CHAIN},
                           headers={"x-api-key": admin_key})
    assert response.status_code == 201, response.text
    assert response.get_json()["creator_signature_chain_id"] is None


def test_no_endpoint_for_the_chain_is_a_422_naming_the_chain_and_the_setting(database_url, chains):
    app = make_app(database_url, IDENTITY_ETH_RPC_URLS={HOME_CHAIN: chains.home.url}, **LIMITS)
    client, key = app.test_client(), _admin_key(app)
    bodies, _, signatures = signed_bodies(client, key, chains, CASES[:1], label="Endpointless")
    response = client.post("/identity", json={**bodies[0], "signature": signatures[0], "signature_chain_id": 8453},
                           headers={"x-api-key": key})
    assert response.status_code == 422
    [message] = response.get_json()["errors"]["signature"]
    assert "chain 8453" in message and SETTING in message


@pytest.mark.parametrize("fault", ["closed", "/slow", "/error", "/notjson"])
def test_an_endpoint_that_fails_is_a_503_with_retry_after_and_nothing_is_created(database_url, chains, fault):
    faulty = FaultyRpc(target=chains.home.url)
    try:
        url = closed_port_url() if fault == "closed" else faulty.url + fault
        app = make_app(database_url, IDENTITY_ETH_RPC_URLS={HOME_CHAIN: url}, IDENTITY_ETH_RPC_TIMEOUT_SECONDS=0.5,
                       **LIMITS)
        client, key = app.test_client(), _admin_key(app)
        bodies, _, signatures = signed_bodies(client, key, chains, CASES[:1], label=f"Fault {fault}")
        signed = {**bodies[0], "signature": signatures[0], "signature_chain_id": HOME_CHAIN}
        response = client.post("/identity", json=signed, headers={"x-api-key": key})
        assert response.status_code == 503, response.text
        assert int(response.headers["Retry-After"]) >= 1
        assert f"chain {HOME_CHAIN}" in response.get_json()["detail"]
        assert exported(app) == []
    finally:
        faulty.stop()


def _admin_key(app):
    with app.app_context():
        key, _ = keys.issue_key(ADMIN_WALLET, "Admin")
    return key


# --- export, import, mirrors, db copy -----------------------------------------------------------------------


def exported(app):
    with app.app_context():
        stream = io.BytesIO()
        exports.export_identities(stream)
        db.engine.dispose()  # no connection left to a database that its test drops
    return [orjson.loads(line) for line in stream.getvalue().splitlines()]


def run_import(app, tmp_path, lines):
    source = tmp_path / "lines.jsonl"
    source.write_bytes(b"\n".join(orjson.dumps(line) for line in lines))
    return app.test_cli_runner().invoke(args=["identities", "import", str(source)])


@pytest.fixture
def contract_signed(client, admin_key, chains):
    """Identities signed by a Safe and by the counterfactual wallet, and one unsigned: their Identity objects."""
    cases = [CASES[1], CASES[3]]
    bodies, _, signatures = signed_bodies(client, admin_key, chains, cases, label="Portable")
    made = [client.post("/identity", json={**body, "signature": signature, "signature_chain_id": HOME_CHAIN},
                        headers={"x-api-key": admin_key}) for body, signature in zip(bodies, signatures, strict=True)]
    made.append(client.post("/identity", json={"display_name": "Unsigned"}, headers={"x-api-key": admin_key}))
    assert [response.status_code for response in made] == [201, 201, 201]
    return [response.get_json() for response in made]


def test_export_carries_the_chain_and_import_checks_the_signature_there(app, contract_signed, chains,
                                                                          instance_databases, tmp_path):
    lines = exported(app)
    assert sorted(line["creator_signature_chain_id"] or 0 for line in lines) == [0, HOME_CHAIN, HOME_CHAIN]
    with_endpoint, without_endpoint, tampered_target = instance_databases(3)
    there = make_app(with_endpoint, IDENTITY_ETH_RPC_URLS=dict(chains.urls))
    result = run_import(there, tmp_path, lines)
    assert result.stdout.strip().splitlines()[-1] == "imported 3, skipped 0, refused 0", result.output
    assert exported(there) == lines

    blind = make_app(without_endpoint)
    result = run_import(blind, tmp_path, lines)
    assert result.exit_code == 1
    assert result.stdout.strip().splitlines()[-1] == "imported 1, skipped 0, refused 2", result.output
    assert f"contract wallet's on chain {HOME_CHAIN}" in result.stderr and SETTING in result.stderr
    assert [line["display_name"] for line in exported(blind)] == ["Unsigned"]

    moved = [{**line, "creator_signature_chain_id": OTHER_CHAIN} if line["creator_signature_chain_id"] else line
             for line in lines]
    elsewhere = make_app(tampered_target, IDENTITY_ETH_RPC_URLS=dict(chains.urls))
    result = run_import(elsewhere, tmp_path, moved)
    assert result.stdout.strip().splitlines()[-1] == "imported 1, skipped 0, refused 2", result.output
    assert f"on chain {OTHER_CHAIN} does not accept it" in result.stderr
    assert [line["display_name"] for line in exported(elsewhere)] == ["Unsigned"]


def test_a_mirror_checks_the_signature_on_its_chain_and_rejects_what_it_cannot_check(app, contract_signed, chains,
                                                                                     instance_databases):
    entries = [{"seq": seq, "identity_id": identity["identity_id"], "at": identity["created_at"], "kind": "created",
                "wallet": identity["creator"]["wallet"], "fields": None, "doc": identity}
               for seq, identity in enumerate(contract_signed, 1)]
    done = {}
    for name, url, config in (("with", *instance_databases(1), {SETTING: dict(chains.urls)}),
                              ("without", *instance_databases(1), {})):
        downstream = make_app(url, **config)
        with downstream.app_context():
            mirror = mirrors.register("http://127.0.0.1:9/", "idsk_upstream-key")
            applied = mirror_batches.apply(mirror.id, mirror.name, entries, 0, len(entries))
            done[name] = (applied.applied, applied.rejected)
            db.engine.dispose()
    assert done == {"with": (3, 0), "without": (1, 2)}


def test_db_copy_carries_the_chain_and_refuses_what_it_cannot_check(app, contract_signed, chains, empty_database_url,
                                                                    database_url):
    migrate(empty_database_url)
    refused = make_app(database_url).test_cli_runner().invoke(args=["db", "copy", "--to", empty_database_url])
    assert refused.exit_code == 1
    assert "2 identities" in refused.output and f"chain {HOME_CHAIN}" in refused.output and SETTING in refused.output
    assert exported(make_app(empty_database_url)) == []
    copied = app.test_cli_runner().invoke(args=["db", "copy", "--to", empty_database_url])
    assert copied.exit_code == 0, copied.output
    assert exported(make_app(empty_database_url)) == exported(app)
