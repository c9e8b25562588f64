"""The shell examples of the README and of docs/*.md, as a newcomer pastes them: read from the Markdown, and run
one block after another in one bash, whose variables carry from block to block.

A block is a fenced ```sh block. Words after `sh` in its info string mark a block that cannot run in every
shell, and say why; GitHub shows such a block as any other. MARKS lists them: a block runs when the test
has what each of its marks needs, and is skipped for that reason alone.
"""

import queue
import re
import subprocess
import tempfile
import textwrap
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from tests.common.live import ROOT

README = ROOT / "README.md"
DOCS = ROOT / "docs"

MARKS = {
    "sqlite": "runs only where the service serves an SQLite database (`flask backup`, `flask restore`)",
    "postgresql": "runs only where the service serves PostgreSQL (pg_dump, pg_restore, psql): the suite's "
    "PostgreSQL half",
    "stopped": "runs with the service stopped, as the page says (a restore): the test stops the server before "
    "the block and starts it again after, on the same address",
    "nginx": "needs Debian's nginx in front of the service: tests/server/test_exposure.py installs and runs the "
    "recipe",
    "s3": "needs an S3-compatible store and its credentials: tests/backups/ runs these commands against a "
    "SeaweedFS store that it starts",
    "elsewhere": "runs on another machine or in another project (installing the package there)",
    "ipfs": "needs an IPFS node (kubo), which the suite does not run; tests/data/test_snapshot.py checks the CAR "
    "file with the IPLD libraries instead",
    "minutes": "runs for minutes (the benchmarks): `make bench` is its own job, never a test",
}
# A fence at the start of a line, or indented under a list item.
_FENCE = re.compile(r"^[ \t]*```(sh|bash|shell)([^\n]*)\n(.*?)^[ \t]*```", flags=re.S | re.M)


@dataclass
class Block:
    page: str
    number: int  # its place among the page's shell blocks, from 1
    text: str
    marks: frozenset = field(default_factory=frozenset)

    def __str__(self):
        return f"{self.page}, shell block {self.number}" + (f" ({' '.join(sorted(self.marks))})" if self.marks else "")


def blocks(path, start_at=None):
    """The shell blocks of the Markdown file at `path` (from the heading `start_at` on, when given)."""
    text = path.read_text(encoding="utf-8")
    if start_at is not None:
        text = text[text.index(start_at):]
    found = []
    for number, match in enumerate(_FENCE.finditer(text), 1):
        found.append(Block(path.name, number, textwrap.dedent(match.group(3)), frozenset(match.group(2).split())))
    return found


def readme_blocks():
    """The README's blocks that a newcomer pastes: from "## Using the API" on ("Start here" is `make run`)."""
    return blocks(README, "## Using the API")


def pages():
    """Every page of docs/, in the order of their names."""
    return sorted(DOCS.glob("*.md"))


def project_folder(path):
    """A folder at `path` that pastes as the project's own does: its .venv and app.py are the project's (links),
    and what the blocks write (exports, backups) stays in it, out of the project and of other tests' way."""
    path.mkdir()
    for name in (".venv", "app.py"):
        (path / name).symlink_to(ROOT / name)
    return path


class BlockFailed(AssertionError):
    pass


class Shell:
    """One bash, run as `set -euo pipefail`, into which blocks are pasted one after another. Each block is
    sourced from a file with its standard input closed, so a command that reads standard input gets nothing
    rather than the next lines of the paste."""

    END = "@@ end of block"

    def __init__(self, env, cwd):
        self.folder = tempfile.TemporaryDirectory(prefix="identity-paste-")
        self.process = subprocess.Popen(
            ["bash", "--noprofile", "--norc"], cwd=cwd, env=env, text=True, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
        )
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.transcript = []
        self.run("set -euo pipefail", "set -euo pipefail")

    def _read(self):
        for line in self.process.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def run(self, text, name="a block", timeout=120):
        """Paste `text`; returns what it printed (standard output and error). Raises BlockFailed when a command
        of it fails (the shell ends, as `set -e` wants) or it runs longer than `timeout` seconds."""
        token = uuid.uuid4().hex
        script = Path(self.folder.name) / f"{token}.sh"
        script.write_text(text + "\n")
        try:
            self.process.stdin.write(f"source {script} </dev/null\necho '{self.END} {token}'\n")
            self.process.stdin.flush()
        except BrokenPipeError:
            raise BlockFailed(f"{name} was not run: the shell had ended") from None
        output = []
        while True:
            try:
                line = self.lines.get(timeout=timeout)
            except queue.Empty:
                self.close()
                raise BlockFailed(f"{name} ran longer than {timeout} s:\n{text}\n--- it printed:\n{''.join(output)[-3000:]}") from None
            if line is None:
                code = self.process.wait(timeout=10)
                raise BlockFailed(f"{name} failed (exit status {code}):\n{text}\n--- it printed:\n{''.join(output)[-3000:]}")
            end = f"{self.END} {token}\n"
            if line.endswith(end):  # after the block's last output, on its line when that had no newline
                output.append(line.removesuffix(end))
                break
            output.append(line)
        printed = "".join(output)
        self.transcript.append((name, printed))
        return printed

    def close(self):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        self.folder.cleanup()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
