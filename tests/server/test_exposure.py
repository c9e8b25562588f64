"""The service exposed as `make run` serves it: slow and silent clients, and nginx in front (deploy/nginx.conf)."""

import json
import re
import socket
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from tests.common.apps import ADMIN_WALLET
from tests.common.exposure import NGINX, NGINX_SITE, HeldClients, Nginx, exchange, slow_request, worst_get_latency
from tests.common.live import LiveServer, flask_cli

# The scenario: 200 clients sending a header a byte a second, 50 saying nothing.
SLOW, SILENT = 200, 50
MEASURED_SECONDS = 8


@pytest.fixture
def default_server(database_url, request):
    """gunicorn as `make run` starts it (gunicorn.conf.py deciding workers and worker class), a key, an identity."""
    workers = getattr(request, "param", None)  # None: as gunicorn.conf.py decides
    key = flask_cli(database_url, "keys", "create", "--wallet", ADMIN_WALLET, "--role", "Admin").strip().splitlines()[-1]
    server = LiveServer(database_url, workers=workers).start()
    try:
        # Connection: close, or requests leaves the connection open and gunicorn's stop waits for
        # its keep-alive time (5 s) at the test's end.
        created = requests.post(
            server.url + "/identity", json={"display_name": "Held"}, headers={"x-api-key": key, "Connection": "close"},
            timeout=10,
        )
        assert created.status_code == 201, created.text
        server.api_key = key
        server.identity_path = "/identity/" + created.json()["identity_id"]
        yield server
    finally:
        server.stop()


@pytest.mark.parametrize("default_server", [None, 1], indirect=True, ids=["default", "WEB_CONCURRENCY=1"])
def test_slow_and_silent_clients_do_not_stop_the_default_server(default_server, backend, report):
    server = default_server
    with HeldClients(server.port, slow=SLOW, silent=SILENT) as held:
        worst, statuses = worst_get_latency(server.url + server.identity_path, server.api_key, MEASURED_SECONDS)
        assert held.sent >= MEASURED_SECONDS - 1  # the slow clients were still sending all along
    report(f"{backend}, gunicorn alone, {SLOW} slow + {SILENT} silent held: worst GET {worst * 1000:.0f} ms")
    assert set(statuses) == {200}
    assert worst < 1.0


NO_NGINX = "Debian's nginx is not installed (.ci/run installs it: apt-get install nginx)"


@pytest.fixture
def nginx(default_server):
    """Debian's nginx with deploy/nginx.conf beside Debian's default site, in front of `default_server`."""
    nginx = Nginx(default_server.port).start()
    try:
        yield nginx
    finally:
        nginx.stop()


@pytest.mark.skipif(NGINX is None, reason=NO_NGINX)
def test_slow_and_silent_clients_do_not_stop_the_server_behind_nginx(default_server, nginx, backend, report):
    server = default_server
    with HeldClients(nginx.port, slow=SLOW, silent=SILENT, host=nginx.host) as held:
        worst, statuses = worst_get_latency(nginx.url + server.identity_path, server.api_key, MEASURED_SECONDS, nginx.host)
        assert held.sent >= MEASURED_SECONDS - 1
    report(f"{backend}, behind nginx, {SLOW} slow + {SILENT} silent held: worst GET {worst * 1000:.0f} ms")
    assert set(statuses) == {200}
    assert worst < 1.0


# The recipe's time limit for a request's header and body (deploy/nginx.conf), and the bounds within
# which a measured cut counts as that limit (the machine is shared; nginx's own default is 60 s).
TIME_LIMIT = 10
CUT_WITHIN = (TIME_LIMIT - 1, TIME_LIMIT + 5)


