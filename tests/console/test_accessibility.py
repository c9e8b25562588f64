"""Every console page in Chromium at 390 and 1,280 pixels wide: axe-core finds nothing serious or critical, nothing
is wider than the window, and every control is reached by the keyboard. The screenshots of docs/console.md
are taken here (see tests/common/browser.py for where they go)."""

import pytest
import requests

from tests.common.apps import OTHER_WALLET
from tests.common.browser import (
    ARGS,
    CHROMIUM,
    WAIT_MS,
    WIDTHS,
    Deployment,
    axe_source,
    overflows,
    playwright_or_skip,
    screenshot,
    serious_violations,
    sign_in,
)

# Focusable by the keyboard: what Tab must reach on a page.
FOCUSABLE = "a[href], button:not([hidden]), input:not([type=hidden]), select, textarea, [tabindex='0']"


@pytest.fixture(scope="module")
def deployment(tmp_path_factory):
    deployment = Deployment(tmp_path_factory.mktemp("console-a11y"))
    headers = {"x-api-key": deployment.admin_key}
    for body in ({"display_name": "Ada Lovelace", "description": "First programmer",
                  "external_reference": "https://example.org/ada"}, {"display_name": "Grace Hopper"},
                 {"display_name": "Taken down"}):
        created = requests.post(deployment.url + "/identity", json=body, headers=headers, timeout=10).json()
    requests.patch(f"{deployment.url}/identity/{created['identity_id']}", json={"status": "removed"},
                   headers=headers, timeout=10)
    # Nothing listens on port 9: every delivery fails, and the webhook shows its failures.
    webhook = requests.post(deployment.url + "/webhooks", json={"url": "http://127.0.0.1:9/hook", "after": 0,
                                                                "description": "A receiver that is down"},
                            headers=headers, timeout=10).json()
    requests.post(deployment.url + "/keys", json={"wallet": OTHER_WALLET, "label": "CI", "scope": "read"},
                  headers=headers, timeout=10)
    # A mirror of an upstream that is down (nothing listens on port 9): the status page shows its lag and error.
    upstream_key = "idsk_" + "u" * 43
    deployment.secrets.append(upstream_key)
    mirror = requests.post(deployment.url + "/mirrors", json={"url": "http://127.0.0.1:9", "key": upstream_key,
                                                              "name": "replica of the registry"},
                           headers=headers, timeout=10).json()
    deployment.identity_id = next(
        identity["identity_id"] for identity in requests.get(
            deployment.url + "/identities?q=ada", headers=headers, timeout=10).json()["data"])
    deployment.webhook_id = webhook["id"]
    deployment.mirror_id = mirror["id"]
    yield deployment
    deployment.stop()


@pytest.fixture(scope="module")
def browser():
    with playwright_or_skip()() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def axe():
    return axe_source()


def signed_in_pages(deployment):
    """(name, path) of every page of a signed-in Admin; the pages that answer a form come after them."""
    key_id = requests.get(f"{deployment.url}/keys?wallet={OTHER_WALLET}", timeout=10,
                          headers={"x-api-key": deployment.admin_key}).json()["data"][0]["id"]
    return [
        ("identities", "/admin/identities"),
        ("identities-searched", "/admin/identities?q=ada&sortBy=display_name&direction=asc"),
        ("identity", f"/admin/identities/{deployment.identity_id}"),
        ("keys", "/admin/keys"),
        ("key-revoke", f"/admin/keys/{key_id}/revoke"),
        ("webhooks", "/admin/webhooks"),
        ("webhook", f"/admin/webhooks/{deployment.webhook_id}"),
        ("webhook-delete", f"/admin/webhooks/{deployment.webhook_id}/delete"),
        ("mirrors", "/admin/mirrors"),
        ("mirror", f"/admin/mirrors/{deployment.mirror_id}"),
        ("mirror-remove", f"/admin/mirrors/{deployment.mirror_id}/remove"),
        ("changes", "/admin/changes"),
        ("audit", "/admin/audit"),
        ("status", "/admin/status"),
        ("not-found", "/admin/no-such-page"),
    ]


def check(page, name, width, axe, found):
    """axe-core and the window's width on the page shown; a screenshot of it."""
    page.wait_for_load_state()
    violations = serious_violations(page, axe)
    if violations:
        found.append((name, width, violations))
    if overflows(page):
        found.append((name, width, "wider than the window"))
    screenshot(page, name if width == "wide" else f"{name}-{width}")


@pytest.mark.parametrize("width", WIDTHS)
def test_no_page_has_a_serious_accessibility_violation_or_overflows(browser, deployment, axe, width):
    context = browser.new_context(viewport=WIDTHS[width])
    context.set_default_timeout(WAIT_MS)
    page, found = context.new_page(), []
    page.goto(f"{deployment.url}/admin/sign-in")
    check(page, "sign-in", width, axe, found)
    sign_in(page, deployment.url, deployment.user_key)
    check(page, "refused", width, axe, found)
    sign_in(page, deployment.url, deployment.admin_key)
    for name, path in signed_in_pages(deployment):
        page.goto(deployment.url + path)
        check(page, name, width, axe, found)
    page.goto(f"{deployment.url}/admin/status")
    mirrors = page.get_by_role("region", name="Mirror lag")
    mirrors.get_by_text("Last error").wait_for()  # the follower tried the upstream that is down
    screenshot(page, "status-mirrors" if width == "wide" else f"status-mirrors-{width}", mirrors)
    page.goto(f"{deployment.url}/admin/keys")
    page.get_by_role("region", name="Issue a key").get_by_label("Wallet").fill(OTHER_WALLET)
    page.get_by_role("button", name="Issue key").click()
    check(page, "key-issued", width, axe, found)
    page.goto(f"{deployment.url}/admin/webhooks")
    page.get_by_label("URL").fill("https://hooks.example.com/identity")
    page.get_by_role("button", name="Register").click()
    check(page, "webhook-registered", width, axe, found)
    context.close()
    assert found == []


def test_a_read_only_session_is_accessible_too(browser, deployment, axe):
    context = browser.new_context(viewport=WIDTHS["wide"])
    page, found = context.new_page(), []
    sign_in(page, deployment.url, deployment.read_key)
    for name, path in [(name, path) for name, path in signed_in_pages(deployment)
                       if name in ("identities", "identities-searched", "identity", "keys", "mirrors", "mirror")]:
        page.goto(deployment.url + path)
        assert page.locator("main form[method=post]").count() == 0, name  # nothing that writes
        check(page, f"read-only-{name}", "wide", axe, found)
    context.close()
    assert found == []


@pytest.mark.parametrize("path", ["/admin/identities", "/admin/keys", "/admin/webhooks", "/admin/mirrors"])
def test_every_control_is_reached_by_the_keyboard(browser, deployment, path):
    context = browser.new_context(viewport=WIDTHS["narrow"])
    page = context.new_page()
    sign_in(page, deployment.url, deployment.admin_key)
    page.goto(deployment.url + path)
    controls = page.evaluate(f"""() => Array.from(document.querySelectorAll("{FOCUSABLE}"))
        .filter(element => element.getClientRects().length > 0)
        .map((element, index) => {{ element.dataset.control = index; return index; }})""")
    reached = []
    for _ in range(len(controls) + 5):
        page.keyboard.press("Tab")
        focused = page.evaluate("() => document.activeElement && document.activeElement.dataset.control")
        if focused is not None and int(focused) not in reached:
            reached.append(int(focused))
    context.close()
    assert sorted(reached) == controls
