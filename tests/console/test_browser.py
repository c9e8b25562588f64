"""The console in a real browser (Chromium, Playwright) against gunicorn: what an operator does, end to end."""

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests
from eth_account import Account
from eth_account.messages import encode_defunct

from identity.core import siwe
from tests.common.apps import OTHER_WALLET
from tests.common.browser import (
    ARGS,
    CHROMIUM,
    WAIT_MS,
    Deployment,
    axe_source,
    playwright_or_skip,
    screenshot,
    serious_violations,
    sign_in,
)
from tests.common.receiver import Receiver
from tests.wallets import address_of, private_key

MARKUP = "<img src=x onerror=alert(1)>"
# A browser wallet (EIP-1193) for the tests only, put in the page before its own scripts run: it answers with
# its account in lower case, as wallets do, and has the test sign (signForTest, a Playwright binding).
TEST_WALLET = """
window.ethereum = {
  request: async ({method, params}) => {
    if (method === "eth_requestAccounts") return [ACCOUNT];
    if (method === "eth_chainId") return "0x1";
    if (method === "personal_sign") return await window.signForTest(params[0], params[1]);
    throw Object.assign(new Error("The test wallet does not do " + method), {code: 4200});
  },
};
"""


@pytest.fixture(scope="module")
def deployment(tmp_path_factory):
    deployment = Deployment(tmp_path_factory.mktemp("console"))
    yield deployment
    deployment.stop()


@pytest.fixture(scope="module")
def browser():
    with playwright_or_skip()() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser, deployment):
    """A fresh browser profile's page; the test fails if the page's policy refused anything of its own."""
    context = browser.new_context(viewport={"width": 1280, "height": 800},
                                  permissions=["clipboard-read", "clipboard-write"])
    context.set_default_timeout(WAIT_MS)
    page = context.new_page()
    refused, urls = [], []
    page.on("console", lambda message: "Content Security Policy" in message.text and refused.append(message.text))
    page.on("request", lambda request: urls.append(request.url))
    yield page
    context.close()
    assert refused == []
    # No key and no secret ever travels in a URL (the sign-in and every form post their fields).
    assert [url for url in urls if "idsk_" in url or "whsec_" in url] == []


def api(deployment, method, path, key=None, **kwargs):
    headers = {"x-api-key": key or deployment.admin_key}
    return requests.request(method, deployment.url + path, headers=headers, timeout=10, **kwargs)


def create(deployment, body, key=None):
    answer = api(deployment, "POST", "/identity", key or deployment.user_key, json=body)
    assert answer.status_code == 201, answer.text
    return answer.json()


def test_sign_in_and_sign_out(page, deployment):
    page.goto(f"{deployment.url}/admin/keys")
    assert page.url.endswith("/admin/sign-in?next=/admin/keys")
    sign_in(page, deployment.url, deployment.admin_key)
    assert page.url == f"{deployment.url}/admin/keys"
    assert page.get_by_role("navigation", name="Console").is_visible()
    page.get_by_role("button", name="Sign out").click()
    page.get_by_text("You are signed out.").wait_for()
    page.goto(f"{deployment.url}/admin/identities")
    assert "/admin/sign-in" in page.url


def test_a_user_key_is_refused_with_a_page_that_says_why(page, deployment):
    sign_in(page, deployment.url, deployment.user_key)
    assert page.get_by_role("heading", level=1).inner_text() == "This key may not use the console"
    assert "User key" in page.get_by_role("alert").inner_text()


def with_test_wallet(page, key, account=None):
    """Give `page` a browser wallet of the private `key`, answering `account` (by default the key's, in lower case);
    returns the list of what it was asked to sign."""
    signed = []
    account = account or address_of(key).lower()

    def sign(data, asked_for):
        assert asked_for == account
        message = bytes.fromhex(data.removeprefix("0x")).decode()  # personal_sign's data: the message's UTF-8 bytes
        signed.append(message)
        return Account.sign_message(encode_defunct(text=message), key).signature.to_0x_hex()

    page.expose_function("signForTest", sign)
    page.add_init_script(TEST_WALLET.replace("ACCOUNT", repr(account)))
    return signed


