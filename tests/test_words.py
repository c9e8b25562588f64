"""Words that are true: every path of the repository (under identity, tests, docs, bench, deploy or
examples) and every module of the package or of the tests (its dotted name, perhaps with an attribute after it)
that the documentation, the build files, the tests' own files (npm packages, scripts, settings), or a comment or
docstring of the code names exists."""

import ast
import importlib
import io
import re
import tokenize
from pathlib import Path

import pytest

from identity.schemas import IdentitySchema

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("identity", "tests", "docs", "bench", "deploy", "examples")
# A path of the repository, not part of a longer one (/srv/identity/..., a URL) nor of a word.
PATH = re.compile(r"(?<![\w/.\-~$])((?:" + "|".join(FOLDERS) + r")/[\w./*\-]*)")
# A dotted name that starts with the package's: a module, then perhaps one of its attributes.
DOTTED = re.compile(r"(?<![\w/.\-])((?:identity|tests)(?:\.[A-Za-z_]\w*)+)")
HOST_ENDINGS = ("com", "org", "net", "eth", "limo")


def text_files():
    """The files read whole: the documentation and the build and deployment files."""
    named = ["README.md", "Makefile", "setup.cfg", "pyproject.toml", "requirements.txt", "requirements-dev.txt",
             ".ci/run"]
    tests_own = [path for path in sorted((ROOT / "tests").rglob("*")) if "node_modules" not in path.parts
                 and (path.suffix in {".toml", ".mjs", ".ts", ".sol"} or path.name == "package.json")]
    return ([ROOT / name for name in named] + sorted((ROOT / "docs").rglob("*.md")) + sorted((ROOT / "deploy").glob("*"))
            + tests_own)


def python_files():
    """The Python files whose comments and docstrings are read."""
    found = [ROOT / "app.py", ROOT / "gunicorn.conf.py"]
    for folder in ("identity", "tests", "bench", "examples"):
        found += [path for path in sorted((ROOT / folder).rglob("*.py")) if "node_modules" not in path.parts]
    return found


def words_of_python(source):
    """The comments and docstrings of a Python module's `source`, one per line."""
    parts = [token.string for token in tokenize.generate_tokens(io.StringIO(source).readline)
             if token.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            docstring = ast.get_docstring(node, clean=False)
            if docstring:
                parts.append(docstring)
    return "\n".join(parts)


def strings_of_python(source):
    """The dotted names the code itself spells in its string literals (docstrings aside): logger names, the
    database's file name."""
    tree = ast.parse(source)
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                  and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return {name for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
            for name in re.findall(r"identity(?:\.\w+)+", node.value)}


def path_exists(path):
    path = path.rstrip(".,:;")
    if "*" in path:
        return any(ROOT.glob(path))
    return (ROOT / path).is_dir() if path.endswith("/") else (ROOT / path).exists()


def module_exists(name):
    """Whether `name` is a module of the package, or a module and then attributes of it."""
    parts = name.split(".")
    found = importlib.import_module(parts[0])
    for number, part in enumerate(parts[1:], 2):
        prefix = ".".join(parts[:number])
        try:
            found = importlib.import_module(prefix)
            continue
        except ModuleNotFoundError as error:
            if error.name != prefix:
                raise
        if not hasattr(found, part):
            return False
        found = getattr(found, part)
    return True


def named_elsewhere():
    """Dotted names that are not modules and are true all the same: those the code spells in strings (logger
    names, the database's file name), and an identity object's fields (identity.creator.wallet)."""
    spelled = set()
    for path in python_files():
        if path != Path(__file__).resolve():  # this module's own strings are its checker's examples
            spelled |= strings_of_python(path.read_text(encoding="utf-8"))
    return spelled, set(IdentitySchema().fields) | {field.data_key for field in IdentitySchema().fields.values()}


def missing_names(text, spelled=frozenset(), fields=frozenset()):
    """The paths and modules `text` names that do not exist."""
    missing = [path.rstrip(".,:;") for path in PATH.findall(text) if not path_exists(path)]
    for name in DOTTED.findall(text):
        parts = name.split(".")
        if name in spelled or parts[1] in fields or parts[-1] in HOST_ENDINGS:
            continue
        if not module_exists(name):
            missing.append(name)
    return missing


@pytest.fixture(scope="module")
def elsewhere():
    return named_elsewhere()


@pytest.mark.parametrize("path", text_files(), ids=lambda path: str(path.relative_to(ROOT)))
def test_the_docs_and_build_files_name_only_what_exists(path, elsewhere):
    assert missing_names(path.read_text(encoding="utf-8"), *elsewhere) == []


def test_comments_and_docstrings_name_only_what_exists(elsewhere):
    missing = {}
    for path in python_files():
        found = missing_names(words_of_python(path.read_text(encoding="utf-8")), *elsewhere)
        if found:
            missing[str(path.relative_to(ROOT))] = found
    assert missing == {}


def test_a_name_that_does_not_exist_is_found():
    # The checker itself must be able to fail: a comment and a docstring each naming one of each that exist and do not.
    source = (
        '"""See docs/keys.md and identity.core.keys.caller_of; not ' + "docs/" + 'gone.md nor identity.' + 'gone."""\n'
        "# tests.common.live.free_port exists; " + "tests.common." + "gone does not\n"
        "# tests/conftest.py, identity/core/, bench/*.py; not " + "identity/" + "gone.py nor identity.core." + "gone\n"
    )
    missing = missing_names(words_of_python(source))
    assert sorted(missing) == sorted(["docs/" + "gone.md", "identity." + "gone", "identity/" + "gone.py",
                                      "identity.core." + "gone", "tests.common." + "gone"])
    # Not modules: an identity's fields, a host name, a name the code spells.
    assert missing_names("identity.creator.wallet at identity.example.com", fields={"creator"}) == []
    assert missing_names("the identity.boom logger", spelled={"identity.boom"}) == []
