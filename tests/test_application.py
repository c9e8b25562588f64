"""IdentityFlask takes shortcuts past Flask's hook machinery when there is nothing to run; whatever an
embedding project registers still runs, as in Flask."""

import pytest
from flask import Blueprint, g, request, request_tearing_down

from identity.auth import auth, current_caller


@pytest.mark.sqlite_only
def test_hooks_of_the_app_and_of_a_blueprint_run_in_flasks_order(app, user_key):
    calls = []
    extra = Blueprint("extra", __name__)

    @extra.route("/extra/<word>")
    def view(word):
        calls.append(("view", word, g.word))
        return {"word": word}

    app.url_value_preprocessor(lambda endpoint, values: calls.append(("app values", endpoint)))

    @extra.url_value_preprocessor
    def shout(endpoint, values):
        g.word = values["word"].upper()

    app.before_request(lambda: calls.append(("app before",)))
    extra.before_request(lambda: calls.append(("blueprint before",)))
    app.teardown_request(lambda error: calls.append(("app teardown", error)))
    extra.teardown_request(lambda error: calls.append(("blueprint teardown", error)))
    app.register_blueprint(extra)

    assert app.test_client().get("/extra/hello").get_json() == {"word": "hello"}
    assert calls == [
        ("app values", "extra.view"),
        ("app before",),
        ("blueprint before",),
        ("view", "hello", "HELLO"),
        ("blueprint teardown", None),
        ("app teardown", None),
    ]


@pytest.mark.sqlite_only
def test_a_before_request_answer_replaces_the_view(app, user_key):
    app.before_request(lambda: ("closed", 503) if request.path.startswith("/identity/") else None)
    response = app.test_client().get("/identity/anything", headers={"x-api-key": user_key})
    assert (response.status_code, response.get_data()) == (503, b"closed")


@pytest.mark.sqlite_only
def test_request_tearing_down_receivers_are_told_of_each_request(app, user_key):
    seen = []

    def receiver(sender, exc=None, **_):
        seen.append((sender, exc))

    with request_tearing_down.connected_to(receiver, app):
        app.test_client().get("/healthz")
    app.test_client().get("/healthz")  # disconnected: not told
    assert seen == [(app, None)]


@pytest.mark.sqlite_only
def test_plain_functions_run_as_they_are_and_coroutines_go_to_flasks_own_ensure_sync(app):
    def plain():
        return "plain"

    async def coroutine():
        return "coroutine"

    assert app.ensure_sync(plain) is plain
    # Flask's ensure_sync wraps coroutines with asgiref, which Flask's "async" extra installs and this
    # service does not: Flask says so, which shows the coroutine reached it.
    with pytest.raises(RuntimeError, match="async"):
        app.ensure_sync(coroutine)


@pytest.mark.sqlite_only
def test_the_key_is_read_from_x_api_key_and_the_caller_is_known_in_the_view(app, user_key):
    @auth.login_required
    def whoami():
        return {"key_id": current_caller().key_id, "token": auth.get_auth().token}

    app.add_url_rule("/whoami", "whoami", whoami)
    client = app.test_client()
    body = client.get("/whoami", headers={"x-api-key": user_key}).get_json()
    assert body["token"] == user_key and body["key_id"]
    assert client.get("/whoami", headers={"Authorization": f"ApiKey {user_key}"}).status_code == 401
    with app.test_request_context("/"):
        assert current_caller() is None
        assert auth.get_auth() is None
