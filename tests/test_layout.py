"""How the package hangs together: its modules import each other without a cycle."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "identity"


def imports_of(path):
    """The identity modules `path` imports, at any depth of the file (function-level imports count too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                found.add(node.module.split(".")[0])
            else:
                found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("identity."):
            found.add(node.module.split(".")[1])
    return found


def module_graph():
    modules = {path.stem: path for path in PACKAGE.glob("*.py") if path.stem != "__init__"}
    return {name: imports_of(path) & modules.keys() for name, path in modules.items()}


def find_cycle(graph):
    """One cycle of `graph` as a list of names, or None."""
    state = {}

    def visit(name, trail):
        state[name] = "open"
        for target in sorted(graph[name]):
            if state.get(target) == "open":
                return trail[trail.index(target):] + [target]
            if target not in state and (cycle := visit(target, trail + [target])):
                return cycle
        state[name] = "done"
        return None

    for name in sorted(graph):
        if name not in state and (cycle := visit(name, [name])):
            return cycle
    return None


def test_the_cycle_finder_finds_a_cycle():
    assert find_cycle({"auth": {"errors"}, "errors": {"request_id"}, "request_id": {"auth"}}) == [
        "auth", "errors", "request_id", "auth"
    ]
    assert find_cycle({"auth": {"errors"}, "errors": set()}) is None


def test_the_package_modules_import_each_other_without_a_cycle():
    assert find_cycle(module_graph()) is None
