"""The shell examples of the README and of every page of docs/, pasted as a newcomer would, against a live server.

"Start here" is what the test does itself (`make run`: a migrated database, gunicorn, the venv's flask). The
README's ```sh blocks from "## Using the API" on then run as written, in order, in one bash with `set -euo
pipefail`; then each page's blocks, in order, in a bash that has the variables the README's blocks set, pages
in the order of their names. The shells work in a folder of their own whose .venv and app.py are the project's,
so that what the blocks write stays out of the project. A block marked in its info string (tests/common/pasted.py, MARKS) runs only where the
test has what its marks name: `sqlite` and `postgresql` blocks on that backend (this test runs on both),
`stopped` blocks with the server stopped around them; `nginx`, `elsewhere`, `s3`, `ipfs` and `minutes` blocks
never.
"""

import os
import re
import shutil

import pytest
import requests

from tests.common.apps import ADMIN_WALLET
from tests.common.live import BIN, ROOT, LiveServer, free_port, prepare_database
from tests.common.pasted import MARKS, BlockFailed, Shell, blocks, pages, project_folder, readme_blocks

FLASK = re.compile(r"(?<![\w./-])flask\s")
PG_TOOLS = re.compile(r"\b(pg_dump|pg_restore|psql|pg_dumpall)\b[^\n]*")


def every_block():
    return readme_blocks() + [block for page in pages() for block in blocks(page)]


def test_readme_has_the_examples_a_newcomer_pastes():
    found = readme_blocks()
    assert len(found) >= 8
    joined = "\n".join(block.text for block in found)
    for variable in ("BASE", "KEY", "ID", "WALLET", "NEXT", "ADMIN_KEY"):
        assert re.search(rf"^{variable}=", joined, flags=re.M), f"${variable} is never set"


@pytest.mark.parametrize("block", every_block(), ids=str)
def test_every_block_pastes_as_written(block):
    """The venv's flask, the README's $BASE rather than an address, a URL libpq reads, and marks that say why."""
    assert block.marks <= set(MARKS), f"unknown marks {sorted(block.marks - set(MARKS))}; known: {sorted(MARKS)}"
    if block.marks & {"elsewhere", "nginx"}:
        return  # another machine's addresses and programs
    assert not FLASK.search(block.text), "run the project's .venv/bin/flask, not whichever flask is on PATH"
    assert not re.search(r"(127\.0\.0\.1|localhost):\d", block.text), "use $BASE, which the README sets"
    for command in PG_TOOLS.finditer(block.text):
        assert "DATABASE_URL" not in command.group(), "libpq does not read postgresql+psycopg://: give it $PG_URL"


def test_the_readme_then_every_page_runs_in_order_as_written(database_url, backend, tmp_path):
    if not shutil.which("curl"):
        pytest.fail("curl is missing: the examples use it (Debian's curl package)")
    if not (ROOT / ".venv" / "bin" / "flask").exists():
        pytest.fail("the examples use .venv/bin/flask, which `make install` creates")
    has = {backend, "stopped"}
    port = free_port()
    # As `make run` does: sign-in with Ethereum on, for the server's own address.
    siwe = {"IDENTITY_SIWE_DOMAIN": f"127.0.0.1:{port}", "IDENTITY_SIWE_URI": f"http://127.0.0.1:{port}"}
    server = LiveServer(database_url, workers=1, port=port, env=siwe).start()
    env = {
        **os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "PORT": str(server.port),
        "DATABASE_URL": database_url,
    }
    folder = project_folder(tmp_path / "project")
    ran, skipped = [], []
    try:
        with Shell(env, folder) as shell:
            readme = [paste(shell, block, server, has, ran, skipped) for block in readme_blocks()]
            check_the_readmes_answers(readme)
            # What a shell holds after the README: its variables, for each page's own shell.
            names = sorted({name for block in readme_blocks() for name in re.findall(r"^(\w+)=", block.text, re.M)})
            state = shell.run(f"declare -p {' '.join(names)}", "the README's variables")
        for page in pages():
            with Shell(env, folder) as shell:
                shell.run(state, "the README's variables")
                for block in blocks(page):
                    paste(shell, block, server, has, ran, skipped)
    finally:
        server.stop()
    assert ran, "no block ran"
    print(f"{len(ran)} blocks ran; not run here: " + "; ".join(skipped))


def paste(shell, block, server, has, ran, skipped):
    """Run `block` in `shell` if this test has what its marks need; returns what it printed (None if not run)."""
    missing = block.marks - has
    if missing:
        skipped.append(f"{block}: {', '.join(MARKS[mark] for mark in sorted(missing))}")
        return None
    if "stopped" in block.marks:
        server.stop()
    try:
        printed = shell.run(block.text, str(block))
    finally:
        if "stopped" in block.marks:
            server.start()
    # No example answered a problem: every error body is problem details, of type "about:blank".
    assert "about:blank" not in printed, f"{block} answered a problem:\n{block.text}\n--- it printed:\n{printed}"
    ran.append(block)
    return printed


def check_the_readmes_answers(printed):
    created = printed[1]
    identity_id = re.search(r'"identity_id":"(did:identity:ipfs:bafkrei[a-z2-7]{52})"', created).group(1)
    # The content check prints the content_id, the last part of the identity_id.
    assert identity_id.rsplit(":", 1)[1] in printed[4].split()



def test_the_if_match_example_stops_on_an_identity_without_an_etag_and_changes_nothing(database_url, backend):
    """A removed identity's GET is 410, without an ETag, and curl leaves out an empty header: pasted then, the
    docs' conditional PATCH must stop, not change the identity unconditionally."""
    [block] = [block for block in blocks(ROOT / "docs" / "curation-and-feed.md") if "If-Match" in block.text]
    admin_key = prepare_database(database_url, ADMIN_WALLET)
    server = LiveServer(database_url, workers=1).start()
    headers = {"x-api-key": admin_key}
    try:
        identity_id = requests.post(server.url + "/identity", json={"display_name": "Conditional"}, headers=headers,
                                    timeout=10).json()["identity_id"]
        env = {**os.environ, "BASE": server.url, "ADMIN_KEY": admin_key, "ID": identity_id}

        with Shell(env, ROOT) as shell:  # live: the ETag is sent, and the change made
            printed = shell.run(block.text, str(block))
        assert f'"identity_id":"{identity_id}"' in printed.replace(" ", "") and '"status":"pending"' in printed.replace(" ", "")
        assert requests.patch(f"{server.url}/identity/{identity_id}", json={"status": "removed"}, headers=headers,
                              timeout=10).status_code == 200
        with Shell(env, ROOT) as shell, pytest.raises(BlockFailed, match="no ETag"):
            shell.run(block.text, str(block))
        assert requests.get(f"{server.url}/identity/{identity_id}", headers=headers, timeout=10).status_code == 410
    finally:
        server.stop()
