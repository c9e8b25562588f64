"""Hostile and careless clients for the exposure tests, all on loopback and all bounded in time."""

import os
import re
import select
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import requests

from tests.common.live import ROOT, free_port, wait_until_ready

NGINX_SITE = ROOT / "deploy" / "nginx.conf"
NGINX = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin")


class HeldClients:
    """`slow` connections that send a request header (for `host`) one byte a second and `silent` ones
    that send nothing, all to 127.0.0.1:`port`, held from __enter__ to __exit__ (at most `limit` seconds)."""

    def __init__(self, port, slow=200, silent=50, limit=120, host="127.0.0.1"):
        self.port, self.slow, self.silent, self.limit = port, slow, silent, limit
        self.HEADER = f"GET /healthz HTTP/1.1\r\nHost: {host}\r\nX-Slow: ".encode() + b"s" * 4000 + b"\r\n\r\n"
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


def worst_get_latency(url, key, seconds, host=None):
    """GET `url` with `key` (and Host: `host`, if given) one request after another for `seconds`;
    returns (worst latency, statuses)."""
    worst, statuses = 0.0, []
    headers = {"x-api-key": key, **({"Host": host} if host else {})}
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        started = time.monotonic()
        try:
            status = requests.get(url, headers=headers, timeout=5).status_code
        except requests.RequestException as error:
            status = type(error).__name__
        worst = max(worst, time.monotonic() - started)
        statuses.append(status)
        time.sleep(0.05)
    return worst, statuses


# What `apt-get install nginx` puts in place on Debian: the main configuration, which includes
# conf.d/*.conf and then sites-enabled/*, and the default site that sites-enabled/default links to.
DEBIAN_NGINX_CONF = Path("/etc/nginx/nginx.conf")
DEBIAN_DEFAULT_SITE = Path("/etc/nginx/sites-available/default")
RESTORE_DEBIAN_FILES = (
    "restore Debian's files with `apt-get install --reinstall -o Dpkg::Options::=--force-confmiss nginx-common`"
)


def recipe_server_name():
    """The one name deploy/nginx.conf's server answers to (the Host a client of the service sends)."""
    names = re.findall(r"^\s*server_name\s+([^\s;]+);", NGINX_SITE.read_text(), re.MULTILINE)
    assert len(names) == 1, f"deploy/nginx.conf names {names} in server_name; the tests expect one name"
    return names[0]


def _rewritten(text, replacements, source):
    """`text` with each (old, new) replaced, each old found exactly once in `source`."""
    for old, new in replacements:
        assert text.count(old) == 1, f"{source} no longer holds `{old.strip()}` once: update tests/common/exposure.py's Nginx"
        text = text.replace(old, new)
    return text


