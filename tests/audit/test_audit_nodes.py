"""Two nodes (two processes) appending to one audit log at once, on SQLite and on PostgreSQL: one chain, no fork,
no number used twice or skipped."""

import subprocess
import sys
import time
from pathlib import Path

from tests.common.audit import entries, verified

COUNT = 40


def test_two_processes_writing_at_once_keep_one_chain(app, database_url, tmp_path):
    go = tmp_path / "go"
    nodes = [subprocess.Popen([sys.executable, "-m", "tests.common.audit_writer", database_url, name, str(COUNT), str(go)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=Path(__file__).parents[2])
             for name in ("a", "b")]
    deadline = time.monotonic() + 60
    while not all(Path(f"{go}.{name}.ready").exists() for name in ("a", "b")):
        assert time.monotonic() < deadline and all(node.poll() is None for node in nodes), [
            node.communicate() for node in nodes if node.poll() is not None]
        time.sleep(0.01)
    go.touch()
    for node in nodes:
        out, err = node.communicate(timeout=120)
        assert node.returncode == 0, err
    found = entries(app, "key.issue")
    assert len(found) == 2 * COUNT
    assert [entry["seq"] for entry in entries(app)] == list(range(1, 2 * COUNT + 1))
    # Both nodes wrote into the one chain, each entry linked to the one before it.
    wallets = [entry["after"]["wallet"][:6].lower() for entry in found]
    assert len(set(wallets)) == 2
    everything = entries(app)
    for before, after in zip(everything, everything[1:], strict=False):
        assert after["prev_hash"] == before["hash"]
    result = verified(app)
    assert result.finding is None and result.head_seq == 2 * COUNT
