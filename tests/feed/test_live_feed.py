"""The live forms of GET /changes through the app: feed=longpoll and feed=eventsource (contract, "Live changes").

These run in one process with the Flask test client; tests/feed/test_live_feed_servers.py runs them on
real gunicorn processes and nodes.
"""

import json
import threading
import time

import pytest
from sqlalchemy import event, update

from identity import seed
from identity.core import keys
from identity.feed import live
from identity.storage.database import db
from identity.storage.models import ApiKey
from tests.common.apps import ADMIN_WALLET, make_app
from tests.common.streams import headers_of, parse_events

EVENT_STREAM = "text/event-stream"
# A generous bound for "answered because an entry committed": far below the long poll's own timeout.
PUSHED_WITHIN = 10






def create_many(app, count, prefix="live"):
    return [seed.create_identity(app, f"{prefix} {n}")["identity_id"] for n in range(count)]


def wait_for_holder(app, key_id):
    """Block until the hub counts a stream or long poll of `key_id` (it is then waiting or about to)."""
    hub = app.extensions[live.EXTENSION]
    deadline = time.monotonic() + PUSHED_WITHIN
    while not any(holder[0] == key_id for holder in list(hub.holders)):
        assert time.monotonic() < deadline, "the long poll never started waiting"
        time.sleep(0.01)


def seqs(client, key):
    """The sequence numbers of the log, by the polling feed (PostgreSQL's do not restart at 1 for each test)."""
    return [entry["seq"] for entry in client.get("/changes?limit=1000", headers=headers_of(key)).json["data"]]


def key_id_of(app, key):
    with app.app_context():
        return next(api_key.id for api_key in keys.all_keys() if key.startswith(api_key.hint))


def test_longpoll_answers_at_once_when_entries_exist(app, client, admin_key):
    created = create_many(app, 3)
    first = seqs(client, admin_key)[0]
    page = client.get(f"/changes?feed=longpoll&after={first}", headers=headers_of(admin_key)).json
    assert [entry["identity_id"] for entry in page["data"]] == created[1:]
    assert page["next_after"] == page["data"][-1]["seq"]


def test_longpoll_times_out_with_an_empty_page_whose_next_after_is_after(app, client, admin_key):
    create_many(app, 2)
    last = seqs(client, admin_key)[-1]
    response = client.get(f"/changes?feed=longpoll&after={last}&timeout=200", headers=headers_of(admin_key))
    assert response.status_code == 200
    assert response.json == {"data": [], "next_after": last}


def test_longpoll_answers_when_an_entry_commits_while_it_waits(app, client, admin_key):
    create_many(app, 1)
    last = seqs(client, admin_key)[-1]
    answers = []
    waiting = threading.Thread(target=lambda: answers.append(
        client.get(f"/changes?feed=longpoll&after={last}&timeout=60000", headers=headers_of(admin_key))
    ))
    started = time.monotonic()
    waiting.start()
    wait_for_holder(app, key_id_of(app, admin_key))
    identity_id = create_many(app, 1, "while waiting")[0]
    waiting.join(PUSHED_WITHIN)
    assert not waiting.is_alive() and time.monotonic() - started < PUSHED_WITHIN
    assert [entry["identity_id"] for entry in answers[0].json["data"]] == [identity_id]
    assert answers[0].json["next_after"] == seqs(client, admin_key)[-1] > last


def test_eventsource_sends_one_event_per_entry_with_id_event_and_data(app, client, admin_key):
    created = create_many(app, 3)
    response = client.get("/changes?feed=eventsource&timeout=300", headers=headers_of(admin_key))
    assert response.status_code == 200
    assert response.mimetype == EVENT_STREAM
    assert response.headers["Cache-Control"] == "no-store"
    events, _ = parse_events(response.get_data(as_text=True))
    polled = client.get("/changes", headers=headers_of(admin_key)).json["data"]
    assert [event["id"] for event in events] == [str(entry["seq"]) for entry in polled]
    assert {event["event"] for event in events} == {"change"}
    assert [json.loads(event["data"]) for event in events] == polled
    assert [entry["identity_id"] for entry in polled] == created


