"""The README's shell examples, pasted in order into one shell as a newcomer would, against a live server.

"Start here" is what the fixture does (`make run`: a migrated database, gunicorn, the venv's flask);
every ```sh block from "## Using the API" on then runs as written, in one bash, with `set -euo pipefail`.
"""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.live import BIN, ROOT, LiveServer, flask_cli

README = ROOT / "README.md"
END_OF_BLOCK = "@@ end of README block"


def readme_blocks():
    text = README.read_text()
    after = text[text.index("## Using the API"):]
    return re.findall(r"^```sh\n(.*?)^```", after, flags=re.S | re.M)


@pytest.fixture
def served(tmp_path):
    if not shutil.which("curl"):
        pytest.skip("curl is missing: the README's examples use it")
    if not (ROOT / ".venv" / "bin" / "flask").exists():
        pytest.skip("the README's examples use .venv/bin/flask, which `make install` creates")
    database_url = f"sqlite:///{tmp_path / 'identity.db'}"
    flask_cli(database_url, "db", "upgrade")
    server = LiveServer(database_url, workers=1).start()
    yield server
    server.stop()


def test_readme_has_the_examples_a_newcomer_pastes():
    blocks = readme_blocks()
    assert len(blocks) >= 8
    joined = "\n".join(blocks)
    for variable in ("BASE", "KEY", "ID", "WALLET", "NEXT", "ADMIN_KEY"):
        assert re.search(rf"^{variable}=", joined, flags=re.M), f"${variable} is never set"
    assert "127.0.0.1:8000/" not in joined, "examples use $BASE"


def test_readme_examples_run_in_order_as_written(served):
    blocks = readme_blocks()
    script = "set -euo pipefail\n" + "".join(f"{block}\necho '{END_OF_BLOCK} {n}'\n" for n, block in enumerate(blocks))
    env = {
        **os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "PORT": str(served.port),
        "DATABASE_URL": served.database_url,
    }
    result = subprocess.run(["bash", "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    outputs = re.split(rf"{END_OF_BLOCK} \d+\n", result.stdout)
    try:
        assert result.returncode == 0, f"block {len(outputs) - 1} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
        assert len(outputs) == len(blocks) + 1
        # No example answered a problem (every error body is problem details, "about:blank").
        for n, output in enumerate(outputs[:-1]):
            assert "about:blank" not in output, (n, blocks[n], output)
        created = outputs[1]
        identity_id = re.search(r'"identity_id":"(did:identity:ipfs:bafkrei[a-z2-7]{52})"', created).group(1)
        # The content check prints the content_id, the last part of the identity_id.
        assert identity_id.rsplit(":", 1)[1] in outputs[4].split()
    finally:
        for line in result.stdout.splitlines():
            if re.fullmatch(r"/tmp/identity-[0-9-]+\.db", line):
                Path(line).unlink(missing_ok=True)
