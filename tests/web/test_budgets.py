"""Rate limits per API key: reads and writes have budgets, named by the key's id."""

import http.client
import os
import shutil
import sqlite3
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests

from identity.config import settings_from_env
from tests.common.apps import ADMIN_WALLET, OTHER_WALLET, USER_WALLET
from tests.common.live import LiveServer, free_port


@pytest.fixture
def app_config():
    return {"IDENTITY_RATELIMIT_CREATE": "5/minute", "IDENTITY_RATELIMIT_READ": "3/minute"}


def creates(client, key, count, path="/identity", prefix="n"):
    return [
        client.post(path, json={"display_name": f"{prefix} {i}"}, headers={"x-api-key": key}) for i in range(count)
    ]


def reads(client, key, count, path="/identity/did:identity:ipfs:x"):
    return [client.get(path, headers={"x-api-key": key}) for _ in range(count)]


def assert_refused_for_rate(response, limit):
    assert response.status_code == 429
    assert response.mimetype == "application/problem+json"
    body = response.get_json()
    assert body["status"] == 429 and body["title"] == "Too Many Requests"
    assert limit in body["detail"]
    assert 0 < int(response.headers["Retry-After"]) <= 60
    assert response.headers["X-RateLimit-Limit"] == limit.split("/")[0]
    assert response.headers["X-RateLimit-Remaining"] == "0"
    assert int(response.headers["X-RateLimit-Reset"]) > time.time()


def test_seven_creates_with_a_limit_of_five_a_minute_give_two_429s(client, user_key):
    responses = creates(client, user_key, 7)
    assert [r.status_code for r in responses] == [201] * 5 + [429] * 2
    for response in responses[5:]:
        assert_refused_for_rate(response, "5/minute")


def test_previews_keys_webhooks_and_mirrors_spend_the_write_budget_and_the_429_names_it(client, admin_key):
    headers = {"x-api-key": admin_key}
    spent = [
        client.post("/identity/preview", json={"display_name": "Previewed"}, headers=headers),
        client.post("/keys", json={"wallet": OTHER_WALLET}, headers=headers),
        client.post("/webhooks", json={"url": "https://hooks.example.com/budget"}, headers=headers),
        client.post("/mirrors", json={"url": "https://upstream.example.org", "key": "idsk_x"}, headers=headers),
        client.post("/identity", json={"display_name": "Created"}, headers=headers),
    ]
    assert [r.status_code for r in spent] == [200, 201, 201, 201, 201]
    refused = client.post("/identity/preview", json={"display_name": "One too many"}, headers=headers)
    assert_refused_for_rate(refused, "5/minute")
    detail = refused.get_json()["detail"]
    assert "Too many writes" in detail and "the write budget, IDENTITY_RATELIMIT_CREATE" in detail


def test_allowed_requests_say_how_much_is_left(client, user_key):
    responses = creates(client, user_key, 3)
    assert [r.headers["X-RateLimit-Remaining"] for r in responses] == ["4", "3", "2"]
    assert {r.headers["X-RateLimit-Limit"] for r in responses} == {"5"}
    assert all(int(r.headers["X-RateLimit-Reset"]) > time.time() for r in responses)
    # Retry-After asks a client to wait: only a refusal says it.
    assert not any("Retry-After" in r.headers for r in responses)


def test_reads_have_their_own_budget(client, user_key):
    assert [r.status_code for r in reads(client, user_key, 4)] == [404, 404, 404, 429]
    assert_refused_for_rate(reads(client, user_key, 1)[0], "3/minute")
    # Spent reads leave creates alone, and the other way round.
    assert creates(client, user_key, 1)[0].status_code == 201


def test_singular_and_plural_paths_spend_one_budget(client, user_key):
    statuses = [r.status_code for r in creates(client, user_key, 3, "/identity", "a")]
    statuses += [r.status_code for r in creates(client, user_key, 3, "/identities", "b")]
    assert statuses == [201] * 5 + [429]
    statuses = [r.status_code for r in reads(client, user_key, 2, "/identity/x") + reads(client, user_key, 2, "/identities/x")]
    assert statuses == [404, 404, 404, 429]