@pytest.mark.sqlite_only  # nginx reads requests the same whatever the service's database
@pytest.mark.skipif(NGINX is None, reason=NO_NGINX)
def test_nginx_beside_debians_default_site_cuts_a_slow_header_or_body_at_10_s_and_answers_nothing(
    default_server, nginx, report
):
    server, host = default_server, nginx.host
    get = f"GET {server.identity_path} HTTP/1.1\r\nHost: {host}\r\nx-api-key: {server.api_key}\r\n".encode()
    body = b'{"display_name": "Slow"}'
    post = (
        f"POST /identity HTTP/1.1\r\nHost: {host}\r\nx-api-key: {server.api_key}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    slow = {
        # A header dribbled a byte every half second, for the service's name and for another.
        "dribbled header": (get, b"X-Slow: " + b"s" * 100 + b"\r\n\r\n", 0.5),
        "dribbled header for another name": (
            b"GET / HTTP/1.1\r\nHost: other.example\r\n", b"X-Slow: " + b"s" * 100 + b"\r\n\r\n", 0.5),
        # The issue's: a header that pauses 25 s, then ends (without the limit, this gets a 200).
        "header paused 25 s": (get, b"Connection: close\r\n\r\n", None),
        # A body that pauses 25 s after its first bytes, then ends.
        "body paused 25 s": (post + body[:5], body[5:], None),
    }
    with ThreadPoolExecutor(max_workers=len(slow)) as pool:
        futures = {name: pool.submit(slow_request, nginx.port, start, rest, drip) for name, (start, rest, drip) in slow.items()}
        cuts = {name: future.result() for name, future in futures.items()}
    report("behind nginx beside Debian's default site: " + ", ".join(f"{name} {cut}" for name, cut in cuts.items()))
    # Each is closed at the limit with nothing sent: no 408 (nginx only logs that), and never a 200.
    wrong = [
        f"{name}: {cut}" for name, cut in cuts.items()
        if cut.received or cut.seconds is None or not CUT_WITHIN[0] <= cut.seconds <= CUT_WITHIN[1]
    ]
    assert not wrong, (
        f"expected each closed after {TIME_LIMIT} s with nothing sent, got: " + "; ".join(wrong) + ". While nginx "
        "reads a header it applies the limits of the port's default server (Debian's default site), so "
        "deploy/nginx.conf must set client_header_timeout outside its server block"
    )


def assert_problem(answer, status, what):
    """`answer` is nginx's problem details with `status` on its status line and in its body."""
    assert answer.status == status, f"{what}: status line {answer.status}, expected {status}: {answer.body[:200]!r}"
    assert answer.content_type == "application/problem+json", f"{what}: {answer.content_type}: {answer.body[:200]!r}"
    problem = answer.json()
    assert problem["status"] == answer.status, f"{what}: the status line says {answer.status}, the body {problem}"
    assert problem["title"] and problem["detail"], f"{what}: {problem}"


