"""`make run` and `make dev` as a newcomer uses them: the first key, sign-in with a wallet, Ctrl-C, kill, and
what the log shows.

Each test runs the real make in a process group of its own (as a terminal's foreground job is), on a
fresh SQLite database and a free port; `make install` has run (`make test` does it first).
"""

import json
import os
import re
import signal
import subprocess
import time

import pytest
import requests

from tests.common.apps import restore_ctrl_c
from tests.common.live import ROOT, free_port
from tests.wallets import address_of, private_key, sign_messages, siwe_message

pytestmark = pytest.mark.skipif(
    not (ROOT / ".venv" / ".installed").exists(), reason="make install has not run: make run would install first"
)


class Make:
    def __init__(self, target, tmp_path):
        self.port = free_port()
        self.out, self.err = tmp_path / "stdout", tmp_path / "stderr"
        env = {
            **os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'identity.db'}",
            "IDENTITY_RATELIMIT_READ": "100000/minute", "IDENTITY_RATELIMIT_CREATE": "100000/minute",
        }
        env.pop("PROMETHEUS_MULTIPROC_DIR", None)
        with open(self.out, "wb") as out, open(self.err, "wb") as err:
            self.process = subprocess.Popen(
                ["make", target, "HOST=127.0.0.1", f"PORT={self.port}"], cwd=ROOT, env=env, stdout=out, stderr=err,
                start_new_session=True, preexec_fn=restore_ctrl_c,  # as a terminal's make would get it
            )
        self.url = f"http://127.0.0.1:{self.port}"

    def wait_until_ready(self, timeout=120):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.err.read_text()
            try:
                if requests.get(self.url + "/readyz", timeout=5).status_code == 200:
                    return self
            except requests.RequestException:
                pass
            time.sleep(0.2)
        raise AssertionError("make did not serve: " + self.err.read_text()[-2000:])

    def group_alive(self):
        try:
            os.killpg(self.process.pid, 0)
        except ProcessLookupError:
            return False
        return True

    def wait_until_group_gone(self, timeout=60):
        deadline = time.monotonic() + timeout
        while self.group_alive() and time.monotonic() < deadline:
            time.sleep(0.2)
        return not self.group_alive()

    def stop(self):
        if self.group_alive():
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)


@pytest.fixture
def make(tmp_path):
    started = []

    def start(target):
        started.append(Make(target, tmp_path))
        return started[-1].wait_until_ready()

    yield start
    for running in started:
        running.stop()


def test_make_run_on_a_fresh_database_prints_a_first_key_that_works(make):
    served = make("run")
    key = _printed_key(served)
    response = requests.post(served.url + "/identity", json={"display_name": "Hello"}, headers={"x-api-key": key})
    assert response.status_code == 201


def test_make_run_turns_sign_in_with_ethereum_on_for_its_own_address(make, ethers):
    served = make("run")
    offered = requests.get(served.url + "/auth/nonce", timeout=10).json()
    assert (offered["domain"], offered["uri"]) == (f"127.0.0.1:{served.port}", served.url)
    key = private_key("make run")
    message = siwe_message(offered["domain"], address_of(key), offered["nonce"], uri=offered["uri"])
    signed_in = requests.post(served.url + "/auth/siwe", json={"message": message, "signature": sign_messages(
        [(key, message)])[0]}, timeout=10)
    assert signed_in.status_code == 201, signed_in.text
    assert signed_in.json()["wallet"] == address_of(key)


def _printed_key(served):
    keys = [line for line in served.out.read_text().splitlines() if line.startswith("idsk_")]
    assert len(keys) == 1, served.out.read_text()
    assert "A development Admin key was issued" in served.err.read_text()
    return keys[0]


def test_ctrl_c_on_make_run_stops_everything_without_a_traceback(make):
    served = make("run")
    os.killpg(served.process.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole foreground group
    served.process.wait(timeout=60)
    assert served.wait_until_group_gone()
    stderr = served.err.read_text()
    assert "Traceback" not in stderr and "SystemExit" not in stderr, stderr[-3000:]
    # From gunicorn's first line on (before it, `keys bootstrap` logs the key's issue and prints its hint).
    served_lines = stderr[stderr.rindex("\n", 0, stderr.index('"logger":"gunicorn')) + 1:].splitlines()
    assert all(line.startswith("{") or line.startswith("make: ") for line in served_lines), served_lines


def test_kill_of_makes_pid_leaves_no_gunicorn_behind(make):
    served = make("run")
    os.kill(served.process.pid, signal.SIGTERM)  # `kill <pid of make>`
    served.process.wait(timeout=60)
    assert served.wait_until_group_gone(), "gunicorn kept serving after make was killed"
    with pytest.raises(requests.ConnectionError):
        requests.get(served.url + "/healthz", timeout=5)


def test_make_dev_issues_a_first_key_and_logs_each_request_once_as_plain_json(make):
    served = make("dev")
    key = _printed_key(served)
    for _ in range(3):
        assert requests.get(served.url + "/identities", headers={"x-api-key": key}).status_code == 200
    def logged():
        output = served.out.read_text() + served.err.read_text()
        lines = [json.loads(line) for line in output.splitlines() if line.startswith('{"level"')]
        return output, [line for line in lines if "/identities" in line["message"]]

    deadline = time.monotonic() + 30
    while len(logged()[1]) < 3 and time.monotonic() < deadline:
        time.sleep(0.1)  # the last lines reach the file
    output, listing = logged()
    assert "\x1b" not in output and "\\u001b" not in output
    assert len(listing) == 3, listing
    assert all(line["logger"] == "identity.access" for line in listing)


def test_make_run_on_a_database_that_does_not_answer_says_why_in_one_line(tmp_path):
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'no-such-folder' / 'identity.db'}"}
    result = subprocess.run(["make", "run", f"PORT={free_port()}"], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode != 0
    # make's own closing line says "make:", or "make[1]:" when make test runs this test.
    lines = [line for line in result.stderr.splitlines() if not re.match(r"make(\[\d+\])?: ", line)]
    assert len(lines) == 1 and lines[0].startswith("Error: The database does not answer:"), result.stderr
    assert "Traceback" not in result.stdout + result.stderr
