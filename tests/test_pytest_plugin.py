"""The pytest plugin, used as an outside project uses it: a test folder with no conftest.py, where
pytest finds the plugin through the installed package's entry point."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = [ROOT / "examples" / "test_with_identity_fixtures.py", ROOT / "examples" / "test_seeding_and_settings.py"]
EMBEDDING_PAGE = ROOT / "docs" / "embedding.md"


# An outside project has no hypothesis; its plugin, installed for this suite, costs seconds a run.
OUTSIDE = ("-p", "no:cacheprovider", "-p", "no:hypothesispytest")


def run(pytester, *args):
    """Run pytest in the outside project, in this process: it loads the plugin from its entry point anew."""
    assert not list(pytester.path.glob("**/conftest.py")), "an outside project has no conftest here"
    return pytester.runpytest(*OUTSIDE, *args)


def run_fresh(pytester, *args):
    """Run pytest in the outside project in a new interpreter, as the project's own `pytest` would."""
    assert not list(pytester.path.glob("**/conftest.py")), "an outside project has no conftest here"
    return pytester.runpytest_subprocess(*OUTSIDE, *args)


def test_fixtures_need_no_conftest_and_no_import(pytester):
    pytester.makepyfile(
        """
        def test_create_then_fetch(identity_client, identity_api_key):
            key = identity_api_key()
            created = identity_client.post("/identity", json={"display_name": "Outside"}, headers={"x-api-key": key})
            assert created.status_code == 201
            identity_id = created.get_json()["identity_id"]
            assert identity_client.get(f"/identity/{identity_id}", headers={"x-api-key": key}).status_code == 200

        def test_the_app_is_a_testing_app_of_the_service(identity_app, identity_client):
            assert identity_app.testing
            assert identity_client.get("/readyz").get_json() == {"status": "ok"}
            assert identity_client.get("/identity/x").status_code == 401
        """
    )
    run(pytester).assert_outcomes(passed=2)


def test_each_test_sees_only_what_it_created(pytester):
    pytester.makepyfile(
        """
        seen = {}

        def test_a_creates(identity_client, identity_api_key):
            response = identity_client.post("/identity", json={"display_name": "Mine"}, headers={"x-api-key": identity_api_key()})
            assert response.status_code == 201
            seen["identity_id"] = response.get_json()["identity_id"]

        def test_b_sees_nothing_of_it(identity_client, identity_api_key):
            key = identity_api_key()
            assert identity_client.get(f"/identity/{seen['identity_id']}", headers={"x-api-key": key}).status_code == 404
            again = identity_client.post("/identity", json={"display_name": "Mine"}, headers={"x-api-key": key})
            assert again.status_code == 201
            assert again.get_json()["identity_id"] == seen["identity_id"]
        """
    )
    run(pytester).assert_outcomes(passed=2)


def test_keys_have_the_roles_asked_for(pytester):
    pytester.makepyfile(
        """
        OTHER = "0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB"
        MINE = "0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359"

        def post(client, key, body):
            return client.post("/identity", json=body, headers={"x-api-key": key})

        def test_user_key_naming_another_creator_is_403(identity_client, identity_api_key):
            assert post(identity_client, identity_api_key(), {"display_name": "x", "creator": OTHER}).status_code == 403

        def test_admin_key_may_name_any_creator(identity_client, identity_api_key):
            response = post(identity_client, identity_api_key(role="Admin"), {"display_name": "x", "creator": OTHER})
            assert response.status_code == 201
            assert response.get_json()["creator"]["wallet"] == OTHER

        def test_key_for_a_given_wallet_creates_as_it(identity_client, identity_api_key):
            response = post(identity_client, identity_api_key(wallet=MINE.lower()), {"display_name": "x"})
            assert response.get_json()["creator"]["wallet"] == MINE
            assert response.get_json()["creator"]["role"] == "User"

        def test_keys_without_a_wallet_belong_to_different_users(identity_client, identity_api_key):
            first = post(identity_client, identity_api_key(), {"display_name": "one"}).get_json()["creator"]
            second = post(identity_client, identity_api_key(), {"display_name": "two"}).get_json()["creator"]
            assert first["wallet"] != second["wallet"]
        """
    )
    run(pytester).assert_outcomes(passed=4)


def test_seeding_api_serves_an_outside_project(pytester):
    pytester.makepyfile(
        """
        import pytest
        from identity.seed import InvalidFields, create_identity, issue_key

        def test_seeded_identity_is_fetched_as_created(identity_app, identity_client):
            seeded = create_identity(identity_app, "Seeded", image="ipfs://bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku")
            key = issue_key(identity_app)
            assert identity_client.get(f"/identity/{seeded['identity_id']}", headers={"x-api-key": key}).get_json() == seeded

        def test_invalid_fields_are_refused(identity_app):
            with pytest.raises(InvalidFields) as refused:
                create_identity(identity_app, "", image="ftp://nope")
            assert sorted(refused.value.errors) == ["display_name", "image"]
        """
    )
    run(pytester).assert_outcomes(passed=2)


