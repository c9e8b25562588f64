"""The service exposed as `make run` serves it: slow and silent clients, and nginx in front (deploy/nginx.conf)."""

import pytest
import requests

from tests.conftest import ADMIN_WALLET
from tests.exposure import HeldClients, Nginx, worst_get_latency
from tests.live import LiveServer, flask_cli

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
        created = requests.post(
            server.url + "/identity", json={"display_name": "Held"}, headers={"x-api-key": key}, timeout=10
        )
        assert created.status_code == 201, created.text
        server.api_key = key
        server.identity_path = "/identity/" + created.json()["identity_id"]
        yield server
    finally:
        server.stop()


@pytest.mark.parametrize("default_server", [None, 2], indirect=True, ids=["default", "WEB_CONCURRENCY=2"])
def test_slow_and_silent_clients_do_not_stop_the_default_server(default_server, backend, report):
    server = default_server
    with HeldClients(server.port, slow=SLOW, silent=SILENT) as held:
        worst, statuses = worst_get_latency(server.url + server.identity_path, server.api_key, MEASURED_SECONDS)
        assert held.sent >= MEASURED_SECONDS - 1  # the slow clients were still sending all along
    report(f"{backend}, gunicorn alone, {SLOW} slow + {SILENT} silent held: worst GET {worst * 1000:.0f} ms")
    assert set(statuses) == {200}
    assert worst < 1.0


def test_slow_and_silent_clients_do_not_stop_the_server_behind_nginx(default_server, backend, report):
    server = default_server
    nginx = Nginx(server.port).start()
    try:
        with HeldClients(nginx.port, slow=SLOW, silent=SILENT) as held:
            worst, statuses = worst_get_latency(nginx.url + server.identity_path, server.api_key, MEASURED_SECONDS)
            assert held.sent >= MEASURED_SECONDS - 1
    finally:
        nginx.stop()
    report(f"{backend}, behind nginx, {SLOW} slow + {SILENT} silent held: worst GET {worst * 1000:.0f} ms")
    assert set(statuses) == {200}
    assert worst < 1.0
