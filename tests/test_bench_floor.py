"""The benchmark's floors (bench/floor.py, and Flask doing its work in bench/plain.py) answer like the project,
so `make bench` compares like with like."""

import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from werkzeug.test import Client

from bench import plain
from bench.floor import Floor
from tests.common.apps import ADMIN_WALLET, OTHER_WALLET, USER_WALLET, without_last_login

FULL_BODY = {
    "display_name": "  Ada Lovelace ",
    "description": "First programmer",
    "image": "ipfs://bafkreidsqvrcyrutnj6gkvplxy6altdymhmolo47iyrms6xpy65kz5uiza",
    "external_reference": "https://example.org/ada",
}


@pytest.fixture(params=["bare", "plain Flask"])
def floor(request, database_path):
    """The bare WSGI floor, and Flask doing its work (bench/plain.py): both must answer like the project."""
    floor = Floor(str(database_path))
    yield Client(floor if request.param == "bare" else plain.create_app(floor))
    floor.close()


def shape(value):
    """The keys, in order, and the JSON types of an object, recursively."""
    if isinstance(value, dict):
        return [(key, shape(item)) for key, item in value.items()]
    return type(value).__name__


@pytest.mark.parametrize("body", [{"display_name": "Short"}, FULL_BODY], ids=["name only", "every field"])
def test_floor_creates_the_same_object_as_the_project(client, floor, user_key, body):
    project = client.post("/identity", json=body, headers={"x-api-key": user_key})
    other = {**body, "display_name": body["display_name"] + " (floor)"}
    answer = floor.post("/identity", json=other, headers={"x-api-key": user_key})

    assert project.status_code == answer.status_code == 201
    assert shape(answer.json) == shape(project.json)
    assert answer.headers["Location"] == f"/identity/{answer.json['identity_id']}"
    assert answer.headers["Content-Type"] == project.headers["Content-Type"]
    assert answer.json["creator"] == project.json["creator"]


def test_each_reads_the_rows_the_other_wrote(client, floor, user_key):
    headers = {"x-api-key": user_key}
    by_project = client.post("/identity", json=FULL_BODY, headers=headers).json
    by_floor = floor.post("/identity", json={"display_name": "Made by the floor"}, headers=headers).json

    assert floor.get(f"/identity/{by_project['identity_id']}", headers=headers).json == by_project
    read_back = client.get(f"/identities/{by_floor['identity_id']}", headers=headers).json
    assert without_last_login(read_back) == without_last_login(by_floor)


def test_floor_addresses_content_like_the_project(client, floor, admin_key):
    headers = {"x-api-key": admin_key}
    created = client.post("/identity", json=FULL_BODY, headers=headers)
    renormalized = {**FULL_BODY, "display_name": "Ada Lovelace"}
    again = floor.post("/identity", json=renormalized, headers=headers)

    assert again.status_code == 409
    assert again.json["identity_id"] == created.json["identity_id"]
    assert again.headers["Location"] == created.headers["Location"]


def test_floor_makes_a_new_user_for_an_unknown_creator(client, floor, admin_key):
    answer = floor.post("/identity", json={"display_name": "For another", "creator": OTHER_WALLET.lower()},
                        headers={"x-api-key": admin_key})
    assert answer.status_code == 201
    assert answer.json["creator"]["wallet"] == OTHER_WALLET
    assert answer.json["creator"]["role"] == "User" and answer.json["creator"]["last_login"] is None
    fetched = client.get(answer.headers["Location"], headers={"x-api-key": admin_key}).json
    assert fetched == answer.json