def test_an_admin_wallet_signs_in_through_the_browsers_wallet_and_a_user_wallet_is_refused(page, deployment):
    admin_key, user_key = private_key("console browser admin"), private_key("console browser user")
    deployment.secrets += [deployment.key(address_of(admin_key), "Admin"), deployment.key(address_of(user_key), "User")]
    signed = with_test_wallet(page, admin_key)
    page.goto(f"{deployment.url}/admin/sign-in?next=/admin/keys")
    assert serious_violations(page, axe_source()) == []

    page.get_by_role("button", name="Sign in with a wallet").click()

    page.get_by_text(f"Signed in as {address_of(admin_key)}").wait_for()
    assert page.url == f"{deployment.url}/admin/keys"
    # The wallet signed the console's message as it was written: the address in its EIP-55 form, which the
    # console worked out from the wallet's lower case.
    [message] = signed
    parsed = siwe.parse(message)
    assert (parsed.domain, parsed.address) == (deployment.url.removeprefix("http://"), address_of(admin_key))
    assert (parsed.uri, parsed.chain_id) == (deployment.url, 1)
    assert page.get_by_role("cell", name="console sign-in").count() == 1
    page.get_by_role("button", name="Sign out").click()
    page.get_by_text("You are signed out.").wait_for()

    user_page = page.context.new_page()
    with_test_wallet(user_page, user_key)
    user_page.goto(f"{deployment.url}/admin/sign-in")
    user_page.get_by_role("button", name="Sign in with a wallet").click()
    user_page.get_by_role("heading", name="This wallet may not use the console").wait_for()
    assert "is a User's" in user_page.get_by_role("alert").inner_text()


def test_a_wallet_answering_no_address_is_told_so_and_asked_to_sign_nothing(page, deployment):
    signed = with_test_wallet(page, private_key("console browser admin"), account="0x1234")
    page.goto(f"{deployment.url}/admin/sign-in")

    page.get_by_role("button", name="Sign in with a wallet").click()

    state = page.get_by_role("status").filter(has_text="The service wrote no message to sign")
    state.wait_for()
    assert "Not an Ethereum address: expected 0x and 40 hex digits" in state.inner_text()
    assert signed == [] and page.get_by_role("button", name="Sign in with a wallet").is_enabled()


def test_without_javascript_there_is_no_wallet_button_and_the_key_signs_in(browser, deployment):
    context = browser.new_context(java_script_enabled=False)
    context.set_default_timeout(WAIT_MS)
    page = context.new_page()
    page.goto(f"{deployment.url}/admin/sign-in")
    assert page.get_by_role("button", name="Sign in with a wallet").count() == 0
    assert page.get_by_role("button").all_inner_texts() == ["Sign in"]
    sign_in(page, deployment.url, deployment.admin_key)
    assert page.get_by_role("navigation", name="Console").is_visible()
    context.close()


def test_search_an_identity_and_open_it(page, deployment):
    created = create(deployment, {"display_name": "Ada Lovelace", "description": "First programmer"})
    create(deployment, {"display_name": "Grace Hopper"})
    sign_in(page, deployment.url, deployment.admin_key)
    page.get_by_label("Search names and descriptions").fill("ada love")
    page.get_by_role("button", name="Search").click()
    page.get_by_text("1 identity matches").wait_for()
    assert "q=ada+love" in page.url  # a bookmarkable listing
    screenshot(page, "identities-search")
    page.get_by_role("link", name="Ada Lovelace").click()
    page.get_by_text("It hashes to its id").wait_for()
    assert page.url.endswith(created["identity_id"])
    page.go_back()
    assert page.get_by_label("Search names and descriptions").input_value() == "ada love"


def test_take_down_while_another_session_changed_it_shows_the_conflict(page, deployment):
    identity_id = create(deployment, {"display_name": "Contested"})["identity_id"]
    sign_in(page, deployment.url, deployment.admin_key)
    page.goto(f"{deployment.url}/admin/identities/{identity_id}")
    assert api(deployment, "PATCH", f"/identity/{identity_id}", json={"vault_id": "42"}).status_code == 200

    page.get_by_role("button", name="Take down").click()

    page.get_by_text("Someone else changed this identity after you opened it").wait_for()
    assert api(deployment, "GET", f"/identity/{identity_id}").json()["status"] == "complete"
    screenshot(page, "identity-conflict")
    page.get_by_role("button", name="Take down").click()  # the page now holds the identity as it is
    page.get_by_text("The identity is taken down").wait_for()
    assert api(deployment, "GET", f"/identity/{identity_id}").status_code == 410