def test_accept_event_stream_without_feed_is_the_event_stream(app, client, admin_key):
    create_many(app, 1)
    response = client.get("/changes?timeout=100", headers=headers_of(admin_key, Accept=EVENT_STREAM))
    assert response.mimetype == EVENT_STREAM
    assert [event["id"] for event in parse_events(response.get_data(as_text=True))[0]] == [str(seqs(client, admin_key)[0])]
    plain = client.get("/changes", headers=headers_of(admin_key, Accept="*/*"))
    assert plain.mimetype == "application/json"


def test_last_event_id_resumes_after_it_whatever_after_says(app, client, admin_key):
    create_many(app, 4)
    log = seqs(client, admin_key)
    response = client.get("/changes?feed=eventsource&after=0&timeout=100",
                          headers=headers_of(admin_key, **{"Last-Event-ID": str(log[1])}))
    assert [int(event["id"]) for event in parse_events(response.get_data(as_text=True))[0]] == log[2:]


def test_heartbeat_comments_keep_an_idle_stream_alive(app, client, admin_key):
    response = client.get("/changes?feed=eventsource&heartbeat=1000&timeout=2500", headers=headers_of(admin_key))
    events, comments = parse_events(response.get_data(as_text=True))
    assert events == []
    assert comments.count("heartbeat") == 2


def test_stream_sends_entries_committed_while_it_is_open(app, client, admin_key):
    response = client.get("/changes?feed=eventsource&timeout=60000", headers=headers_of(admin_key), buffered=False)
    chunks = iter(response.response)
    assert next(chunks).decode() == ": ok\n"
    created = create_many(app, 2, "while streaming")
    received = []
    while len(received) < 2:
        received += parse_events(next(chunks).decode())[0]
    response.close()
    assert [json.loads(event["data"])["identity_id"] for event in received] == created


def test_removed_identitys_entries_are_redacted_for_a_user_key_in_both_live_feeds(app, client, admin_key, user_key):
    identity_id = create_many(app, 1)[0]
    seed.set_status(app, identity_id, "removed")
    for key, shown_keys in ((user_key, {"seq", "identity_id", "at", "kind"}), (admin_key, {"seq", "identity_id", "at",
                                                                                    "wallet", "kind", "fields"})):
        polled = client.get("/changes", headers=headers_of(key)).json["data"]
        longpolled = client.get("/changes?feed=longpoll", headers=headers_of(key)).json["data"]
        streamed = client.get("/changes?feed=eventsource&timeout=100", headers=headers_of(key))
        events = [json.loads(event["data"]) for event in parse_events(streamed.get_data(as_text=True))[0]]
        assert polled == longpolled == events
        assert [set(entry) for entry in events] == [shown_keys, shown_keys]


def test_stream_entries_of_an_identity_removed_later_are_redacted_as_the_poll_redacts_them(app, client, user_key):
    # The first entry reaches the hub while its identity is complete; the removal comes later.
    identity_id = create_many(app, 1)[0]
    client.get("/changes?feed=longpoll&timeout=0", headers=headers_of(user_key))  # starts the hub
    hub = app.extensions[live.EXTENSION]
    seed.set_status(app, identity_id, "removed")
    assert hub.wait(seqs(client, user_key)[0], PUSHED_WITHIN)
    streamed = client.get("/changes?feed=eventsource&timeout=100", headers=headers_of(user_key))
    events = [json.loads(event["data"]) for event in parse_events(streamed.get_data(as_text=True))[0]]
    assert events == client.get("/changes", headers=headers_of(user_key)).json["data"]
    assert "wallet" not in events[0]


@pytest.mark.parametrize("app_config", [{"IDENTITY_MAX_STREAMS_PER_KEY": 2}])
def test_one_stream_more_than_the_cap_is_429_and_a_closed_one_frees_its_place(client, admin_key, user_key):
    def open_stream(key):
        return client.get("/changes?feed=eventsource", headers=headers_of(key), buffered=False)

    held = [open_stream(admin_key), open_stream(admin_key)]
    refused = open_stream(admin_key)
    assert refused.status_code == 429
    assert refused.mimetype == "application/problem+json"
    assert "IDENTITY_MAX_STREAMS_PER_KEY" in refused.json["detail"]
    longpoll = client.get("/changes?feed=longpoll&timeout=0", headers=headers_of(admin_key))
    assert longpoll.status_code == 429
    by_user = open_stream(user_key)
    assert by_user.status_code == 200  # the cap is per key
    # Closed last opened first: the test client's streamed responses share this thread's context stack.
    by_user.close()
    held.pop().close()
    again = open_stream(admin_key)
    assert again.status_code == 200
    again.close()
    held.pop().close()