def test_one_keys_exhaustion_never_limits_another_key(client, issue_key, user_key):
    other_key = issue_key(OTHER_WALLET)
    second_key_of_same_user = issue_key(USER_WALLET)
    assert creates(client, user_key, 6)[-1].status_code == 429
    assert [r.status_code for r in creates(client, other_key, 5, prefix="other")] == [201] * 5
    assert [r.status_code for r in creates(client, second_key_of_same_user, 5, prefix="second")] == [201] * 5


@pytest.mark.parametrize("bad_key", [None, "", "idsk_" + "A" * 43])
def test_a_refused_key_gets_401_and_spends_no_budget(client, user_key, bad_key):
    headers = {} if bad_key is None else {"x-api-key": bad_key}
    for _ in range(10):
        response = client.post("/identity", json={"display_name": "x"}, headers=headers)
        assert response.status_code == 401
        assert "X-RateLimit-Remaining" not in response.headers
    assert [r.status_code for r in creates(client, user_key, 5)] == [201] * 5


def test_health_readiness_docs_and_metrics_are_never_limited(client, user_key):
    assert creates(client, user_key, 6)[-1].status_code == 429
    assert reads(client, user_key, 4)[-1].status_code == 429
    for path in ("/healthz", "/readyz", "/openapi.json", "/metrics"):
        for _ in range(20):
            response = client.get(path, headers={"x-api-key": user_key})
            assert response.status_code == 200, path
            assert "X-RateLimit-Limit" not in response.headers


def test_budgets_are_named_by_key_id_never_by_the_key(app, client, user_key):
    from sqlalchemy import select

    from identity.storage.database import db
    from identity.storage.models import ApiKey
    from identity.web.budgets import rate_limits

    creates(client, user_key, 1)
    reads(client, user_key, 1)
    with app.app_context():
        key_id = db.session.execute(select(ApiKey.id)).scalar_one()
    names = list(rate_limits(app).local.storage.storage)  # the limiter's in-memory storage: counter name -> count
    assert len(names) == 2
    assert all(key_id in name and user_key not in name for name in names)


@pytest.mark.parametrize("value", ["", "lots", "5 per fortnight", "-1/minute"])
def test_a_malformed_limit_setting_is_refused_at_start(value):
    if value == "":
        assert settings_from_env({"IDENTITY_RATELIMIT_CREATE": value})["IDENTITY_RATELIMIT_CREATE"] == "30/minute"
        return
    with pytest.raises(ValueError, match="IDENTITY_RATELIMIT_CREATE"):
        settings_from_env({"IDENTITY_RATELIMIT_CREATE": value})


def test_defaults():
    settings = settings_from_env({})
    assert settings["IDENTITY_RATELIMIT_READ"] == "120/minute"
    assert settings["IDENTITY_RATELIMIT_CREATE"] == "30/minute"
    assert settings["IDENTITY_RATELIMIT_STORAGE"] == "memory://"


def test_an_unreachable_shared_storage_falls_back_to_counting_in_the_process(database_path, user_key):
    from tests.common.apps import make_app

    app = make_app(
        database_path,
        IDENTITY_RATELIMIT_CREATE="5/minute",
        IDENTITY_RATELIMIT_STORAGE=f"redis://127.0.0.1:{free_port()}/0",  # nothing listens there
    )
    responses = creates(app.test_client(), user_key, 7)
    assert [r.status_code for r in responses] == [201] * 5 + [429] * 2


def test_seven_creates_a_minute_through_the_default_server_show_the_429(database_path, issue_key):
    """What a new user tries first: `make run` with a limit of 5/minute, then seven creates."""
    key = issue_key(ADMIN_WALLET, "Admin")
    server = LiveServer(f"sqlite:///{database_path}", workers=None, env={"IDENTITY_RATELIMIT_CREATE": "5/minute"}).start()
    try:
        responses = [
            requests.post(server.url + "/identity", json={"display_name": f"trial {i}"}, headers={"x-api-key": key}, timeout=30)
            for i in range(7)
        ]
    finally:
        server.stop()
    assert [r.status_code for r in responses] == [201] * 5 + [429] * 2
    assert responses[-1].headers["Content-Type"] == "application/problem+json"
    assert int(responses[-1].headers["Retry-After"]) > 0


