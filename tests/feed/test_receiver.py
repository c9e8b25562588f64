"""What the deliveries log says when a receiver gives no answer, each cause against a real socket: a closed port,
a name that does not resolve, a server that never answers, a TLS server whose certificate is self-signed, and
one that hangs up."""

import socket
import ssl
import subprocess
import threading
import time

import pytest

from identity.feed.receiver import TIMEOUT, Receiver
from identity.feed.webhooks import new_secret
from tests.common.apps import make_app
from tests.common.live import free_port


@pytest.fixture(params=[True, False], ids=["private allowed", "public only"])
def app(request, tmp_path):
    """Receivers on loopback are allowed, or (the default) refused before any connection."""
    return make_app(tmp_path / "identity.db", IDENTITY_WEBHOOKS_ALLOW_PRIVATE=request.param)


@pytest.fixture
def private_app(tmp_path):
    return make_app(tmp_path / "identity.db", IDENTITY_WEBHOOKS_ALLOW_PRIVATE=True)


def post(app, url):
    """One delivery to `url`: (status, error, seconds it took)."""
    receiver = Receiver(url, new_secret())
    started = time.monotonic()
    with app.app_context():
        status, error = receiver.post("msg_1", '{"seq": 1}')
    receiver.close()
    return status, error, time.monotonic() - started


class Listener:
    """A TCP server on 127.0.0.1 that does `serve(connection)` with each connection it accepts."""

    def __init__(self, serve, context=None):
        self.serve, self.context = serve, context
        self.socket = socket.create_server(("127.0.0.1", 0))
        self.port = self.socket.getsockname()[1]
        self.connections = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                connection, _ = self.socket.accept()
            except OSError:
                return
            self.connections.append(connection)
            threading.Thread(target=self._serve, args=(connection,), daemon=True).start()

    def _serve(self, connection):
        try:
            if self.context is not None:
                connection = self.context.wrap_socket(connection, server_side=True)
            self.serve(connection)
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.socket.close()
        for connection in self.connections:
            connection.close()


def test_a_closed_port_is_logged_as_refused_at_once(private_app):
    status, error, seconds = post(private_app, f"http://127.0.0.1:{free_port()}/hook")
    assert status is None
    assert error.startswith("refused: nothing accepts connections"), error
    assert seconds < 2


def test_a_name_that_does_not_resolve_is_logged_as_not_resolvable(app):
    status, error, _ = post(app, "http://receiver.invalid/hook")
    assert status is None
    assert error.startswith("not resolvable:") and "does not resolve" in error, error


def test_a_server_that_never_answers_is_logged_as_timed_out_after_the_limit(private_app):
    def listen_only(connection):
        connection.recv(65536)
        time.sleep(TIMEOUT + 5)  # reads the request, never answers

    with Listener(listen_only) as silent:
        status, error, seconds = post(private_app, f"http://127.0.0.1:{silent.port}/hook")
    assert status is None
    assert error == f"timed out: no answer within {TIMEOUT:g} s"
    assert TIMEOUT - 0.5 < seconds < TIMEOUT + 3


@pytest.fixture
def self_signed(tmp_path):
    """A TLS server context with a certificate for localhost that no authority signed (Debian's openssl)."""
    key, certificate = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost", "-keyout", str(key), "-out", str(certificate)],
        check=True, capture_output=True, timeout=60,
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certificate, key)
    return context


def test_a_self_signed_certificate_is_logged_as_tls_failed(private_app, self_signed):
    def answer(connection):
        connection.recv(65536)
        connection.sendall(b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n")

    with Listener(answer, self_signed) as tls:
        status, error, _ = post(private_app, f"https://localhost:{tls.port}/hook")
    assert status is None
    assert error.startswith("TLS failed: the receiver's certificate was not accepted"), error
    assert "self-signed certificate" in error


def test_a_server_that_hangs_up_without_answering_is_logged_as_connection_lost(private_app):
    def hang_up(connection):
        connection.recv(65536)
        connection.close()

    with Listener(hang_up) as rude:
        status, error, _ = post(private_app, f"http://127.0.0.1:{rude.port}/hook")
    assert status is None
    assert error.startswith("connection lost:"), error