# nginx's own refusals of requests for the service's name: what, the request, the status HTTP gives it.
REFUSALS = [
    ("a header line without a colon", b"GET / HTTP/1.1\r\nHost: {host}\r\nx-api-key idsk_x\r\n\r\n", 400),
    ("a header line over 8 KiB", b"GET / HTTP/1.1\r\nHost: {host}\r\nX-Big: " + b"a" * 9000 + b"\r\n\r\n", 400),
    ("both Content-Length and chunked",
     b"POST /identity HTTP/1.1\r\nHost: {host}\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
    ("a chunked body that is not chunks",
     b"POST /identity HTTP/1.1\r\nHost: {host}\r\nTransfer-Encoding: chunked\r\n\r\nnot a chunk\r\n", 400),
    ("TRACE", b"TRACE / HTTP/1.1\r\nHost: {host}\r\n\r\n", 405),
    ("a body over 64 KiB",
     b"POST /identity HTTP/1.1\r\nHost: {host}\r\nContent-Length: 70000\r\n\r\n" + b"a" * 70000, 413),
    ("a chunked body over 64 KiB",
     b"POST /identity HTTP/1.1\r\nHost: {host}\r\nTransfer-Encoding: chunked\r\n\r\n11170\r\n" + b"a" * 70000
     + b"\r\n0\r\n\r\n", 413),
    ("a Transfer-Encoding other than chunked",
     b"POST /identity HTTP/1.1\r\nHost: {host}\r\nTransfer-Encoding: gzip\r\n\r\n", 501),
    ("a path of the recipe's error pages", b"GET /_nginx/503 HTTP/1.1\r\nHost: {host}\r\n\r\n", 404),
]
# Refused before nginx has read Host, and so knows which server the request is for: by the port's default server.
BEFORE_THE_NAME = [
    ("no Host", b"GET / HTTP/1.1\r\n\r\n", 400),
    ("a malformed Host", b"GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", 400),
    ("a header line without a colon before Host", b"GET / HTTP/1.1\r\nx-api-key idsk_x\r\nHost: {host}\r\n\r\n", 400),
    ("a request line nginx cannot read", b"G@T / HTTP/1.1\r\nHost: {host}\r\n\r\n", 400),
    ("a request line over 8 KiB", b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: {host}\r\n\r\n", 414),
    ("HTTP/2.0 in the request line", b"GET / HTTP/2.0\r\nHost: {host}\r\n\r\n", 505),
]


def test_each_error_page_of_the_recipe_is_a_problem_whose_status_is_its_status_line():
    # The live tests below cannot make nginx fail inside (500) or gunicorn time out (504): read those from the file.
    recipe = NGINX_SITE.read_text()
    pages = re.findall(r"^\s*error_page\s+([\d ]+?)\s+=(\d+)\s+(\S+);", recipe, re.MULTILINE)
    assert {"400", "413", "502", "504"} <= {code for codes, _, _ in pages for code in codes.split()}, pages
    for codes, status, uri in pages:
        block = re.search(r"location = " + re.escape(uri) + r" \{(.*?)\n    \}", recipe, re.DOTALL)
        assert block, f"error_page {codes} ={status} {uri}: no `location = {uri}` in deploy/nginx.conf"
        assert "internal;" in block[1] and "default_type application/problem+json;" in block[1], block[1]
        returned = re.search(r"return (\d+) '(.*)\\n';", block[1])
        assert returned and returned[1] == status, f"{uri} returns {returned and returned[1]}, its error_page says ={status}"
        problem = json.loads(returned[2])
        assert problem["status"] == int(status) and problem["title"] and problem["detail"], (uri, problem)


@pytest.mark.sqlite_only  # nginx's refusals are the same whatever the service's database
@pytest.mark.skipif(NGINX is None, reason=NO_NGINX)
@pytest.mark.parametrize("default_site", [True, False], ids=["beside Debian's default site", "default site removed"])
def test_nginx_refuses_with_problems_whose_status_is_the_status_line(default_server, default_site):
    server = default_server
    nginx = Nginx(server.port, default_site=default_site).start()
    host = nginx.host.encode()
    try:
        answers = {what: exchange(nginx.port, request.replace(b"{host}", host)) for what, request, _ in REFUSALS + BEFORE_THE_NAME}
        unknown = exchange(nginx.port, b"GET /identity/unknown HTTP/1.1\r\nHost: " + host + b"\r\nx-api-key: "
                           + server.api_key.encode() + b"\r\nConnection: close\r\n\r\n", half_close=False)
        another_name = exchange(
            nginx.port, b"GET /readyz HTTP/1.1\r\nHost: other.example\r\nConnection: close\r\n\r\n", half_close=False)
    finally:
        nginx.stop()
    for what, _, status in REFUSALS:
        assert_problem(answers[what], status, what)
    for what, _, status in BEFORE_THE_NAME:
        if default_site:  # the default site's own page, as docs/deployment.md says
            assert (answers[what].status, answers[what].content_type) == (status, "text/html"), (what, answers[what].body[:200])
        else:  # the recipe's server is the port's only one, and so its default
            assert_problem(answers[what], status, what)
    # The service's own errors pass through nginx as the service sent them (it names every answer).
    assert unknown.status == 404 and "x-request-id" in unknown.headers, unknown.body[:200]
    assert unknown.json()["status"] == 404 and unknown.content_type == "application/problem+json"
    # Another name is the default server's: Debian's site beside it, else the service.
    assert ("x-request-id" in another_name.headers) is not default_site, (another_name.status, another_name.body[:200])


@pytest.mark.sqlite_only  # what nginx says when gunicorn is stopped does not depend on the database
@pytest.mark.skipif(NGINX is None, reason=NO_NGINX)
def test_nginx_answers_503_with_retry_after_while_gunicorn_is_stopped(default_server, nginx):
    server, host = default_server, nginx.host
    server.stop()
    body = b'{"display_name": "While stopped"}'
    head = f"Host: {host}\r\nx-api-key: {server.api_key}\r\nConnection: close\r\n"
    answers = {
        "GET": exchange(nginx.port, f"GET {server.identity_path} HTTP/1.1\r\n{head}\r\n".encode(), half_close=False),
        "POST": exchange(nginx.port, (
            f"POST /identity HTTP/1.1\r\n{head}Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode() + body, half_close=False),
    }
    for method, answer in answers.items():
        # gunicorn's connection refused is a 502 inside nginx; the client gets a 503, as from the service.
        assert_problem(answer, 503, method)
        assert answer.headers.get("retry-after") == "1", (method, answer.headers)


MALFORMED_HEADER_LINES = [
    b"x-api-key {key}",  # the colon left out
    b"x-api-key : {key}",  # white space before the colon
    b"x-api-key: {key}\x01",  # a control character in the value
    b"x-api-k\x01ey: {key}",  # and in the name
    b"X-Other: a\r\n {key}",  # an obsolete line folding
    b"{key}",  # the key alone
]


@pytest.mark.sqlite_only
def test_a_key_in_a_malformed_header_line_reaches_no_log_line_and_no_error_page(database_url, tmp_path):
    key = flask_cli(database_url, "keys", "create", "--wallet", ADMIN_WALLET, "--role", "Admin").strip().splitlines()[-1]
    secret = key.removeprefix("idsk_")
    server = LiveServer(database_url, workers=None, env={"IDENTITY_LOG_LEVEL": "DEBUG"}, output_dir=tmp_path).start()
    answers = []
    try:
        for line in MALFORMED_HEADER_LINES:
            request = b"GET /identity/x HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n" + line.replace(b"{key}", key.encode()) + b"\r\n\r\n"
            with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
                sock.sendall(request)
                answers.append(read_all(sock))
        # And the service still serves that key when it is sent well.
        assert requests.get(server.url + "/identity/x", headers={"x-api-key": key}, timeout=10).status_code == 404
    finally:
        server.stop()
    for line, answer in zip(MALFORMED_HEADER_LINES, answers, strict=True):
        # 400 from gunicorn; a folded line may be read as part of the header before it (401: no key).
        assert answer.startswith((b"HTTP/1.1 400 ", b"HTTP/1.1 401 ")), (line, answer)
        assert secret.encode() not in answer, (line, answer)
    logs = server.stdout() + server.stderr()
    assert "DEBUG" in logs and "Invalid" in logs  # the server did log at DEBUG, and about these requests
    assert secret not in logs


def read_all(sock):
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


@pytest.mark.sqlite_only
def test_the_logs_blank_a_key_that_the_server_quotes(database_url, tmp_path):
    # gunicorn's Python parser names the line it could not read in its WARNING; the C parser that
    # gunicorn.conf.py requires does not, but whatever quotes a key, the log line carries none.
    key = flask_cli(database_url, "keys", "create", "--wallet", ADMIN_WALLET, "--role", "Admin").strip().splitlines()[-1]
    env = {"IDENTITY_LOG_LEVEL": "DEBUG", "GUNICORN_CMD_ARGS": "--http-parser python"}
    server = LiveServer(database_url, workers=None, env=env, output_dir=tmp_path).start()
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
            sock.sendall(b"GET /identity/x HTTP/1.1\r\nHost: 127.0.0.1\r\nx-api-key " + key.encode() + b"\r\n\r\n")
            assert read_all(sock).startswith(b"HTTP/1.1 400 ")
    finally:
        server.stop()
    logs = server.stderr()
    assert "Invalid HTTP Header: 'x-api-key idsk_[redacted]'" in logs
    assert key.removeprefix("idsk_") not in logs + server.stdout()


# The body: "a" and 16,000 U+0301 and 16,000 U+0316, 64 KiB of UTF-8 (within the body limit).
COSTLY = {"display_name": "a" + "\u0301" * 16000 + "\u0316" * 16000}


def test_costly_text_is_refused_in_milliseconds_and_reads_go_on_meanwhile(default_server, report):
    server = default_server
    body = json.dumps(COSTLY, ensure_ascii=False).encode()
    assert 60_000 < len(body) <= 64 * 1024
    headers = {"x-api-key": server.api_key, "Content-Type": "application/json"}

    def post(_):
        started = time.monotonic()
        response = requests.post(server.url + "/identity", data=body, headers=headers, timeout=30)
        return response, time.monotonic() - started

    single, single_seconds = post(None)
    assert single.status_code == 422
    assert "display_name" in single.json()["errors"]
    with ThreadPoolExecutor(max_workers=12) as pool:
        costly = pool.map(post, range(12))
        worst, statuses = worst_get_latency(server.url + server.identity_path, server.api_key, 2)
        costly = list(costly)
    report(f"costly text: one refused in {single_seconds * 1000:.1f} ms; GETs during 12 at once: worst {worst * 1000:.0f} ms")
    assert single_seconds < 0.25
    assert {response.status_code for response, _ in costly} == {422}
    assert set(statuses) == {200} and worst < 1.0
