"""A real browser on the console: Debian's Chromium driven by Playwright for Python, against the service as it is
deployed (gunicorn, tests/common/live.py), and axe-core (pinned in package-lock.json here) run in its pages.

Playwright cannot download its own browser here; it launches the system's. The network is cut to loopback
(a dead proxy), so a page that needed anything from outside would show it.
"""

import os
import shutil
from pathlib import Path

import pytest

from tests.common.apps import ADMIN_WALLET, USER_WALLET
from tests.common.live import LiveServer, flask_cli, free_port, prepare_database
from tests.common.npm import npm_ci

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ROOT / "tests" / "console"  # the console tests' npm packages (axe-core)
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run", "--proxy-server=http://127.0.0.1:9"]
WIDTHS = {"wide": {"width": 1280, "height": 800}, "narrow": {"width": 390, "height": 844}}
# Where the tests' screenshots go: docs/console/ when IDENTITY_CONSOLE_SCREENSHOTS names it (docs/console.md says
# how to take them again), else the run's artifacts.
SCREENSHOTS = Path(os.environ.get("IDENTITY_CONSOLE_SCREENSHOTS") or ROOT / "test-artifacts" / "console")
# How long a page may take to show what a test waits for, in milliseconds.
WAIT_MS = 10_000
SERVER_ENV = {
    # A revocation reaches the other worker's key cache within a second.
    "IDENTITY_KEY_CACHE_SECONDS": "1",
    # The webhook test's receiver listens on 127.0.0.1.
    "IDENTITY_WEBHOOKS_ALLOW_PRIVATE": "1",
    "IDENTITY_WEBHOOK_POLL_SECONDS": "0.1",
}


def playwright_or_skip():
    if not os.path.exists(CHROMIUM):
        pytest.skip("Debian's chromium is not installed (.ci/run installs it: apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    return sync_playwright


def axe_source():
    """axe-core's script, from the console tests' pinned npm packages."""
    npm_ci(PACKAGES)
    return (PACKAGES / "node_modules" / "axe-core" / "axe.min.js").read_text()


class Deployment:
    """The console's server (gunicorn, two workers, on an SQLite file) and its keys."""

    def __init__(self, folder):
        self.database_url = f"sqlite:///{folder / 'identity.db'}"
        self.admin_key = prepare_database(self.database_url, ADMIN_WALLET)
        self.user_key = self.key(USER_WALLET, "User")
        self.read_key = self.key(ADMIN_WALLET, "Admin", "--scope", "read")
        # Sign-in with Ethereum on, for the address the browser opens: the sign-in page has its wallet button.
        port = free_port()
        siwe = {"IDENTITY_SIWE_DOMAIN": f"127.0.0.1:{port}", "IDENTITY_SIWE_URI": f"http://127.0.0.1:{port}"}
        self.server = LiveServer(self.database_url, workers=2, env={**SERVER_ENV, **siwe}, port=port).start()
        self.url = self.server.url
        # Every key and webhook secret the tests saw: none may reach the server's logs (see stop).
        self.secrets = [self.admin_key, self.user_key, self.read_key]

    def stop(self):
        """Stop the server, and fail if its logs hold a key or a webhook secret."""
        logs = self.server.stdout() + self.server.stderr()
        self.server.stop()
        assert logs, "the server logged nothing: the check below would prove nothing"
        assert [secret[:12] for secret in self.secrets if secret in logs] == []
        assert "whsec_" not in logs

    def key(self, wallet, role, *options):
        return flask_cli(self.database_url, "keys", "create", "--wallet", wallet, "--role", role,
                         *options).strip().splitlines()[-1]


def serious_violations(page, source):
    """What axe-core finds serious or critical on the page: [(rule id, its help, the first target)]."""
    if not page.evaluate("() => typeof window.axe !== 'undefined'"):
        page.evaluate(source)  # evaluated by the driver: the page's own policy allows no injected script
    results = page.evaluate("() => axe.run(document, {resultTypes: ['violations']})")
    return [(v["id"], v["help"], v["nodes"][0]["target"]) for v in results["violations"]
            if v["impact"] in ("serious", "critical")]


def overflows(page):
    """Whether the page is wider than the window (a sideways scroll of the whole page)."""
    return page.evaluate("() => document.documentElement.scrollWidth > window.innerWidth + 1")


def screenshot(page, name, part=None):
    """The page's window, or only `part` of it (a locator), in SCREENSHOTS/`name`.png."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    (part or page).screenshot(path=path)
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return data


def sign_in(page, url, key):
    """Sign in through the form (the one on the page, or the sign-in page's), sent by Enter as a keyboard does."""
    if page.get_by_label("Admin API key").count() == 0:
        page.goto(f"{url}/admin/sign-in")
    with page.expect_navigation():
        page.get_by_label("Admin API key").fill(key)
        page.get_by_label("Admin API key").press("Enter")