class Nginx:
    """Debian's nginx installed as docs/deployment.md says, on a free loopback port, in front of `upstream_port`.

    Its prefix holds what Debian's /etc/nginx holds after `apt-get install nginx` and the page's
    step: Debian's nginx.conf (as the package ships it, but for the paths of its pid file, its logs,
    its temporary files and the two folders it includes, moved into the prefix so that the
    machine's own nginx is left alone), conf.d/identity.conf (deploy/nginx.conf, its upstream's
    address set to `upstream_port`), and, with `default_site`, sites-enabled/default (Debian's
    /etc/nginx/sites-available/default).

    The only other change to either site is the port. Port 80 may be taken by the machine's nginx, so both servers
    listen on 127.0.0.1:<free port> instead: the recipe's `listen 80;` and the default site's
    `listen 80 default_server;` name the same address and port, so they share one listening
    socket, whose default server is Debian's, exactly as on port 80. (Giving one of them
    127.0.0.1 and the other *:port would make two addresses, each with its own default server,
    and hide what the test is for.) The default site's second line, `listen [::]:80 default_server;`,
    is dropped: the recipe and the tests' clients use IPv4 only, and an IPv6 socket on the free
    port may not be available here.
    """

    def __init__(self, upstream_port, default_site=True):
        self.upstream_port = upstream_port
        self.default_site = default_site
        self.host = recipe_server_name()
        self.prefix = Path(tempfile.mkdtemp(prefix="identity-nginx-"))
        self.prefix.chmod(0o755)  # nginx's workers run as www-data (Debian's `user`), and use temp/ in it
        self.port = None
        self.process = None

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout=20):
        for path in (DEBIAN_NGINX_CONF, DEBIAN_DEFAULT_SITE):
            assert path.is_file(), f"{path} is missing: these tests run the recipe as Debian's nginx package installs it; {RESTORE_DEBIAN_FILES}"
        self.port = free_port()
        prefix = self.prefix
        for folder in ("logs", "temp", "conf.d", "sites-enabled"):
            (prefix / folder).mkdir()
        temp = prefix / "temp"
        (prefix / "nginx.conf").write_text(_rewritten(DEBIAN_NGINX_CONF.read_text(), [
            ("pid /run/nginx.pid;", f"pid {prefix}/nginx.pid;"),
            ("error_log /var/log/nginx/error.log;", f"error_log {prefix}/logs/error.log;"),
            ("access_log /var/log/nginx/access.log;", f"access_log {prefix}/logs/access.log;"),
            ("include /etc/nginx/conf.d/*.conf;",
             f"client_body_temp_path {temp}/body; proxy_temp_path {temp}/proxy; fastcgi_temp_path {temp}/fastcgi;\n"
             f"\tuwsgi_temp_path {temp}/uwsgi; scgi_temp_path {temp}/scgi;\n"
             f"\tinclude {prefix}/conf.d/*.conf;"),
            ("include /etc/nginx/sites-enabled/*;", f"include {prefix}/sites-enabled/*;"),
        ], DEBIAN_NGINX_CONF))
        (prefix / "conf.d" / "identity.conf").write_text(_rewritten(NGINX_SITE.read_text(), [
            ("listen 80;", f"listen 127.0.0.1:{self.port};"),
            ("server 127.0.0.1:8000;", f"server 127.0.0.1:{self.upstream_port};"),
        ], NGINX_SITE))
        if self.default_site:
            (prefix / "sites-enabled" / "default").write_text(_rewritten(DEBIAN_DEFAULT_SITE.read_text(), [
                ("listen 80 default_server;", f"listen 127.0.0.1:{self.port} default_server;"),
                ("listen [::]:80 default_server;", "# (the test leaves out the IPv6 socket)"),
            ], DEBIAN_DEFAULT_SITE))
        with open(prefix / "logs" / "stderr", "ab") as stderr:
            self.process = subprocess.Popen(
                [NGINX, "-p", str(prefix), "-e", str(prefix / "logs" / "error.log"), "-c", str(prefix / "nginx.conf"),
                 "-g", "daemon off;"],
                stdout=stderr, stderr=stderr, start_new_session=True,
            )
        return wait_until_ready(self, "nginx", timeout, headers={"Host": self.host})

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


class Cut:
    """How a server ended a request sent slowly: `seconds` from the connection's opening to the
    server's closing it (None: still open when the client gave up), and every byte it sent."""

    def __init__(self, seconds, received):
        self.seconds, self.received = seconds, received

    def __repr__(self):
        when = "still open" if self.seconds is None else f"closed after {self.seconds:.1f} s"
        return f"<{when}, having sent {self.received[:80]!r}>"


def slow_request(port, start, rest, drip_every=None, pause=25.0, limit=30.0):
    """Send `start` to 127.0.0.1:`port`, then `rest`: a byte every `drip_every` seconds, or, without
    it, all at once after a pause of `pause` seconds. Reads all the while, until the server closes
    the connection or `limit` seconds have passed since it opened; returns a Cut."""
    received = b""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        opened = time.monotonic()
        sock.sendall(start)
        next_send = opened + (drip_every if drip_every else pause)
        while time.monotonic() - opened < limit:
            if rest and time.monotonic() >= next_send:
                chunk, rest = (rest[:1], rest[1:]) if drip_every else (rest, b"")
                try:
                    sock.sendall(chunk)
                except OSError:
                    return Cut(time.monotonic() - opened, received)  # closed by the server meanwhile
                next_send += drip_every or 0
            wait = max(0.0, min(next_send if rest else opened + limit, opened + limit) - time.monotonic())
            readable, _, _ = select.select([sock], [], [], wait)
            if readable:
                try:
                    chunk = sock.recv(65536)
                except ConnectionResetError:
                    chunk = b""
                if not chunk:
                    return Cut(time.monotonic() - opened, received)
                received += chunk
    return Cut(None, received)


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


def exchange(port, request, timeout=15, half_close=True):
    """Send `request` (bytes) to 127.0.0.1:`port`, read until the server closes; returns an Answer.

    `half_close`: say at once that nothing more comes (a body cut short ends there). A proxy takes
    that for a client that went away and drops the request it is passing on (nginx logs 499):
    requests that nginx passes to gunicorn go with half_close=False and `Connection: close`.
    """
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        try:
            sock.sendall(request)
            if half_close:
                sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # the server may answer and close before taking the whole request
        chunks = []
        try:
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        except ConnectionResetError:
            pass
    return Answer(b"".join(chunks))