@pytest.mark.parametrize(
    ("query", "headers", "named"),
    [
        ("feed=websocket", {}, "feed"),
        ("feed=longpoll&timeout=60001", {}, "timeout"),
        ("feed=eventsource&heartbeat=999", {}, "heartbeat"),
        ("feed=eventsource", {"Last-Event-ID": "forty-two"}, "Last-Event-ID"),
        ("feed=eventsource", {"Last-Event-ID": str(2**53)}, "Last-Event-ID"),
    ],
)
def test_invalid_live_feed_parameters_are_400_naming_each(client, admin_key, query, headers, named):
    response = client.get(f"/changes?{query}", headers=headers_of(admin_key, **headers))
    assert response.status_code == 400
    assert response.mimetype == "application/problem+json"
    assert named in response.json["errors"]


def read_until_the_end(response, within):
    """Iterate a streamed response (in this thread: its context is this thread's) until it ends; the chunks.

    Each chunk comes within a heartbeat, so a stream still open after `within` seconds fails the test.
    """
    chunks, deadline = [], time.monotonic() + within
    for chunk in response.response:
        chunks.append(chunk.decode())
        assert time.monotonic() < deadline, "the stream did not end"
    return chunks


@pytest.mark.parametrize("app_config", [{"IDENTITY_KEY_CACHE_SECONDS": 1}])
def test_a_revoked_keys_stream_ends(app, client, issue_key):
    key = issue_key(ADMIN_WALLET, "Admin")
    response = client.get("/changes?feed=eventsource&heartbeat=1000", headers=headers_of(key), buffered=False)
    chunks = iter(response.response)
    assert [next(chunks).decode() for _ in range(3)] == [": ok\n", ": heartbeat\n", ": heartbeat\n"]
    with app.app_context():
        keys.revoke_key(key_id=key_id_of(app, key))
    read_until_the_end(response, PUSHED_WITHIN)


def test_end_streams_ends_open_streams_and_answers_long_polls_at_once(app, client, admin_key):
    stream = client.get("/changes?feed=eventsource&heartbeat=1000", headers=headers_of(admin_key), buffered=False)
    answers = []
    waiting = threading.Thread(target=lambda: answers.append(
        client.get("/changes?feed=longpoll&timeout=60000", headers=headers_of(admin_key))
    ))
    waiting.start()
    wait_for_holder(app, key_id_of(app, admin_key))
    live.end_streams()
    assert read_until_the_end(stream, 0.9) == [": ok\n"]  # before its first heartbeat
    waiting.join(PUSHED_WITHIN)
    assert answers[0].json == {"data": [], "next_after": 0}


def test_waiting_clients_are_woken_by_one_fetch_not_one_query_each(app, client, admin_key):
    live.hub_of(app)
    streams = 8
    ready, received = threading.Barrier(streams + 1), []

    def follow():  # each stream in a thread of its own: a streamed response's context is its thread's
        response = client.get("/changes?feed=eventsource&timeout=30000", headers=headers_of(admin_key),
                              buffered=False)
        chunks = iter(response.response)
        next(chunks)  # ": ok"
        ready.wait()
        received.append(parse_events(next(chunks).decode())[0][0]["id"])
        response.close()

    followers = [threading.Thread(target=follow) for _ in range(streams)]
    for thread in followers:
        thread.start()
    reads = []

    def count_reads_of_the_log(conn, cursor, statement, parameters, context, executemany):
        if "FROM identity_changes" in statement:
            reads.append(statement)

    with app.app_context():
        engine = db.engine
    ready.wait()
    event.listen(engine, "before_cursor_execute", count_reads_of_the_log)
    try:
        create_many(app, 1, "fan out")
        for thread in followers:
            thread.join(PUSHED_WITHIN)
    finally:
        event.remove(engine, "before_cursor_execute", count_reads_of_the_log)
    assert received == [str(seqs(client, admin_key)[0])] * streams
    assert 1 <= len(reads) < streams // 2