def test_issue_a_key_copy_it_revoke_it_and_the_api_refuses_it(page, deployment):
    sign_in(page, deployment.url, deployment.admin_key)
    page.goto(f"{deployment.url}/admin/keys")
    page.get_by_role("region", name="Issue a key").get_by_label("Wallet").fill(OTHER_WALLET)
    page.get_by_label("Label").fill("from the console")
    page.get_by_role("button", name="Issue key").click()
    key = page.get_by_label("The new key").input_value()
    deployment.secrets.append(key)
    assert key.startswith("idsk_")
    screenshot(page, "key-copied")
    page.get_by_role("button", name="Copy").click()
    page.get_by_text("Copied to the clipboard.").wait_for()
    assert page.evaluate("() => navigator.clipboard.readText()") == key
    assert api(deployment, "GET", "/me", key).json()["key"]["label"] == "from the console"

    page.goto(f"{deployment.url}/admin/keys?wallet={OTHER_WALLET}")
    assert key not in page.content()
    page.get_by_role("link", name=f"Revoke the key of {OTHER_WALLET}").first.click()
    page.get_by_role("heading", name="Revoke this key?").wait_for()
    page.get_by_role("button", name="Revoke the key").click()
    page.get_by_text("The key is revoked").wait_for()
    deadline = time.monotonic() + 5  # each worker believes its last lookup for 1 s (IDENTITY_KEY_CACHE_SECONDS)
    while api(deployment, "GET", "/me", key).status_code != 401:
        assert time.monotonic() < deadline, "the API still accepts the revoked key"
        time.sleep(0.2)


def test_register_a_webhook_pause_it_and_see_its_deliveries(page, deployment):
    sign_in(page, deployment.url, deployment.admin_key)
    with Receiver() as receiver:
        page.goto(f"{deployment.url}/admin/webhooks")
        page.get_by_label("URL").fill(receiver.url)
        page.get_by_label("Description").fill("Search index")
        page.get_by_role("button", name="Register").click()
        receiver.secret = page.get_by_label("Signing secret").input_value()
        deployment.secrets.append(receiver.secret)
        created = create(deployment, {"display_name": "Delivered"})
        assert receiver.wait_for(lambda r: r.delivered(), timeout=30)
        assert receiver.deliveries[0]["entry"]["identity_id"] == created["identity_id"]
        page.get_by_role("link", name="See the webhook and its deliveries").click()
        page.get_by_role("cell", name="204").wait_for()
        page.get_by_role("button", name="Pause").click()
        page.get_by_text("The webhook is paused").wait_for()
        screenshot(page, "webhook-paused")
        create(deployment, {"display_name": "Not delivered"})
        time.sleep(1)
        assert len(receiver.deliveries) == 1
        page.goto(f"{deployment.url}/admin/webhooks")
        assert "paused" in page.get_by_role("row").nth(1).inner_text()


def test_add_a_mirror_see_its_error_pause_it_replace_its_key_and_remove_it(page, deployment):
    upstream_key, new_key = "idsk_" + "m" * 43, "idsk_" + "n" * 43
    deployment.secrets += [upstream_key, new_key]  # in no log line (Deployment.stop checks)
    sign_in(page, deployment.url, deployment.admin_key)
    page.goto(f"{deployment.url}/admin/mirrors")
    page.get_by_label("Upstream URL").fill("http://127.0.0.1:9")  # nothing listens there: the upstream is down
    page.get_by_label("Upstream API key").fill(upstream_key)
    page.get_by_label("Name").fill("down the hall")
    page.get_by_role("button", name="Add mirror").click()
    page.get_by_text("The mirror is added").wait_for()
    mirror_id = page.url.split("/admin/mirrors/", 1)[1].split("?", 1)[0]
    [mirror] = [mirror for mirror in api(deployment, "GET", "/mirrors").json()["data"] if mirror["id"] == mirror_id]
    assert (mirror["name"], mirror["active"]) == ("down the hall", True)
    deadline = time.monotonic() + 30
    while "Last error" not in page.content():  # the follower tried the upstream, and its page says so
        assert time.monotonic() < deadline, "no error shown for an upstream that is down"
        time.sleep(0.5)
        page.reload()
    page.get_by_role("button", name="Pause").click()
    page.get_by_text("The mirror is paused").wait_for()
    assert api(deployment, "GET", f"/mirrors/{mirror_id}").json()["active"] is False
    page.get_by_label("New upstream API key").fill(new_key)
    page.get_by_role("button", name="Replace key").click()
    page.get_by_text("key is replaced").wait_for()
    assert upstream_key not in page.content() and new_key not in page.content()
    page.get_by_role("link", name="Remove…").click()
    page.get_by_role("button", name="Remove the mirror").click()
    page.get_by_text("The mirror is removed").wait_for()
    assert mirror_id not in [mirror["id"] for mirror in api(deployment, "GET", "/mirrors").json()["data"]]