def worker_pids(server):
    master = server.process.pid
    return {int(pid) for pid in Path(f"/proc/{master}/task/{master}/children").read_text().split()}


def serving_pid(server, connection, workers, timeout=10):
    """The worker that holds the server's end of `connection` (an open http.client one), once one
    has accepted it: /proc/net/tcp names the socket's inode by its two ports, /proc/PID/fd the
    process that has it open."""
    client_port = connection.sock.getsockname()[1]
    deadline = time.monotonic() + timeout
    while True:
        inodes = set()
        for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
            fields = line.split()
            ports = int(fields[1].rsplit(":", 1)[1], 16), int(fields[2].rsplit(":", 1)[1], 16)
            if ports == (server.port, client_port):
                inodes.add(f"socket:[{fields[9]}]")
        holders = set()
        for pid in workers:
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                try:
                    if os.readlink(fd) in inodes:
                        holders.add(pid)
                except OSError:
                    pass  # closed meanwhile
        if holders or time.monotonic() > deadline:
            [pid] = holders
            return pid
        time.sleep(0.02)  # still in the listening socket's queue


def connections_to_each_worker(server, workers, timeout=30):
    """{worker pid: [open connections it accepted]}, at least one each: fresh connections are opened
    until every worker has accepted some (which one accepts a connection is up to the kernel)."""
    held = {pid: [] for pid in workers}
    deadline = time.monotonic() + timeout
    while not all(held.values()):
        assert time.monotonic() < deadline, f"a worker accepted no connection: {held}"
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        connection.connect()
        held[serving_pid(server, connection, workers)].append(connection)
        time.sleep(0.05)
    return held


def test_the_workers_of_one_server_share_a_keys_budget(database_path, issue_key):
    """memory:// counts through the file gunicorn.conf.py maps into every worker: exactly the limit,
    whichever worker serves."""
    key = issue_key(ADMIN_WALLET, "Admin")
    server = LiveServer(f"sqlite:///{database_path}", workers=2, env={"IDENTITY_RATELIMIT_READ": "20/minute"}).start()
    try:
        deadline = time.monotonic() + 20  # the first worker answers while the second still boots
        while len(workers := worker_pids(server)) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(workers) == 2
        held = connections_to_each_worker(server, workers)
        first, second = sorted(held)
        answers = []  # (status, X-RateLimit-Remaining, worker pid), the workers taking turns
        for turn in range(32):
            pid = (first, second)[turn % 2]
            # One busy client on each worker, the workers taking turns; the others stay idle.
            connection = held[pid][0]
            connection.request("GET", "/identity/x", headers={"x-api-key": key})
            response = connection.getresponse()
            response.read()
            answers.append((response.status, response.headers["X-RateLimit-Remaining"], pid))
            assert serving_pid(server, connection, workers) == pid  # the same connection, still there
        for connections in held.values():
            for connection in connections:
                connection.close()
    finally:
        server.stop()
    # One budget of 20 for both: 10 answers from each, counted down across them, then refusals from each.
    assert [status for status, _, _ in answers] == [404] * 20 + [429] * 12
    assert [remaining for _, remaining, _ in answers[:20]] == [str(left) for left in range(19, -1, -1)]
    assert {pid for _, _, pid in answers[20:]} == workers


REDIS_URL = os.environ.get("IDENTITY_TEST_REDIS_URL")


