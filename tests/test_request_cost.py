"""What one request costs, counted rather than timed: statements sent, hooks run, bodies dumped.

Per-request work that is the same for every request is done once, and what must be done per
request is done once per request. Speed itself is measured by `make bench`, never asserted here.
"""

import pytest
from sqlalchemy import event

from identity.extensions import db
from identity.schemas import identity_schema


@pytest.fixture
def statements(app):
    """The SQL statements the app sends from now on, as sent (BEGIN and the like included)."""
    sent = []
    with app.app_context():
        engine = db.engine

    def record(_connection, _cursor, statement, *_):
        sent.append(" ".join(statement.split()))

    event.listen(engine, "before_cursor_execute", record)
    yield sent
    event.remove(engine, "before_cursor_execute", record)


@pytest.fixture
def fetched(client, create, user_key):
    """An identity's path, fetched once already: the key is looked up, cached, its last_login recorded."""
    path = f"/identity/{create({'display_name': 'Counted'}).get_json()['identity_id']}"
    assert client.get(path, headers={"x-api-key": user_key}).status_code == 200
    return path


def counting(calls, name, function):
    def counted(*args, **kwargs):
        calls.append(name)
        return function(*args, **kwargs)

    return counted


def test_a_get_with_a_cached_key_sends_one_statement(client, user_key, fetched, statements):
    response = client.get(fetched, headers={"x-api-key": user_key})

    assert response.status_code == 200
    assert len(statements) == 1, statements
    assert statements[0].startswith("SELECT identities.id") and "JOIN users" in statements[0]


def test_a_get_of_an_unknown_id_with_a_cached_key_sends_one_statement(client, user_key, fetched, statements):
    unknown = "/identity/did:identity:ipfs:bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku"
    assert client.get(unknown, headers={"x-api-key": user_key}).status_code == 404
    assert len(statements) == 1, statements


def test_a_get_with_a_key_not_yet_cached_adds_only_the_key_lookup(app, client, user_key, fetched, statements):
    app.extensions["identity_key_cache"].clear()  # as when the cache's time is up

    assert client.get(fetched, headers={"x-api-key": user_key}).status_code == 200
    assert len(statements) == 2, statements
    assert "FROM api_keys JOIN users" in statements[0]


def test_a_get_dumps_the_identity_once_and_encodes_one_body(app, client, user_key, fetched, monkeypatch):
    calls = []
    monkeypatch.setattr(identity_schema, "dump", counting(calls, "schema dump", identity_schema.dump))
    monkeypatch.setattr(app.json, "dumps", counting(calls, "JSON encoding", app.json.dumps))

    assert client.get(fetched, headers={"x-api-key": user_key}).status_code == 200
    assert calls == ["schema dump", "JSON encoding"]


def test_a_get_runs_each_request_hook_once(app, client, user_key, fetched, monkeypatch):
    calls, registered = [], []
    for hooks in (app.before_request_funcs, app.after_request_funcs, app.teardown_request_funcs):
        for scope, functions in list(hooks.items()):
            registered += [function.__qualname__ for function in functions]
            monkeypatch.setitem(hooks, scope, [counting(calls, f.__qualname__, f) for f in functions])

    assert client.get(fetched, headers={"x-api-key": user_key}).status_code == 200
    assert sorted(calls) == sorted(registered)
    # When it began, and (the API blueprint's) whether the schema is migrated; on the way out its headers
    # (rate limit, nosniff, request id), its metrics and its access line. (The database session ends with
    # the app context, in Flask-SQLAlchemy's teardown.)
    assert calls == [
        "mark_start", "refuse_until_migrated",
        "send_headers", "observe", "add_security_headers", "send_request_id", "log_access",
    ]