def test_an_entry_appears_on_the_changes_page_after_a_create_by_the_api(page, deployment):
    sign_in(page, deployment.url, deployment.admin_key)
    page.goto(f"{deployment.url}/admin/changes")
    page.get_by_text("New entries appear here as they are committed.").wait_for()
    page.evaluate("() => { window.stayed = true; }")

    created = create(deployment, {"display_name": "Live one"})

    page.locator("#changes tbody tr").first.get_by_role("link", name=created["identity_id"]).wait_for()
    assert page.evaluate("() => window.stayed") is True  # no reload
    screenshot(page, "changes-live")


def test_a_cross_site_form_post_is_refused(page, deployment):
    evil = EvilSite(f"{deployment.url}/admin/keys").start()
    try:
        sign_in(page, deployment.url, deployment.admin_key)
        before = api(deployment, "GET", "/keys").json()["total"]
        page.goto(evil.url)
        page.get_by_role("button", name="Win a prize").click()
        page.get_by_text("was not sent from the console's own pages").wait_for()
        assert api(deployment, "GET", "/keys").json()["total"] == before
    finally:
        evil.stop()


def test_an_identity_named_with_markup_is_shown_as_text_and_runs_nothing(page, deployment):
    created = create(deployment, {"display_name": MARKUP})
    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    sign_in(page, deployment.url, deployment.admin_key)
    page.goto(f"{deployment.url}/admin/changes")
    page.get_by_text("New entries appear here as they are committed.").wait_for()
    create(deployment, {"display_name": MARKUP + " again"})  # arrives by the live feed's script
    page.get_by_role("link", name=created["identity_id"]).first.wait_for()
    for path in ("/admin/identities", f"/admin/identities/{created['identity_id']}"):
        page.goto(deployment.url + path)
        assert page.get_by_text(MARKUP, exact=True).first.is_visible()
        assert page.locator("main img").count() == 0
    assert dialogs == []


def test_the_cookie_is_secure_behind_the_proxy_recipe(deployment):
    """nginx (deploy/nginx.conf) sends X-Forwarded-Proto; gunicorn trusts it from 127.0.0.1."""
    forwarded = {"X-Forwarded-Proto": "https"}
    page = requests.get(f"{deployment.url}/admin/sign-in", headers=forwarded, timeout=10)
    assert "; Secure" in page.headers["Set-Cookie"]
    form_token = page.text.split('name="form_token" value="', 1)[1].split('"', 1)[0]
    # Sent back as a browser on https would: a Secure cookie, and the https origin.
    headers = {**forwarded, "Origin": deployment.url.replace("http://", "https://"),
               "Cookie": page.headers["Set-Cookie"].split(";", 1)[0]}
    answer = requests.post(f"{deployment.url}/admin/sign-in", allow_redirects=False, timeout=10, headers=headers,
                           data={"form_token": form_token, "key": deployment.admin_key})
    assert answer.status_code == 303
    cookie = answer.headers["Set-Cookie"]
    assert cookie.startswith("identity_console=") and "; Secure" in cookie and "SameSite=Strict" in cookie
    plain = requests.get(f"{deployment.url}/admin/sign-in", timeout=10)  # over http, as without the proxy
    assert "Secure" not in plain.headers["Set-Cookie"]


class EvilSite:
    """Another origin (another port of 127.0.0.1) whose page holds a form that posts to `target`."""

    def __init__(self, target):
        body = (f'<!doctype html><title>Prize</title><form method="post" action="{target}">'
                f'<input type="hidden" name="wallet" value="{OTHER_WALLET}">'
                '<input type="hidden" name="csrf_token" value="guessed">'
                "<button>Win a prize</button></form>").encode()

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"

    def start(self):
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self):
        self.server.shutdown()
        self.server.server_close()
