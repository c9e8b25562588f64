"""ethers, run by node: a wallet written by others that signs and verifies for tests/core.

package.json and package-lock.json pin ethers exactly; `npm ci` installs it into node_modules once,
reused while the lock is unchanged. sign.mjs takes a batch of requests per run, so a test module
starts node once or twice, not once a signature.
"""

import fcntl
import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def install():
    """Install the pinned ethers unless this lock's install is there; skip the test without node and npm."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if not node or not npm:
        pytest.skip("node and npm are missing: install Debian's nodejs and npm (.ci/run does)")
    digest = hashlib.sha256((HERE / "package-lock.json").read_bytes()).hexdigest()
    stamp = HERE / "node_modules" / ".identity-lock-sha256"
    # One installer at a time, should several pytest processes (xdist) get here at once.
    with open(HERE / ".npm-ci.lock", "w") as guard:
        fcntl.flock(guard, fcntl.LOCK_EX)
        if not stamp.exists() or stamp.read_text() != digest:
            installed = subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=HERE, capture_output=True,
                                       text=True, timeout=600)
            assert installed.returncode == 0, installed.stderr[-3000:]
            stamp.write_text(digest)


def ethers(requests):
    """Run sign.mjs over a list of requests (see its header) and return its answers, in order."""
    result = subprocess.run([shutil.which("node"), "sign.mjs"], cwd=HERE, input=json.dumps(requests),
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    answers = json.loads(result.stdout)
    assert len(answers) == len(requests)
    return answers