@pytest.mark.parametrize(
    # No key cache: each stream's key is looked up, in its request's session.
    "app_config", [{"IDENTITY_DB_POOL_SIZE": 2, "IDENTITY_DB_MAX_OVERFLOW": 0, "IDENTITY_DB_POOL_TIMEOUT": 1,
                    "IDENTITY_KEY_CACHE_SECONDS": 0}],
)
def test_open_streams_hold_no_pooled_connection(client, admin_key):
    streams = [client.get("/changes?feed=eventsource", headers=headers_of(admin_key), buffered=False)
               for _ in range(6)]
    for stream in streams:
        assert next(iter(stream.response)) == b": ok\n"
    # Three times the pool: a stream that kept its connection would leave this read none (503).
    assert client.get("/changes?limit=1", headers=headers_of(admin_key)).status_code == 200
    for stream in reversed(streams):  # last opened first: they share this thread's context stack
        stream.close()


def test_the_openapi_document_describes_both_live_feeds_the_event_stream_and_last_event_id(client):
    document = client.get("/openapi.json").json
    operation = document["paths"]["/changes"]["get"]
    assert operation["operationId"] == "listChanges"
    parameters = {(parameter["in"], parameter["name"]): parameter for parameter in operation["parameters"]}
    assert parameters[("query", "feed")]["schema"]["enum"] == ["normal", "longpoll", "eventsource"]
    assert parameters[("query", "timeout")]["schema"]["maximum"] == 60_000
    assert parameters[("query", "heartbeat")]["schema"]["minimum"] == 1_000
    assert parameters[("header", "Last-Event-ID")]["schema"]["maximum"] == 2**53 - 1
    content = operation["responses"]["200"]["content"]
    assert set(content) == {"application/json", "text/event-stream"}
    event = content["text/event-stream"]
    assert event["schema"]["properties"]["data"]["contentSchema"] == {"$ref": "#/components/schemas/Change"}
    assert json.loads(event["example"]["data"])["seq"] == int(event["example"]["id"])
    too_many = operation["responses"]["429"]["$ref"].rsplit("/", 1)[1]
    assert "IDENTITY_MAX_STREAMS_PER_KEY" in document["components"]["responses"][too_many]["description"]


def test_a_commit_through_another_app_on_the_same_database_wakes_a_long_poll(app, client, admin_key, database_url):
    # Another app has a hub of its own, which this one's commits do not wake: as another process, it
    # learns of them from the database (SQLite's data_version, PostgreSQL's notifications).
    other = make_app(database_url)
    try:
        create_many(other, 1, "before")
        last = seqs(client, admin_key)[-1]
        answers = []
        waiting = threading.Thread(target=lambda: answers.append(
            client.get(f"/changes?feed=longpoll&after={last}&timeout=60000", headers=headers_of(admin_key))
        ))
        waiting.start()
        wait_for_holder(app, key_id_of(app, admin_key))
        identity_id = create_many(other, 1, "through the other app")[0]
        waiting.join(PUSHED_WITHIN)
        assert not waiting.is_alive()
        assert [entry["identity_id"] for entry in answers[0].json["data"]] == [identity_id]
    finally:
        live.stop(other)
        with other.app_context():
            db.engine.dispose()


@pytest.mark.sqlite_only
def test_a_replay_right_after_a_take_down_elsewhere_shows_the_removed_identitys_entries_redacted(
    app, client, user_key, database_url, monkeypatch
):
    """The hub of this process keeps each buffered entry with its identity's status as of its last fetch. A
    take-down committed by another process that the hub has not fetched yet must still redact a replay that
    comes after it (here the hub looks at the file once a minute, so it has certainly not)."""
    monkeypatch.setattr(live, "WATCH_SECONDS", 60)
    assert client.get("/changes?feed=longpoll&timeout=0", headers=headers_of(user_key)).status_code == 200
    hub = app.extensions[live.EXTENSION]  # started before the entries: it keeps them as they come
    identity_id = create_many(app, 1)[0]
    seed.set_status(app, identity_id, "pending")  # a second, `changed`, entry; both wake this process's hub
    assert hub.wait(max(seqs(client, user_key)) - 1, PUSHED_WITHIN)
    assert hub.read(0, 10) is not None  # it holds both entries, whole
    elsewhere = make_app(database_url)
    seed.set_status(elsewhere, identity_id, "removed")

    streamed = client.get("/changes?feed=eventsource&timeout=100", headers=headers_of(user_key))

    events = [json.loads(event["data"]) for event in parse_events(streamed.get_data(as_text=True))[0]]
    assert [set(entry) for entry in events] == [{"seq", "identity_id", "at", "kind"}] * 3
    assert events == client.get("/changes", headers=headers_of(user_key)).json["data"]