@pytest.mark.skipif(
    not REDIS_URL,
    reason="IDENTITY_TEST_REDIS_URL is unset: no Redis server to share counts through (.ci/run starts one)",
)
def test_workers_share_counts_through_redis(database_path, issue_key):
    import redis

    key = issue_key(ADMIN_WALLET, "Admin")
    server = LiveServer(
        f"sqlite:///{database_path}",
        workers=3,
        env={"IDENTITY_RATELIMIT_STORAGE": REDIS_URL, "IDENTITY_RATELIMIT_CREATE": "5/minute"},
    ).start()
    try:
        # Twelve at once: every worker gets some, so per-worker counting would let up to 15 through.
        def create(i):
            return requests.post(
                server.url + "/identity", json={"display_name": f"shared {i}"}, headers={"x-api-key": key}, timeout=30
            )

        with ThreadPoolExecutor(max_workers=12) as pool:
            responses = list(pool.map(create, range(12)))
    finally:
        server.stop()
    statuses = sorted(r.status_code for r in responses)
    assert statuses == [201] * 5 + [429] * 7
    refused = next(r for r in responses if r.status_code == 429)
    assert refused.headers["Content-Type"] == "application/problem+json"
    assert int(refused.headers["Retry-After"]) > 0
    assert refused.headers["X-RateLimit-Limit"] == "5" and refused.headers["X-RateLimit-Remaining"] == "0"
    with sqlite3.connect(database_path) as connection:
        key_id = connection.execute("SELECT id FROM api_keys").fetchone()[0]
    names = [name.decode() for name in redis.Redis.from_url(REDIS_URL).keys(f"*{key_id}*")]
    assert names and not any(key in name for name in names)


@pytest.mark.parametrize("app_config", [{"IDENTITY_RATELIMIT_CREATE": "2/second;5/minute"}])
def test_a_budget_of_several_limits_refuses_at_the_first_one_spent(client, user_key):
    responses = creates(client, user_key, 3)
    assert [r.status_code for r in responses] == [201, 201, 429]
    # Within both limits, the headers describe the smaller window; over one, the one that refused.
    assert responses[0].headers["X-RateLimit-Limit"] == "2" and responses[0].headers["X-RateLimit-Remaining"] == "1"
    assert_refused_for_rate(responses[2], "2/second;5/minute")
    assert responses[2].headers["X-RateLimit-Limit"] == "2"
    assert int(responses[2].headers["Retry-After"]) <= 1


def test_limited_error_responses_carry_the_headers_too(client, user_key):
    missing = reads(client, user_key, 1)[0]
    invalid = client.post("/identity", json={"nickname": "x"}, headers={"x-api-key": user_key})
    assert (missing.status_code, invalid.status_code) == (404, 422)
    assert missing.headers["X-RateLimit-Remaining"] == "2"  # reads: 3/minute
    assert invalid.headers["X-RateLimit-Remaining"] == "4"  # creates: 5/minute


@pytest.mark.skipif(not shutil.which("redis-server"), reason="redis-server is not installed (.ci/redis installs it)")
def test_counting_returns_to_the_shared_storage_when_it_answers_again(tmp_path, caplog):
    from identity.web.budgets import RateLimits

    port = free_port()
    counted = RateLimits({
        "IDENTITY_RATELIMIT_READ": "3/minute",
        "IDENTITY_RATELIMIT_CREATE": "3/minute",
        "IDENTITY_RATELIMIT_SIGNIN": "3/minute",
        "IDENTITY_RATELIMIT_STORAGE": f"redis://127.0.0.1:{port}/0",
    })
    # Nothing listens yet: counted in the process, and said once.
    assert [counted.spend("read", "key-1").remaining for _ in range(2)] == [2, 1]
    assert "rate limit storage unreachable" in caplog.text
    server = subprocess.Popen(
        ["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no",
         "--dir", str(tmp_path)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        import redis

        client = redis.Redis(host="127.0.0.1", port=port)
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                assert time.monotonic() < deadline, "redis-server did not start"
                time.sleep(0.05)
        time.sleep(1.1)  # the first retry comes a second after the failure
        # Back on the shared storage, whose count starts afresh.
        assert counted.spend("read", "key-1").remaining == 2
        assert "answers again" in caplog.text
        assert [name.decode() for name in client.keys("*key-1*")]
    finally:
        server.terminate()
        server.wait(timeout=10)
