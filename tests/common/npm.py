"""The npm packages some tests run (axe-core, viem and anvil, the client generators): each folder's
package-lock.json installed by `npm ci` once for as long as it is unchanged."""

import fcntl
import hashlib
import shutil
import subprocess

import pytest


def npm_ci(folder):
    """Install `folder`'s pinned packages unless this lock's install is there (node_modules/.bin is returned);
    skip the test without node and npm."""
    npm = shutil.which("npm")
    if not shutil.which("node") or not npm:
        pytest.skip("node and npm are missing: install Debian's nodejs and npm (.ci/run does)")
    digest = hashlib.sha256((folder / "package-lock.json").read_bytes()).hexdigest()
    stamp = folder / "node_modules" / ".identity-lock-sha256"
    # One installer at a time, should several pytest processes (xdist) get here at once.
    with open(folder / ".npm-ci.lock", "w") as guard:
        fcntl.flock(guard, fcntl.LOCK_EX)
        if not stamp.exists() or stamp.read_text() != digest:
            installed = subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=folder, capture_output=True,
                                       text=True, timeout=600)
            assert installed.returncode == 0, installed.stderr[-3000:]
            stamp.write_text(digest)
    return folder / "node_modules" / ".bin"
