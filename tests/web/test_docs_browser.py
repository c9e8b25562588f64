"""/docs in a real headless Chromium, with the network cut: it renders every route from the service alone."""

import json
import shutil
import struct
import subprocess
from html.parser import HTMLParser

import pytest
import requests

from tests.common.live import ROOT

CHROMIUM = shutil.which("chromium")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="Debian's chromium is not installed (.ci/run installs it: apt-get install chromium)"
)
ARTIFACTS = ROOT / "test-artifacts"


def chromium(profile, *args):
    """Run headless Chromium with no way out but the loopback interface; returns its standard output."""
    command = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={profile}",
        # The network is cut: everything but loopback (which Chromium never proxies) goes to a dead proxy.
        "--proxy-server=http://127.0.0.1:9",
        # Virtual time runs until the page is idle (scripts loaded, /openapi.json fetched, rendered).
        "--virtual-time-budget=10000",
        *args,
    ]
    run = subprocess.run([str(part) for part in command], check=False, capture_output=True, text=True, timeout=90)
    assert run.returncode == 0, run.stderr[-5000:]
    return run.stdout


class Operations(HTMLParser):
    """(method, path) of each operation that Swagger UI rendered."""

    def __init__(self):
        super().__init__()
        self.method = None
        self.found = set()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        classes = (attrs.get("class") or "").split()
        if "opblock" in classes:
            # Its method's class; a deprecated operation (an alias) bears opblock-deprecated instead, and its
            # method is the text of its summary's method label.
            self.method = next((c.removeprefix("opblock-") for c in classes if c.startswith("opblock-")), None)
        self.reading_method = self.method == "deprecated" and "opblock-summary-method" in classes
        if "data-path" in attrs and self.method:
            self.found.add((self.method, attrs["data-path"]))

    def handle_data(self, data):
        if getattr(self, "reading_method", False):
            self.method, self.reading_method = data.strip().lower(), False


def page_requests(net_log, origin):
    """The URLs the page itself asked for (Chromium's own background requests set aside)."""
    log = json.loads(net_log.read_text())
    start = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    site = origin.rsplit(":", 1)[0]  # a network isolation key names the site: scheme and host, no port
    params = [event.get("params", {}) for event in log["events"] if event["type"] == start]
    return {p["url"] for p in params if "url" in p and site in p.get("network_isolation_key", "")}


def test_docs_renders_every_route_offline_from_assets_the_service_serves(live_server, tmp_path):
    document = requests.get(f"{live_server.url}/openapi.json", timeout=10).json()
    documented = {
        (method, path) for path, item in document["paths"].items() for method in item if method != "parameters"
    }
    net_log = tmp_path / "net-log.json"

    dom = chromium(tmp_path / "profile", f"--log-net-log={net_log}", "--dump-dom", f"{live_server.url}/docs")

    rendered = Operations()
    rendered.feed(dom)
    assert rendered.found == documented
    for path in ("/identity/{identity_id}", "/identities", "/healthz", "/readyz", "/identity/{identity_id}/content"):
        assert f'data-path="{path}"' in dom
    fetched = page_requests(net_log, live_server.url)
    assert fetched, "the net log recorded no request of the page"
    assert {url for url in fetched if not url.startswith(live_server.url + "/")} == set()
    assert {f"{live_server.url}/docs/assets/swagger-ui-bundle.js", f"{live_server.url}/docs/assets/swagger-ui.css",
            f"{live_server.url}/openapi.json"} <= fetched


def test_docs_screenshot_is_stored_as_a_test_artifact(live_server, tmp_path):
    ARTIFACTS.mkdir(exist_ok=True)
    screenshot = ARTIFACTS / "docs.png"
    screenshot.unlink(missing_ok=True)

    chromium(tmp_path / "profile", f"--screenshot={screenshot}", "--window-size=1280,2000", f"{live_server.url}/docs")

    data = screenshot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", data[16:24]) == (1280, 2000)
    # A blank or error page compresses to a few kilobytes; the rendered operations list does not.
    assert len(data) > 40_000, len(data)
