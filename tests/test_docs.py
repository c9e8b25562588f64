"""The user documentation holds together: README.md stays a short guide, and its links to docs/ pages
(and theirs to each other) lead somewhere, down to the section a link names."""

import re
from pathlib import Path

import pytest

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
