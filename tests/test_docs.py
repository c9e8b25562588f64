"""The user documentation holds together: README.md stays a short guide, its links to docs/ pages (and theirs to
each other) lead somewhere, down to the section a link names, every table renders whole, and
docs/configuration.md lists every setting."""

import ast
import re
from pathlib import Path

import pytest

from identity.config import settings_from_env

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("*.md"))
MAX_README_LINES = 300

# [text](target): the target up to the closing parenthesis. Code blocks are left out first.
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def links(page):
    return LINK.findall(FENCE.sub("", page.read_text(encoding="utf-8")))


def is_relative(target):
    return not re.match(r"[a-z][a-z0-9+.-]*:", target) and not target.startswith("#")


def anchors(page):
    """The anchors GitHub gives the headings of `page`: lower case, punctuation dropped, spaces as hyphens."""
    headings = re.findall(r"^#{1,6} (.+)$", FENCE.sub("", page.read_text(encoding="utf-8")), flags=re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-") for heading in headings}


def broken_links(page):
    """The relative links of `page` whose file, or whose section in that file, does not exist."""
    broken = []
    for target in links(page):
        if not is_relative(target):
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve()
        if not linked.is_file():
            broken.append(target)
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(target)
    return broken


def test_readme_is_a_short_guide():
    lines = len(README.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines; reference material belongs in docs/"


def test_readme_links_every_docs_page():
    linked = {(README.parent / target.partition("#")[0]).resolve() for target in links(README) if is_relative(target)}
    assert PAGES, "docs/ has no pages"
    assert [page.name for page in PAGES if page.resolve() not in linked] == []


def test_every_relative_link_of_the_readme_leads_to_a_file_and_section_that_exist():
    assert broken_links(README) == []


@pytest.mark.parametrize("page", PAGES, ids=[page.name for page in PAGES])
def test_every_relative_link_between_docs_pages_leads_to_a_file_and_section_that_exist(page):
    assert broken_links(page) == []


def test_a_link_to_a_missing_page_or_section_is_found(tmp_path):
    # The checker itself must be able to fail: a page with one good link and two broken ones.
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "here.md").write_text("# Here\n\n## Some section\n")
    page = tmp_path / "README.md"
    page.write_text(
        "[good](docs/here.md#some-section) [gone](docs/gone.md) [no such section](docs/here.md#elsewhere)\n"
        "```\n[in a code block](docs/ignored.md)\n```\n[outside](https://example.org/x.md)\n"
    )
    assert broken_links(page) == ["docs/gone.md", "docs/here.md#elsewhere"]


# --- every table renders whole -----------------------------------------------------------------------------

# A table's delimiter row, under its header: |---|:--:|---:|
DELIMITER_ROW = re.compile(r"^\|(\s*:?-+:?\s*\|)+\s*$")


def orphan_table_rows(text):
    """The lines that start with `|` outside code blocks but belong to no table: a run of such lines whose second
    is not a delimiter row is text on the page, as the rows after a blank line inside a table are."""
    orphans, run = [], []
    for line in [*FENCE.sub("", text).splitlines(), ""]:
        if line.startswith("|"):
            run.append(line)
            continue
        if run and not (len(run) >= 2 and DELIMITER_ROW.match(run[1])):
            orphans += run
        run = []
    return orphans


@pytest.mark.parametrize("page", [README, *PAGES], ids=["README.md", *(page.name for page in PAGES)])
def test_no_table_is_split_by_a_blank_line(page):
    assert orphan_table_rows(page.read_text(encoding="utf-8")) == []


def test_a_table_split_by_a_blank_line_is_found():
    # The checker itself must be able to fail: the row after the blank line renders as text.
    text = "| a | b |\n|---|:--:|\n| 1 | 2 |\n\n| 3 | 4 |\n\n```\n| in a code block |\n```\n| c |\n|---|\n"
    assert orphan_table_rows(text) == ["| 3 | 4 |"]


# --- docs/configuration.md lists every setting ---------------------------------------------------------

# Where the server reads the environment itself, outside the app's settings (identity/config.py).
SERVER_FILES = [ROOT / "gunicorn.conf.py", *sorted((ROOT / "identity" / "server").glob("*.py"))]
# The functions that read a variable named by their first argument (identity/config.py), besides os.environ.
READERS = {"env_int", "log_level"}


class RecordingEnvironment(dict):
    """An environment, empty, that notes the name of every variable read from it."""

    def __init__(self):
        super().__init__()
        self.read = set()

    def get(self, name, default=None):
        self.read.add(name)
        return super().get(name, default)

    def __getitem__(self, name):
        self.read.add(name)
        return super().__getitem__(name)


def documented_settings():
    """The variables that the tables of docs/configuration.md name in their first column."""
    names = set()
    for line in (DOCS / "configuration.md").read_text(encoding="utf-8").splitlines():
        if line.startswith("| `"):
            names |= set(re.findall(r"`([A-Z][A-Z0-9_]*)`", line.split("|")[1]))
    return names


def variables_read(path):
    """The environment variables that the module at `path` reads by name: os.environ.get("X"),
    os.environ["X"], and env_int("X", ...) or log_level("X", ...)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            function = node.func
            named = function.id if isinstance(function, ast.Name) else ast.unparse(function)
            if named in READERS or named == "os.environ.get":
                names.add(node.args[0].value)
        elif isinstance(node, ast.Subscript) and ast.unparse(node.value) == "os.environ":
            if isinstance(node.slice, ast.Constant):
                names.add(node.slice.value)
    return names


def test_every_setting_the_app_reads_is_in_the_configuration_page():
    environment = RecordingEnvironment()
    settings_from_env(environment)
    assert environment.read, "the recording saw no setting read"
    assert sorted(environment.read - documented_settings()) == []


@pytest.mark.parametrize("path", SERVER_FILES, ids=[path.name for path in SERVER_FILES])
def test_every_variable_the_server_reads_is_in_the_configuration_page(path):
    assert sorted(variables_read(path) - documented_settings()) == []


def test_the_server_files_read_the_settings_the_page_says_they_read():
    # The scan itself must find what gunicorn.conf.py reads, or the test above could pass on nothing.
    assert {"PORT", "GUNICORN_TIMEOUT", "GUNICORN_BIND", "IDENTITY_LOG_LEVEL"} <= variables_read(SERVER_FILES[0])
