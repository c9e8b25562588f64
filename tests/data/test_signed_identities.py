"""Signed identities as data: export lines and `db copy` carry creator_signature, and import checks it against
the line's creator, refusing by line number a signature that is not the creator's."""

import orjson
import pytest
from eth_account import Account
from eth_account.messages import encode_typed_data

from identity.core import authorship
from identity.storage.database import db
from tests.common.apps import make_app, migrate
from tests.common.copies import copy, rows
from tests.wallets import address_of, private_key, sign_typed_data

CREATOR_KEY = private_key("creator")
CREATOR = address_of(CREATOR_KEY)
OTHER_KEY = private_key("not the creator")


@pytest.fixture
def other_database_url(empty_database_url):
    migrate(empty_database_url)
    return empty_database_url


@pytest.fixture
def signed(client, issue_key, ethers):
    """Two identities of CREATOR, one signed by ethers, one not; returns their ids."""
    headers = {"x-api-key": issue_key(CREATOR)}
    typed = client.post("/identity/preview", json={"display_name": "Signed"}, headers=headers).get_json()["typed_data"]
    signature = sign_typed_data([(CREATOR_KEY, typed)])[0]
    first = client.post("/identity", json={"display_name": "Signed", "signature": signature}, headers=headers)
    second = client.post("/identity", json={"display_name": "Unsigned"}, headers=headers)
    assert first.status_code == second.status_code == 201
    return first.get_json(), second.get_json()


def export_lines(app):
    result = app.test_cli_runner().invoke(args=["identities", "export"])
    assert result.exit_code == 0, result.output
    return [orjson.loads(line) for line in result.stdout_bytes.splitlines()]


def import_lines(app, tmp_path, lines):
    source = tmp_path / "lines.jsonl"
    source.write_bytes(b"\n".join(orjson.dumps(line) for line in lines))
    return app.test_cli_runner().invoke(args=["identities", "import", str(source)])


def test_export_lines_carry_creator_signature_and_import_keeps_it(app, signed, other_database_url, tmp_path):
    lines = export_lines(app)
    assert [line["creator_signature"] for line in lines] == [signed[0]["creator_signature"], None]
    other = make_app(other_database_url)
    result = import_lines(other, tmp_path, lines)
    assert result.stdout.strip().splitlines()[-1] == "imported 2, skipped 0, refused 0", result.output
    assert export_lines(other) == lines
    with other.app_context():
        db.engine.dispose()


def test_import_refuses_a_signature_that_is_not_the_creators_by_its_line_number(app, signed, other_database_url, tmp_path):
    signed_line, unsigned_line = export_lines(app)
    typed = authorship.typed_data(signed_line["identity_id"].rsplit(":", 1)[1])
    forged = Account.sign_message(encode_typed_data(full_message=typed), OTHER_KEY).signature.to_0x_hex()
    lines = [unsigned_line, {**signed_line, "creator_signature": forged}, {**unsigned_line, "creator_signature": "0x12"}]
    other = make_app(other_database_url)
    result = import_lines(other, tmp_path, lines)
    assert result.exit_code == 1
    assert result.stdout.strip().splitlines()[-1] == "imported 1, skipped 0, refused 2"
    assert f"line 2: refused: creator_signature is not the creator's: it recovers to {address_of(OTHER_KEY)}" in result.stderr
    # Any bytes may be a contract wallet's signature: these are refused as no ordinary wallet's, with no chain named.
    assert "line 3: refused: creator_signature is not a valid signature: The signature has 2 characters" in result.stderr
    with other.app_context():
        db.engine.dispose()


def test_a_signature_moved_to_other_content_is_refused(app, signed, other_database_url, tmp_path):
    signed_line, unsigned_line = export_lines(app)
    other = make_app(other_database_url)
    result = import_lines(other, tmp_path, [{**unsigned_line, "creator_signature": signed_line["creator_signature"]}])
    assert result.exit_code == 1 and "line 1: refused: creator_signature is not the creator's" in result.stderr
    with other.app_context():
        db.engine.dispose()


def test_a_signature_in_another_form_is_imported_in_the_one_form(app, signed, other_database_url, tmp_path):
    signed_line, _ = export_lines(app)
    upper = "0x" + signed_line["creator_signature"][2:-2].upper() + format(int(signed_line["creator_signature"][-2:], 16) - 27, "02x")
    other = make_app(other_database_url)
    result = import_lines(other, tmp_path, [{**signed_line, "creator_signature": upper}])
    assert result.exit_code == 0, result.output
    assert export_lines(other)[0]["creator_signature"] == signed_line["creator_signature"]
    with other.app_context():
        db.engine.dispose()


def test_a_line_of_an_export_made_before_signatures_is_imported_unsigned(app, signed, other_database_url, tmp_path):
    _, unsigned_line = export_lines(app)
    del unsigned_line["creator_signature"]
    other = make_app(other_database_url)
    assert import_lines(other, tmp_path, [unsigned_line]).exit_code == 0
    assert export_lines(other)[0]["creator_signature"] is None
    with other.app_context():
        db.engine.dispose()


def test_db_copy_carries_creator_signature(app, signed, database_url, other_database_url):
    result = copy(app, other_database_url)
    assert result.exit_code == 0, result.output
    copied = {row.identity_id: row.creator_signature for row in rows(other_database_url)["identities"]}
    assert copied == {identity["identity_id"]: identity["creator_signature"] for identity in signed}