@pytest.mark.parametrize(
    "method, path, body, content_type, use_key",
    [
        ("GET", "/identity/did:identity:ipfs:unknown", None, None, True),
        ("GET", "/identity/did:identity:ipfs:unknown", None, None, False),
        ("POST", "/identity", b'{"display_name": "x"}', "text/plain", True),
        ("POST", "/identity", b'{"display_name": ', "application/json", True),
        ("POST", "/identity", b"[1, 2]", "application/json", True),
        ("POST", "/identity", b'{"display_name": "x", "colour": "red"}', "application/json", True),
        ("POST", "/identity", b'{"description": "no name"}', "application/json", True),
        ("POST", "/identity", b'{"display_name": "\\u0007"}', "application/json", True),
        ("POST", "/identity", b'{"display_name": "x", "image": "ftp://example.org/a.png"}', "application/json", True),
        ("POST", "/identity", b'{"display_name": "x", "external_reference": "https:// bad"}', "application/json", True),
        ("POST", "/identity", json.dumps({"display_name": "x", "creator": ADMIN_WALLET}).encode(), "application/json", True),
        ("POST", "/identity", b'{"display_name": "x", "creator": "0x5AAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"}',
         "application/json", True),
    ],
    ids=["unknown id", "no key", "not json type", "bad json", "not an object", "unknown field", "missing name",
         "control character", "bad image scheme", "white space in url", "other creator", "bad checksum"],
)
def test_floor_refuses_what_the_project_refuses(client, floor, user_key, method, path, body, content_type, use_key):
    headers = {"x-api-key": user_key} if use_key else {}
    if content_type:
        headers["Content-Type"] = content_type
    project = client.open(path, method=method, data=body, headers=headers)
    answer = floor.open(path, method=method, data=body, headers=headers)

    assert answer.status_code == project.status_code
    assert answer.headers["Content-Type"] == project.headers["Content-Type"] == "application/problem+json"
    assert answer.json.keys() == project.json.keys()
    assert answer.json.get("errors", {}).keys() == project.json.get("errors", {}).keys()
    assert answer.headers.get("WWW-Authenticate") == project.headers.get("WWW-Authenticate")


def test_floor_reads_write_nothing_like_the_project(client, floor, database_path, user_key):
    identity = client.post("/identity", json=FULL_BODY, headers={"x-api-key": user_key}).headers["Location"]
    with sqlite3.connect(database_path) as observer:
        before = observer.execute("PRAGMA data_version").fetchone()[0]  # moves with another connection's commit
        assert floor.get(identity, headers={"x-api-key": user_key}).status_code == 200
        assert floor.get("/identity/did:identity:ipfs:unknown", headers={"x-api-key": user_key}).status_code == 404
        assert observer.execute("PRAGMA data_version").fetchone()[0] == before
        (last_login,) = observer.execute("SELECT last_login FROM users WHERE wallet = ?", (USER_WALLET,)).fetchone()
    assert last_login is None


def test_floor_logs_a_create_in_the_change_log_as_the_project_does(client, floor, user_key):
    headers = {"x-api-key": user_key}
    made = floor.post("/identity", json={"display_name": "Logged by the floor"}, headers=headers).json

    changes = client.get(f"/identity/{made['identity_id']}/changes", headers=headers).json["data"]
    assert [change["kind"] for change in changes] == ["created"]


@pytest.mark.sqlite_only
def test_the_layers_benchmark_measures_a_create_in_each_app_and_profiles_it(tmp_path):
    env = {**os.environ, "BENCH_LAYER_REQUESTS": "20", "BENCH_LAYER_REPEATS": "2", "TMPDIR": str(tmp_path)}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    result = subprocess.run([sys.executable, "bench/layers.py", "--post", "--profile"], capture_output=True, text=True,
                            env=env, cwd=Path(__file__).resolve().parent.parent, timeout=300)

    assert result.returncode == 0, result.stderr[-2000:]
    figures = dict(re.findall(r"^  (bare floor|plain Flask|project) +([\d.]+) µs", result.stdout, re.MULTILINE))
    assert set(figures) == {"bare floor", "plain Flask", "project"} and all(float(f) > 0 for f in figures.values())
    assert "POST (a create each)" in result.stdout
    assert re.search(r"^project: a request's time by layer", result.stdout, re.MULTILINE)
    assert re.search(r"^  sqlite3 \(the driver, C\) +\d+ µs", result.stdout, re.MULTILINE)
    # The project's access line is part of its time, as under gunicorn: the seeding's migrations do not
    # leave logging at alembic.ini's WARNING.
    project = result.stdout.split("project: a request's time by layer")[1].split("plain Flask: a request's time")[0]
    assert re.search(r"^  logging \(stdlib\) +\d+ µs", project, re.MULTILINE)


def test_the_tail_benchmark_counts_the_clients_each_worker_holds():
    """bench/tail.py's split of keep-alive clients among a server's workers: the connections a
    process accepted on the port, not the ones still queued, and not the clients' own ends."""
    import socket

    from bench.run import clients_per_worker

    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        clients = [socket.create_connection(("127.0.0.1", port)) for _ in range(4)]
        accepted = [listener.accept()[0] for _ in range(3)]
        try:
            assert clients_per_worker(port, [os.getpid()]) == [3]
            assert clients_per_worker(port + 1 if port < 65535 else port - 1, [os.getpid()]) == [0]
            assert clients_per_worker(port, []) == []
        finally:
            for connection in clients + accepted:
                connection.close()


