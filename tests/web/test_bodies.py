"""Request bodies of every framing, through real gunicorn: held to IDENTITY_MAX_BODY_BYTES, never a 5xx."""

import pytest

from tests.common.apps import ADMIN_WALLET
from tests.common.exposure import exchange
from tests.common.live import LiveServer, flask_cli

LIMIT = 64 * 1024


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """The default server (as `make run` starts it) on SQLite, with an Admin key; its logs kept."""
    folder = tmp_path_factory.mktemp("bodies")
    database_url = f"sqlite:///{folder / 'identity.db'}"
    flask_cli(database_url, "db", "upgrade")
    key = flask_cli(database_url, "keys", "create", "--wallet", ADMIN_WALLET, "--role", "Admin").strip().splitlines()[-1]
    (folder / "output").mkdir()
    live = LiveServer(database_url, workers=None, output_dir=folder / "output").start()
    live.api_key = key
    yield live
    live.stop()


def chunked(server, chunks, raw_chunks=None):
    """POST /identity with Transfer-Encoding: chunked; `chunks` are framed properly, `raw_chunks` sent as they are."""
    body = raw_chunks if raw_chunks is not None else b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in chunks) + b"0\r\n\r\n"
    head = (
        "POST /identity HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: application/json\r\n"
        f"x-api-key: {server.api_key}\r\nTransfer-Encoding: chunked\r\n\r\n"
    ).encode()
    return exchange(server.port, head + body)


def split(data, size=8192):
    return [data[i:i + size] for i in range(0, len(data), size)]


def test_a_chunked_body_over_the_limit_is_413(server):
    answer = chunked(server, split(b"[" + b"1," * (512 * 1024) + b"1]"))
    assert answer.status == 413
    assert answer.content_type == "application/problem+json"
    assert answer.json()["status"] == 413


def test_a_valid_object_padded_past_the_limit_with_white_space_is_413_not_created(server):
    answer = chunked(server, split(b'{"display_name": "Padded"}' + b" " * (200 * 1024)))
    assert answer.status == 413
    assert answer.content_type == "application/problem+json"


def test_a_chunked_body_at_the_limit_is_read_whole(server):
    start = b'{"display_name": "Exactly at the limit"}'
    answer = chunked(server, split(start + b" " * (LIMIT - len(start))))
    assert answer.status == 201, answer.body


@pytest.mark.parametrize(
    "raw",
    [
        b"zz\r\n{}\r\n0\r\n\r\n",  # a chunk size that is not hex
        b"5\r\n{\"display_name\": 1}\r\n0\r\n\r\n",  # a size that does not match
        b"2\r\n{}XX0\r\n\r\n",  # a chunk without its CRLF
        b"ffffffffffffffffffff\r\n{}\r\n0\r\n\r\n",  # a size far past any limit
    ],
    ids=["not-hex", "wrong-size", "no-terminator", "huge-size"],
)
def test_a_malformed_chunk_is_400_problem_and_leaves_no_traceback(server, raw):
    answer = chunked(server, None, raw_chunks=raw)
    assert 400 <= answer.status < 500, answer.body
    assert answer.status in (400, 413)
    assert answer.content_type == "application/problem+json", answer.body
    log = server.stderr()
    assert "Traceback" not in log and '"level":"ERROR"' not in log


def test_no_body_shape_gives_a_5xx(server):
    shapes = [
        b"",  # a chunked body with no chunk at all
        b"0\r\n\r\n",
        b"1\r\n{\r\n0\r\n\r\n",
        b"3\r\n{}\n\r\n0\r\nX-Trailer: 1\r\n\r\n",
        b"2;ext=1\r\n{}\r\n0\r\n\r\n",
    ]
    statuses = [chunked(server, None, raw_chunks=raw).status for raw in shapes]
    assert all(status is not None and status < 500 for status in statuses), statuses
