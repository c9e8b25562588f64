"""A response of known length leaves in one TCP segment, where gunicorn writes it in two (identity/segments.py).

Segments are counted by the kernel: tcp(7)'s TCP_INFO, on real loopback connections.
"""

import socket
import struct
from http.client import HTTPConnection

import pytest
from werkzeug.test import EnvironBuilder

from identity.server.cork import SOCKET, WholeResponses
from tests.live import LiveServer

pytestmark = pytest.mark.skipif(not hasattr(socket, "TCP_CORK"), reason="TCP_CORK is Linux's")

BODY = b'{"status":"ok"}'


def segments(sock, direction="out"):
    """The segments `sock` has sent ("out") or received ("in"): struct tcp_info's tcpi_segs_out, tcpi_segs_in."""
    info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 144)
    return struct.unpack_from("II", info, 136)[0 if direction == "out" else 1]


def corked(sock):
    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_CORK) == 1


@pytest.fixture
def connection():
    """Both ends of a TCP connection on loopback, (server's, client's); the server's with TCP_NODELAY,
    as gunicorn sets it on every connection."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        client = socket.create_connection(listener.getsockname())
        server, _ = listener.accept()
    server.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    yield server, client
    server.close()
    client.close()


def whole(environ, start_response):
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(BODY)))])
    return [BODY]


def streamed(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/event-stream")])
    yield b"data: 1\n\n"
    yield b"data: 2\n\n"


def serve(app, server, protocol="HTTP/1.1"):
    """Answer a GET with `app` as gunicorn's workers write a response: its status line and headers with
    one write, before the first part of the body, each part with a write of its own, then the body
    closed. Returns, for each part, whether the connection was corked once it was written."""
    environ = EnvironBuilder(path="/").get_environ()
    environ.update({SOCKET: server, "SERVER_PROTOCOL": protocol})
    started = []
    body = app(environ, lambda status, headers, exc_info=None: started.append((status, headers)))
    corked_after = []
    try:
        for part in body:
            if started:
                status, headers = started.pop()
                head = f"HTTP/1.1 {status}\r\n" + "".join(f"{name}: {value}\r\n" for name, value in headers) + "\r\n"
                server.sendall(head.encode("latin-1"))
            server.sendall(part)
            corked_after.append(corked(server))
    finally:
        if hasattr(body, "close"):  # as a WSGI server does
            body.close()
    return corked_after


def received(client, length):
    data = b""
    while len(data) < length:
        data += client.recv(65536)
    return data


def test_a_response_of_known_length_leaves_in_one_segment(connection):
    server, client = connection
    before = segments(server)
    assert serve(whole, server) == [False]
    as_gunicorn_writes_it = segments(server) - before
    response = received(client, 1)
    before = segments(server)
    assert serve(WholeResponses(whole), server) == [True]  # held until the body is closed
    assert not corked(server)
    assert (as_gunicorn_writes_it, segments(server) - before) == (2, 1)
    assert received(client, len(response)) == response  # the same bytes


def test_the_body_the_app_gave_is_closed_before_the_connection_is_uncorked(connection):
    server, _ = connection
    seen_at_close = []

    class Body(list):
        def close(self):
            seen_at_close.append(corked(server))

    def app(environ, start_response):
        start_response("200 OK", [("Content-Length", str(len(BODY)))])
        return Body([BODY])

    assert serve(WholeResponses(app), server) == [True]
    assert seen_at_close == [True]  # closed once, while its bytes were still held
    assert not corked(server)


def test_a_streamed_response_sends_each_part_as_it_is_written(connection):
    server, client = connection
    before = segments(server)
    assert serve(WholeResponses(streamed), server) == [False, False]
    assert segments(server) - before == 3  # the headers, then each event
    assert received(client, 1).startswith(b"HTTP/1.1 200 OK\r\n")


def test_an_http2_connection_is_never_corked(connection):
    # Its one TCP connection carries the frames of other requests' responses while this one is written.
    server, _ = connection
    assert serve(WholeResponses(whole), server, protocol="HTTP/2.0") == [False]


def test_the_connection_is_uncorked_when_the_app_fails(connection):
    server, _ = connection

    def failing(environ, start_response):
        start_response("200 OK", [("Content-Length", "10")])
        raise RuntimeError("the view failed after starting its response")

    environ = {**EnvironBuilder(path="/").get_environ(), SOCKET: server}
    with pytest.raises(RuntimeError):
        WholeResponses(failing)(environ, lambda *args: None)
    assert not corked(server)


def test_the_default_server_sends_each_response_of_a_keep_alive_connection_in_one_segment(database_path):
    """20 GETs on one connection: 20 responses in at most 30 segments (one each, and now and then an
    acknowledgement of a request on its own), where writing headers and body apart takes 40 or more."""
    server = LiveServer(f"sqlite:///{database_path}", workers=1).start()
    try:
        connection = HTTPConnection("127.0.0.1", server.port, timeout=10)
        connection.connect()
        before = segments(connection.sock, "in")
        bodies = []
        for _ in range(20):
            connection.request("GET", "/healthz")
            response = connection.getresponse()
            bodies.append((response.status, response.read()))
        received_segments = segments(connection.sock, "in") - before
        connection.close()
    finally:
        server.stop()
    assert bodies == [(200, bodies[0][1])] * 20 and bodies[0][1]
    assert received_segments <= 30, received_segments
