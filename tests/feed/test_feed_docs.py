"""include_docs=true on GET /changes (contract, "Mirroring another instance"): every way of reading the feed
gives each entry its Identity as the key may read it now, and Feed-Head names the feed's end."""

import json

import pytest
from sqlalchemy import event

from identity import seed
from identity.storage.database import db
from tests.common.streams import headers_of, parse_events


def identity_of(client, key, identity_id):
    return client.get(f"/identity/{identity_id}", headers=headers_of(key)).json


def test_a_page_with_docs_carries_each_entrys_identity_as_get_answers_it(app, client, admin_key, user_key):
    created = [seed.create_identity(app, f"with doc {n}")["identity_id"] for n in range(3)]
    page = client.get("/changes?include_docs=true", headers=headers_of(user_key))
    assert page.status_code == 200
    assert [entry["doc"] for entry in page.json["data"]] == [identity_of(client, user_key, each) for each in created]
    plain = client.get("/changes", headers=headers_of(user_key))
    assert all("doc" not in entry for entry in plain.json["data"])
    assert int(page.headers["Feed-Head"]) == int(plain.headers["Feed-Head"]) == page.json["data"][-1]["seq"]


def test_the_doc_is_the_identity_as_it_is_now_not_as_it_was_at_the_entry(app, client, admin_key):
    identity_id = seed.create_identity(app, "changes later")["identity_id"]
    client.patch(f"/identity/{identity_id}", json={"num_positions": 4, "vault_id": "9"}, headers=headers_of(admin_key))
    created, changed = client.get("/changes?include_docs=true", headers=headers_of(admin_key)).json["data"]
    assert created["kind"] == "created" and created["doc"] == changed["doc"]
    assert (created["doc"]["num_positions"], created["doc"]["vault_id"]) == (4, "9")


def test_a_removed_identitys_doc_is_shown_to_an_admin_key_only(app, client, admin_key, user_key):
    removed, kept = (seed.create_identity(app, name)["identity_id"] for name in ("taken down", "kept"))
    assert client.patch(f"/identity/{removed}", json={"status": "removed"}, headers=headers_of(admin_key)).status_code == 200
    for key, shown in ((admin_key, {removed, kept}), (user_key, {kept})):
        for feed in ("normal", "longpoll"):
            entries = client.get(f"/changes?include_docs=true&feed={feed}", headers=headers_of(key)).json["data"]
            assert {entry["identity_id"] for entry in entries if "doc" in entry} == shown
    admin = client.get("/changes?include_docs=true", headers=headers_of(admin_key)).json["data"]
    assert admin[-1]["doc"]["status"] == "removed"
    user = client.get("/changes?include_docs=true", headers=headers_of(user_key)).json["data"]
    assert set(user[0]) == {"seq", "identity_id", "at", "kind"}


def test_the_event_stream_and_the_long_poll_carry_docs_too(app, client, admin_key):
    created = [seed.create_identity(app, f"streamed {n}")["identity_id"] for n in range(3)]
    response = client.get("/changes?feed=eventsource&include_docs=true&timeout=300", headers=headers_of(admin_key))
    events, _ = parse_events(response.get_data(as_text=True))
    polled = client.get("/changes?include_docs=true", headers=headers_of(admin_key)).json["data"]
    assert [json.loads(each["data"]) for each in events] == polled
    assert [entry["doc"]["identity_id"] for entry in polled] == created
    assert int(response.headers["Feed-Head"]) == polled[-1]["seq"]
    longpoll = client.get(f"/changes?feed=longpoll&include_docs=true&after={polled[0]['seq']}", headers=headers_of(admin_key))
    assert longpoll.json["data"] == polled[1:] and int(longpoll.headers["Feed-Head"]) == polled[-1]["seq"]
    # Without docs, the stream is as it was: no doc in any event.
    plain, _ = parse_events(client.get("/changes?feed=eventsource&timeout=300", headers=headers_of(admin_key)).get_data(as_text=True))
    assert all("doc" not in json.loads(each["data"]) for each in plain)


def test_docs_are_read_in_one_statement_per_page_whatever_its_length(app, client, admin_key):
    for n in range(40):
        seed.create_identity(app, f"many {n}")
    statements = []

    def count(conn, cursor, statement, parameters, context, executemany):
        statements.append(statement)

    with app.app_context():
        engine = db.engine
    client.get("/changes?include_docs=true&limit=1", headers=headers_of(admin_key))  # the key's first lookup
    event.listen(engine, "before_cursor_execute", count)
    try:
        counts = []
        for limit in (1, 40):
            statements.clear()
            assert len(client.get(f"/changes?include_docs=true&limit={limit}", headers=headers_of(admin_key)).json["data"]) == limit
            counts.append(len(statements))
    finally:
        event.remove(engine, "before_cursor_execute", count)
    assert counts[0] == counts[1]


@pytest.mark.parametrize("value", ["maybe", "2"])
def test_include_docs_that_is_not_a_boolean_is_400_naming_it(client, admin_key, value):
    answer = client.get(f"/changes?include_docs={value}", headers=headers_of(admin_key))
    assert answer.status_code == 400 and "include_docs" in answer.json["errors"]
