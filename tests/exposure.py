"""Hostile and careless clients for the exposure tests, all on loopback and all bounded in time."""

import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import requests

from tests.live import ROOT, free_port, wait_until_ready

NGINX_SITE = ROOT / "deploy" / "nginx.conf"
NGINX = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin")


class HeldClients:
    """`slow` connections that send a request header one byte a second and `silent` ones that send
    nothing, all to 127.0.0.1:`port`, held from __enter__ to __exit__ (at most `limit` seconds)."""

    HEADER = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"s" * 4000 + b"\r\n\r\n"

    def __init__(self, port, slow=200, silent=50, limit=120):
        self.port, self.slow, self.silent, self.limit = port, slow, silent, limit
        self.sockets = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._drip, daemon=True)
        self.sent = 0

    def __enter__(self):
        for _ in range(self.slow + self.silent):
            sock = socket.create_connection(("127.0.0.1", self.port), timeout=5)
            sock.setblocking(False)
            self.sockets.append(sock)
        self.thread.start()
        return self

    def _drip(self):
        deadline = time.monotonic() + self.limit
        position = 0
        while not self.stop.wait(1.0) and time.monotonic() < deadline and position < len(self.HEADER):
            for sock in self.sockets[: self.slow]:
                try:
                    sock.send(self.HEADER[position:position + 1])
                except OSError:
                    pass  # the server (or the proxy) closed it: allowed
            position += 1
            self.sent = position

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(timeout=5)
        for sock in self.sockets:
            sock.close()


def worst_get_latency(url, key, seconds):
    """GET `url` with `key` one request after another for `seconds`; returns (worst latency, statuses)."""
    worst, statuses = 0.0, []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        started = time.monotonic()
        try:
            status = requests.get(url, headers={"x-api-key": key}, timeout=5).status_code
        except requests.RequestException as error:
            status = type(error).__name__
        worst = max(worst, time.monotonic() - started)
        statuses.append(status)
        time.sleep(0.05)
    return worst, statuses


class Nginx:
    """Debian's nginx serving deploy/nginx.conf on a free loopback port, in front of `upstream_port`.

    The site file is used as shipped but for its two addresses: `listen 80` and the upstream's
    `server 127.0.0.1:8000`. Everything else runs in a temporary prefix.
    """

    def __init__(self, upstream_port):
        self.upstream_port = upstream_port
        self.prefix = Path(tempfile.mkdtemp(prefix="identity-nginx-"))
        self.port = None
        self.process = None

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout=20):
        binary = NGINX
        self.port = free_port()
        site = NGINX_SITE.read_text()
        site, listens = re.subn(r"listen 80;", f"listen 127.0.0.1:{self.port};", site)
        site, upstreams = re.subn(r"server 127\.0\.0\.1:8000", f"server 127.0.0.1:{self.upstream_port}", site)
        assert listens == 1 and upstreams == 1, "deploy/nginx.conf changed its addresses"
        (self.prefix / "logs").mkdir()
        (self.prefix / "temp").mkdir()
        (self.prefix / "site.conf").write_text(site)
        temp = self.prefix / "temp"
        (self.prefix / "nginx.conf").write_text(
            f"daemon off;\nmaster_process on;\nworker_processes 1;\npid {self.prefix}/nginx.pid;\n"
            f"error_log {self.prefix}/logs/error.log info;\n"
            "events { worker_connections 1024; }\n"
            "http {\n"
            f"  access_log {self.prefix}/logs/access.log;\n"
            f"  client_body_temp_path {temp}/body; proxy_temp_path {temp}/proxy;\n"
            f"  fastcgi_temp_path {temp}/fastcgi; uwsgi_temp_path {temp}/uwsgi; scgi_temp_path {temp}/scgi;\n"
            f"  include {self.prefix}/site.conf;\n"
            "}\n"
        )
        with open(self.prefix / "logs" / "stderr", "ab") as stderr:
            self.process = subprocess.Popen(
                [binary, "-p", str(self.prefix), "-c", str(self.prefix / "nginx.conf")],
                stdout=stderr, stderr=stderr, start_new_session=True,
            )
        return wait_until_ready(self, "nginx", timeout)

    def log(self):
        logs = self.prefix / "logs"
        return "".join(path.read_text(errors="replace") for path in sorted(logs.glob("*")) if path.is_file())[-3000:]

    def stop(self):
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGQUIT)  # nginx's graceful stop
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)
        shutil.rmtree(self.prefix, ignore_errors=True)


class Answer:
    """An HTTP answer read off a raw socket: status, headers, body."""

    def __init__(self, raw):
        head, _, self.body = raw.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        self.status = int(lines[0].split()[1]) if lines[0].startswith("HTTP/") else None
        self.headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            self.headers[name.strip().lower()] = value.strip()
        if "chunked" in self.headers.get("transfer-encoding", ""):
            self.body = _unchunk(self.body)

    @property
    def content_type(self):
        return self.headers.get("content-type")

    def json(self):
        import json

        return json.loads(self.body)


def _unchunk(data):
    out = b""
    while data:
        size_line, _, data = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        out, data = out + data[:size], data[size + 2:]
    return out


def exchange(port, request, timeout=15):
    """Send `request` (bytes) to 127.0.0.1:`port`, read until the server closes; returns an Answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        try:
            sock.sendall(request)
            sock.shutdown(socket.SHUT_WR)  # nothing more comes: a body cut short ends here
        except OSError:
            pass  # the server may answer and close before taking the whole request
        chunks = []
        try:
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        except ConnectionResetError:
            pass
    return Answer(b"".join(chunks))