@pytest.mark.parametrize("app_config", [{"IDENTITY_KEY_CACHE_SECONDS": 1}])
def test_a_read_only_keys_long_poll_ends_when_the_key_is_revoked_and_the_key_check_lives_on(app, client, caplog):
    """The hub checks again, outside any request, the keys of the clients it holds; a read-only key's check
    must not need a request (it once died with "Working outside of request context")."""
    with app.app_context():
        key, api_key = keys.issue_key("0x" + "2" * 40, scope="read")
    answered = []
    poller = threading.Thread(target=lambda: answered.append(
        client.get("/changes?feed=longpoll&timeout=30000", headers=headers_of(key))))
    started = time.monotonic()
    poller.start()
    wait_for_holder(app, api_key.id)
    time.sleep(live.KEY_CHECK_SECONDS * 1.5)  # the key is checked once at least while it is still good
    with app.app_context():
        assert keys.revoke_key(key_id=api_key.id) == 1

    poller.join(PUSHED_WITHIN * 2)

    assert answered and answered[0].status_code == 200
    assert time.monotonic() - started < PUSHED_WITHIN * 2  # not the long poll's 30 s
    hub = app.extensions[live.EXTENSION]
    assert all(thread.is_alive() for thread in hub.threads)
    assert not [record for record in caplog.records if "request context" in record.getMessage()]


def narrow(app, wallet, key_id, change):
    """Take from the key `key_id` of `wallet` what its stream was opened with."""
    with app.app_context():
        if change == "demoted":
            keys.issue_key(wallet, "User")  # a known wallet's key issued with a role: the user's new role
        else:  # no route narrows a key's scope; the stream must follow the row all the same
            db.session.execute(update(ApiKey).where(ApiKey.id == key_id).values(scope="read"))
            db.session.commit()


@pytest.mark.parametrize("app_config", [{"IDENTITY_KEY_CACHE_SECONDS": 1}])
@pytest.mark.parametrize("change", ["demoted", "scope narrowed"])
def test_a_stream_ends_when_its_keys_user_loses_the_admin_role_or_its_scope_narrows(app, client, issue_key, change):
    key = issue_key(ADMIN_WALLET, "Admin")
    response = client.get("/changes?feed=eventsource&heartbeat=1000", headers=headers_of(key), buffered=False)
    assert next(iter(response.response)) == b": ok\n"
    narrow(app, ADMIN_WALLET, key_id_of(app, key), change)
    read_until_the_end(response, PUSHED_WITHIN)


@pytest.mark.parametrize("app_config", [{"IDENTITY_KEY_CACHE_SECONDS": 1}])
@pytest.mark.parametrize("change", ["demoted", "scope narrowed"])
def test_a_long_poll_answers_when_its_keys_user_loses_the_admin_role_or_its_scope_narrows(app, client, issue_key,
                                                                                         change):
    key = issue_key(ADMIN_WALLET, "Admin")
    answered = []
    poller = threading.Thread(target=lambda: answered.append(
        client.get("/changes?feed=longpoll&timeout=60000", headers=headers_of(key))))
    started = time.monotonic()
    poller.start()
    wait_for_holder(app, key_id_of(app, key))
    narrow(app, ADMIN_WALLET, key_id_of(app, key), change)
    poller.join(PUSHED_WITHIN * 2)
    assert answered and answered[0].status_code == 200 and answered[0].json["data"] == []
    assert time.monotonic() - started < PUSHED_WITHIN * 2  # not the long poll's 60 s