@pytest.mark.skipif(not Path("/proc/self/io").exists(), reason="needs Linux's /proc/<pid>/io")
def test_the_benchmark_reads_what_a_worker_spent_and_wrote(tmp_path):
    """bench/run.py's Usage: a process's CPU and the bytes of its write calls between two readings,
    beside the machine's time, so that `make bench` can say where a ratio's time went."""
    from bench.run import usage_now

    target = tmp_path / "written"
    worker = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\n"
         "sys.stdin.readline()\n"
         "end = time.process_time() + 0.3\n"
         "while time.process_time() < end: pass\n"
         f"open({str(target)!r}, 'wb').write(bytes(1 << 20))\n"
         "print('done', flush=True)\n"
         "sys.stdin.readline()\n"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        before = usage_now([worker.pid])
        worker.stdin.write("go\n")
        worker.stdin.flush()
        assert worker.stdout.readline() == "done\n"
        spent = usage_now([worker.pid]) - before
    finally:
        worker.communicate("end\n", timeout=10)
    assert 0.25 <= spent.cpu_seconds < 5
    assert spent.written_bytes >= 1 << 20
    assert spent.machine_seconds >= spent.idle_seconds + spent.iowait_seconds >= 0
    assert (spent + spent).cpu_seconds == 2 * spent.cpu_seconds
    assert usage_now([worker.pid]) is None  # the process is gone: nothing to tell


@pytest.fixture
def status_server(tmp_path):
    """A threaded HTTP server on loopback that answers every request with the status it is told."""
    import threading
    from types import SimpleNamespace

    from werkzeug.serving import make_server

    from bench.run import HOST

    answer = {"status": "200 OK"}
    seen = []  # (method, path, Host, x-api-key, body) of each request

    def app(environ, start_response):
        body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        seen.append((environ["REQUEST_METHOD"], environ["PATH_INFO"], environ.get("HTTP_HOST"),
                     environ.get("HTTP_X_API_KEY"), body))
        start_response(answer["status"], [("Content-Length", "2")])
        return [b"{}"]

    server = make_server(HOST, 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    ids = tmp_path / "ids.txt"
    ids.write_text("a\nb\n")
    yield SimpleNamespace(url=f"http://{HOST}:{server.server_port}", name="status", log_path=tmp_path / "log",
                          answer=answer, ids=ids, seen=seen)
    server.shutdown()
    thread.join()


@pytest.mark.skipif(shutil.which("wrk") is None, reason="wrk is not installed (.ci/run installs it)")
def test_the_load_checks_every_status_in_the_warm_up_and_counts_only_failures_when_measuring(status_server):
    """bench/load.lua: measured runs leave each response's status to wrk, which counts what is not
    2xx or 3xx; a warm-up checks that each one is exactly the status expected, and stops the bench."""
    from bench.run import load, warm

    server = status_server
    assert load(server, "get", "key", server.ids, 1, "t", check=True).errors == 0
    server.answer["status"] = "204 No Content"  # a success, but not a GET's 200
    unchecked = load(server, "get", "key", server.ids, 1, "t")
    assert unchecked.requests > 0 and unchecked.errors == 0
    checked = load(server, "get", "key", server.ids, 1, "t", check=True)
    assert checked.errors == checked.requests > 0
    with pytest.raises(RuntimeError, match="another status than 200"):
        warm(server, "get", "key", server.ids, 1, "t")
    server.answer["status"] = "503 Service Unavailable"
    failing = load(server, "get", "key", server.ids, 1, "t")
    assert failing.errors == failing.requests > 0


@pytest.mark.skipif(shutil.which("wrk") is None, reason="wrk is not installed (.ci/run installs it)")
def test_the_patch_load_sends_a_new_description_to_one_path_with_the_proxys_host_and_checks_for_200(status_server):
    """bench/load.lua's patch mode, which bench/audit.py sends through nginx: nginx answers by the Host header."""
    import json
    from types import SimpleNamespace

    from bench.audit import _patches

    proxy = SimpleNamespace(url=status_server.url, host="identity.example.org")
    run = _patches(proxy, "the-key", "/webhooks/abc", 1, check=True)
    assert run.requests > 1 and run.errors == 0
    seen = list(status_server.seen)
    assert {request[:4] for request in seen} == {("PATCH", "/webhooks/abc", "identity.example.org", "the-key")}
    descriptions = [json.loads(request[4])["description"] for request in seen]
    assert len(set(descriptions)) == len(descriptions) == len(seen)
    status_server.answer["status"] = "201 Created"  # a success, but not a PATCH's 200
    run = _patches(proxy, "the-key", "/webhooks/abc", 1, check=True)
    assert run.errors == run.requests > 0
