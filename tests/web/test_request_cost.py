"""What one request costs, counted rather than timed: statements sent, hooks run, bodies dumped.

Per-request work that is the same for every request is done once, and what must be done per
request is done once per request. Speed itself is measured by `make bench`, never asserted here.
"""

import orjson
import psycopg
import pytest
from sqlalchemy import event

from identity.core import keys
from identity.schemas import identity_schema
from identity.storage.database import db


@pytest.fixture
def statements(app):
    """The SQL statements the app's database driver runs from now on (BEGIN and the like included),
    whichever way they reach it: through SQLAlchemy's Connection, or on a pooled DBAPI connection."""
    sent = []
    with app.app_context():
        engine = db.engine

    def record(statement):
        sent.append(" ".join(str(statement).split()))

    def watch(dbapi_connection, _record, _proxy):
        if engine.dialect.name == "sqlite":
            dbapi_connection.set_trace_callback(record)
        else:
            dbapi_connection.cursor_factory = counting_cursor(record)

    def unwatch(dbapi_connection, _record):
        if engine.dialect.name == "sqlite":
            dbapi_connection.set_trace_callback(None)
        else:
            dbapi_connection.cursor_factory = psycopg.Cursor

    event.listen(engine, "checkout", watch)
    event.listen(engine, "checkin", unwatch)
    # Every connection is checked out afresh, under watch: the pool's, and the one a process keeps for
    # SQLite's one-statement reads (statements.HeldReads), which is released with the pool.
    engine.dispose()
    yield sent
    event.remove(engine, "checkout", watch)
    event.remove(engine, "checkin", unwatch)


def counting_cursor(record):
    """A psycopg cursor class that records each statement it executes (psycopg has no trace callback)."""

    class Counting(psycopg.Cursor):
        def execute(self, query, params=None, **kwargs):
            record(query)
            return super().execute(query, params, **kwargs)

    return Counting


@pytest.fixture
def fetched(client, create, user_key):
    """An identity's path, fetched once already: the key is looked up and cached, its use noted."""
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
    with app.app_context():
        keys.forget_keys()  # as when the cache's time is up

    assert client.get(fetched, headers={"x-api-key": user_key}).status_code == 200
    assert len(statements) == 2, statements
    assert "FROM api_keys JOIN users" in statements[0]


def test_a_get_dumps_the_identity_once_and_encodes_one_body(app, client, user_key, create, monkeypatch):
    path = f"/identity/{create({'display_name': 'Dumped once'}).get_json()['identity_id']}"
    calls = []
    monkeypatch.setattr(identity_schema, "dump", counting(calls, "schema dump", identity_schema.dump))
    monkeypatch.setattr(orjson, "dumps", counting(calls, "JSON encoding", orjson.dumps))

    first = client.get(path, headers={"x-api-key": user_key})
    assert first.status_code == 200
    assert calls == ["schema dump", "JSON encoding"]


def test_a_get_of_an_unchanged_identity_reuses_its_body_and_a_change_makes_a_new_one(
    app, client, user_key, admin_key, fetched, monkeypatch
):
    calls = []
    monkeypatch.setattr(identity_schema, "dump", counting(calls, "schema dump", identity_schema.dump))
    first = client.get(fetched, headers={"x-api-key": user_key})
    again = client.get(fetched, headers={"x-api-key": user_key})
    assert calls == []  # the same row as the fetch before: its body was made once
    assert again.data == first.data and again.headers["ETag"] == first.headers["ETag"]

    patched = client.patch(fetched, json={"num_positions": 7}, headers={"x-api-key": admin_key})
    assert patched.status_code == 200, patched.get_json()
    calls.clear()  # the PATCH's own answer
    changed = client.get(fetched, headers={"x-api-key": user_key})
    assert calls == ["schema dump"]  # a new row, a new body
    assert changed.get_json()["num_positions"] == 7 and changed.headers["ETag"] != first.headers["ETag"]


def test_a_get_runs_each_request_hook_once(app, client, user_key, fetched, monkeypatch):
    calls, registered = [], []
    for hooks in (app.before_request_funcs, app.after_request_funcs, app.teardown_request_funcs):
        for scope, functions in list(hooks.items()):
            if scope not in (None, "identities"):  # another blueprint's (the console's) hooks serve only its pages
                continue
            registered += [function.__qualname__ for function in functions]
            monkeypatch.setitem(hooks, scope, [counting(calls, f.__qualname__, f) for f in functions])

    assert client.get(fetched, headers={"x-api-key": user_key}).status_code == 200
    assert sorted(calls) == sorted(registered)
    # (The API blueprint's) whether the schema is migrated, then what the view declared with access (the key,
    # its budget); on the way out, one hook for its headers (rate limit, nosniff, request id), its metrics and
    # its access line. When it began is noted by the request object as it is made (identity.web.hooks), and
    # the database session ends with the app context, in Flask-SQLAlchemy's teardown.
    assert calls == ["refuse_until_migrated", "check_access", "finish_response"]