def test_set_status_fixture_takes_an_identity_down_and_brings_it_back(pytester):
    pytester.makepyfile(
        """
        from identity.seed import create_identity

        def test_removed_is_gone_until_restored(identity_app, identity_client, identity_api_key, identity_set_status):
            seeded = create_identity(identity_app, "Moderated")
            key = identity_api_key()
            path = f"/identity/{seeded['identity_id']}"
            assert identity_set_status(seeded["identity_id"], "removed")["status"] == "removed"
            gone = identity_client.get(path, headers={"x-api-key": key})
            assert gone.status_code == 410
            assert gone.get_json()["identity_id"] == seeded["identity_id"]
            identity_set_status(seeded["identity_id"], "complete", by="0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB")
            assert identity_client.get(path, headers={"x-api-key": key}).status_code == 200
            changes = identity_client.get(path + "/changes", headers={"x-api-key": key}).get_json()["data"]
            assert [entry["kind"] for entry in changes] == ["created", "changed", "changed"]
        """
    )
    run(pytester).assert_outcomes(passed=1)


def test_identity_config_overrides_settings(pytester):
    pytester.makepyfile(
        """
        import pytest

        @pytest.fixture
        def identity_config():
            return {"IDENTITY_DID_NAMESPACE": "acme", "MAX_CONTENT_LENGTH": 100}

        def test_settings_are_applied(identity_app, identity_client, identity_api_key):
            key = identity_api_key()
            created = identity_client.post("/identity", json={"display_name": "acme"}, headers={"x-api-key": key})
            assert created.get_json()["identity_id"].startswith("did:acme:ipfs:bafkrei")
            too_big = identity_client.post("/identity", json={"display_name": "x" * 200}, headers={"x-api-key": key})
            assert too_big.status_code == 413
        """
    )
    run(pytester).assert_outcomes(passed=1)


def test_identity_config_may_not_name_a_database(pytester):
    pytester.makepyfile(
        """
        import pytest

        @pytest.fixture
        def identity_config():
            return {"DATABASE_URL": "sqlite:///shared.db"}

        def test_uses_the_app(identity_app):
            pass
        """
    )
    result = run(pytester)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*identity_config may not set DATABASE_URL*"])
    assert not (pytester.path / "shared.db").exists()


def test_an_unused_plugin_imports_nothing_and_leaves_logging_alone(pytester):
    pytester.makepyfile(
        test_1_unused="""
        import sys

        def test_nothing_of_the_service_is_imported():
            assert "identity.pytest_plugin" in sys.modules  # the plugin is loaded...
            assert "flask" not in sys.modules  # ...and cheap
            assert "identity.core.identities" not in sys.modules
        """,
        test_2_used="""
        import logging

        def test_uses_the_app(identity_app):
            pass

        def test_logging_is_as_pytest_set_it(identity_app):
            root = logging.getLogger()
            assert root.level == logging.WARNING
            assert not [handler for handler in root.handlers if type(handler) is logging.StreamHandler]
            assert logging.getLogger("sqlalchemy.engine").level == logging.NOTSET
        """,
    )
    # A fresh interpreter: this one imported Flask long ago.
    run_fresh(pytester).assert_outcomes(passed=3)


def test_plugin_can_be_turned_off(pytester):
    pytester.makepyfile("def test_uses_the_app(identity_app):\n    pass\n")
    result = run(pytester, "-p", "no:identity")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*fixture 'identity_app' not found*"])


def test_the_documented_examples_run_as_an_outside_project(pytester):
    for example in EXAMPLES:
        (pytester.path / example.name).write_text(example.read_text())
    run_fresh(pytester).assert_outcomes(passed=5)


def test_the_embedding_page_shows_the_examples_exactly():
    blocks = re.findall(r"^```python\n(.*?)^```$", EMBEDDING_PAGE.read_text(), flags=re.MULTILINE | re.DOTALL)
    assert blocks == [example.read_text() for example in EXAMPLES]


def test_rate_limits_are_off_in_the_plugins_app(pytester):
    pytester.makepyfile(
        """
        def test_many_creates_with_one_key(identity_client, identity_api_key):
            key = identity_api_key()
            for n in range(60):
                answer = identity_client.post("/identity", json={"display_name": f"N{n}"}, headers={"x-api-key": key})
                assert answer.status_code == 201, (n, answer.get_json())
        """
    )
    run(pytester).assert_outcomes(passed=1)


def test_identity_config_turns_a_budget_on(pytester):
    pytester.makepyfile(
        """
        import pytest

        @pytest.fixture
        def identity_config():
            return {"IDENTITY_RATELIMIT_CREATE": "3/minute"}

        def test_the_fourth_create_is_429(identity_client, identity_api_key):
            key = identity_api_key()
            answers = [
                identity_client.post("/identity", json={"display_name": f"N{n}"}, headers={"x-api-key": key}).status_code
                for n in range(4)
            ]
            assert answers == [201, 201, 201, 429]
            # Reads stay off.
            assert all(identity_client.get("/identities", headers={"x-api-key": key}).status_code == 200 for _ in range(200))
        """
    )
    run(pytester).assert_outcomes(passed=1)
