"""What a newcomer meets in the first hour: each mistake gets an answer that says what to do."""

from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from identity.config import database_url
from identity.core import keys
from identity.storage.database import db
from tests.common.apps import ADMIN_WALLET, make_app

UUID = "3f6c2a9e-8b1d-4c7a-9e52-0a4b6d8c1f27"
CONTENT_ID = "bafkreibm6jg3ux5qumhcn2b3flc3tyu6dmlb4xa7u5bvkuxqxdpmydhvfa"


@pytest.fixture
def unmigrated_app(empty_database_url, backend):
    if backend == "sqlite":  # the file, empty, as SQLite makes it (tests/cli/test_files.py: no file at all)
        Path(make_url(empty_database_url).database).touch()
    app = make_app(empty_database_url)
    yield app
    with app.app_context():
        db.engine.dispose()


@pytest.mark.parametrize(
    "method, path",
    [("GET", f"/identity/did:identity:ipfs:{CONTENT_ID}"), ("POST", "/identity"), ("GET", "/identities"),
     ("GET", "/changes"), ("PATCH", f"/identity/did:identity:ipfs:{CONTENT_ID}")],
)
def test_never_migrated_database_is_a_503_naming_the_upgrade_command_without_retry_after(unmigrated_app, method, path):
    response = unmigrated_app.test_client().open(path, method=method, json={}, headers={"x-api-key": "idsk_x"})
    assert response.status_code == 503
    assert response.mimetype == "application/problem+json"
    detail = response.get_json()["detail"]
    assert "not at the latest migration" in detail and "never migrated" in detail
    assert "flask --app app db upgrade" in detail
    assert "Retry-After" not in response.headers


def test_readyz_on_a_never_migrated_database_says_so_without_retry_after(unmigrated_app):
    response = unmigrated_app.test_client().get("/readyz")
    assert response.status_code == 503
    assert "never migrated" in response.get_json()["detail"]
    assert "Retry-After" not in response.headers


def test_the_first_request_after_db_upgrade_is_served(unmigrated_app):
    from flask_migrate import upgrade

    client = unmigrated_app.test_client()
    assert client.get("/identities", headers={"x-api-key": "idsk_x"}).status_code == 503
    with unmigrated_app.app_context():
        upgrade()
        key, _ = keys.issue_key(ADMIN_WALLET, "Admin")
    assert client.get("/identities", headers={"x-api-key": key}).status_code == 200


@pytest.mark.parametrize(
    "identity_id",
    [UUID, CONTENT_ID, f"did:other:ipfs:{CONTENT_ID}", "did:identity:ipfs:bafkreiTOOSHORT", "ada"],
)
def test_a_malformed_identity_id_is_told_what_an_identity_id_looks_like(client, user_key, identity_id):
    for path in (f"/identity/{identity_id}", f"/identities/{identity_id}", f"/identity/{identity_id}/changes"):
        response = client.get(path, headers={"x-api-key": user_key})
        assert response.status_code == 404, path
        detail = response.get_json()["detail"]
        assert "did:identity:ipfs:<content_id>" in detail and "bafkrei" in detail, path


def test_a_well_formed_unknown_identity_id_is_simply_not_found(client, user_key):
    response = client.get(f"/identity/did:identity:ipfs:{CONTENT_ID}", headers={"x-api-key": user_key})
    assert response.status_code == 404
    assert response.get_json()["detail"] == "No Identity exists for the provided id."


def test_trailing_slash_paths_are_served_as_the_listing_and_the_create(client, user_key):
    created = client.post("/identity/", json={"display_name": "Slash"}, headers={"x-api-key": user_key})
    assert created.status_code == 201
    plural = client.post("/identities/", json={"display_name": "Slashes"}, headers={"x-api-key": user_key})
    assert plural.status_code == 201
    listing = client.get("/identities/", headers={"x-api-key": user_key})
    assert listing.status_code == 200 and listing.get_json()["total"] == 2


def test_get_identity_without_an_id_is_a_405_pointing_to_the_listing_and_the_fetch(client, user_key):
    response = client.get("/identity", headers={"x-api-key": user_key})
    assert response.status_code == 405
    assert "POST" in response.headers["Allow"]
    detail = response.get_json()["detail"]
    assert "GET /identities" in detail and "GET /identity/<identity_id>" in detail


def test_413_with_content_length_says_the_limit(client, user_key):
    response = client.post(
        "/identity", data=b"{" + b" " * 70_000 + b"}",
        headers={"x-api-key": user_key, "Content-Type": "application/json"},
    )
    assert response.status_code == 413
    assert f"{64 * 1024} bytes" in response.get_json()["detail"]


@pytest.mark.parametrize(
    "args",
    [["keys", "list"], ["keys", "create", "--wallet", ADMIN_WALLET], ["keys", "bootstrap"], ["keys", "revoke", "x"],
     ["keys", "rotate", "x"], ["identities", "set-status", f"did:identity:ipfs:{CONTENT_ID}", "removed"],
     ["check-database"]],
)
def test_every_cli_command_on_a_never_migrated_database_says_so_in_one_line_and_fails(unmigrated_app, args):
    result = unmigrated_app.test_cli_runner().invoke(args=args)
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "not at the latest migration" in lines[0] and "db upgrade" in lines[0]
    assert result.exception is None or isinstance(result.exception, SystemExit)


@pytest.mark.sqlite_only
def test_backup_on_a_never_migrated_database_says_so(unmigrated_app, tmp_path):
    result = unmigrated_app.test_cli_runner().invoke(args=["backup", str(tmp_path / "copy.db")])
    assert result.exit_code == 1 and "not at the latest migration" in result.output


def test_the_hint_names_the_flask_of_this_environment(unmigrated_app):
    result = unmigrated_app.test_cli_runner().invoke(args=["keys", "list"])
    command = result.output.split("Run `")[1].split("`")[0]
    flask = command.split()[0]
    assert flask.endswith("/flask") and command.endswith("--app app db upgrade")


def test_check_database_on_a_migrated_database_passes(runner):
    result = runner.invoke(args=["check-database"])
    assert result.exit_code == 0 and "latest migration" in result.output


def test_a_database_that_does_not_answer_is_one_line_naming_why(unreachable_database_url, backend):
    app = make_app(unreachable_database_url)
    result = app.test_cli_runner().invoke(args=["check-database", "--connection-only"])
    assert result.exit_code == 1
    (line,) = result.output.strip().splitlines()
    assert line.startswith("Error: The database does not answer:")
    readiness = app.test_client().get("/readyz").get_json()["detail"]
    if backend == "postgresql":
        port = str(make_url(unreachable_database_url).port)
        for text in (line, readiness):
            assert "127.0.0.1" in text or "localhost" in text
            assert port in text and "refused" in text.lower()


@pytest.mark.postgresql_only
def test_a_postgres_scheme_url_is_served_with_psycopg(database_url):
    plain = "postgres://" + make_url(database_url).render_as_string(hide_password=False).partition("://")[2]
    app = make_app(plain)
    assert app.test_client().get("/readyz").status_code == 200


def test_postgres_and_postgresql_urls_name_the_psycopg_driver():
    assert database_url("postgres://u:p@h:5432/d") == "postgresql+psycopg://u:p@h:5432/d"
    assert database_url("postgresql://u:p@h/d") == "postgresql+psycopg://u:p@h/d"
    assert database_url("postgresql+psycopg://u@h/d") == "postgresql+psycopg://u@h/d"
    assert database_url("sqlite:///x.db") == "sqlite:///x.db"
