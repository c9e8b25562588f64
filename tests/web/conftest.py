"""The web tests' fixtures: the generated clients' npm tools."""

import fcntl
import hashlib
import shutil

import pytest

from tests.common.clients import TS, run


@pytest.fixture(scope="module")
def npm_tools():
    """The pinned npm tools, installed by `npm ci` once for as long as package-lock.json is unchanged."""
    if not (shutil.which("node") and shutil.which("npm")):
        pytest.skip("node and npm are missing: install Debian's nodejs and npm (.ci/run does)")
    lock = (TS / "package-lock.json").read_bytes()
    stamp = TS / "node_modules" / ".identity-lock-sha256"
    digest = hashlib.sha256(lock).hexdigest()
    # One installer at a time, should several pytest processes (xdist) get here at once.
    with open(TS / ".npm-ci.lock", "w") as guard:
        fcntl.flock(guard, fcntl.LOCK_EX)
        if not stamp.exists() or stamp.read_text() != digest:
            run(["npm", "ci", "--no-audit", "--no-fund"], cwd=TS)
            stamp.write_text(digest)
    return TS / "node_modules" / ".bin"
