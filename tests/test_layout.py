"""How the package hangs together: its modules import each other without a cycle."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "identity"


def modules_of(package):
    """The modules of `package` by dotted name below it ("errors", "api.base"), a subpackage by its
    __init__ ("schemas"). The package's own __init__ and folders that are no package (migrations) are left out."""
    found = {}
    for path in package.rglob("*.py"):
        parts = path.relative_to(package).with_suffix("").parts
        if not all((package.joinpath(*parts[:depth]) / "__init__.py").is_file() for depth in range(1, len(parts))):
            continue
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if parts:
            found[".".join(parts)] = path
    return found


def imports_of(name, path, modules, root="identity"):
    """The modules of `modules` that module `name` (at `path`) imports, at any depth of the file
    (function-level imports count too). Importing a subpackage's module from outside that subpackage
    runs the subpackage's __init__ first, so that counts as importing the __init__ too."""
    here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    targets = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level:
            if node.level - 1 > len(here):
                continue
            base = here[: len(here) - (node.level - 1)] + (node.module.split(".") if node.module else [])
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == root:
            base = node.module.split(".")[1:]
        elif isinstance(node, ast.Import):
            targets.update(".".join(alias.name.split(".")[1:]) for alias in node.names
                           if alias.name.split(".")[0] == root)
            continue
        else:
            continue
        for alias in node.names:  # `from . import content`, `from .api import base`: a module by that name
            targets.add(".".join(base + [alias.name]) if ".".join(base + [alias.name]) in modules else ".".join(base))
    found = set()
    for target in targets:
        parts = target.split(".")
        for depth in range(1, len(parts) + 1):
            enclosing = ".".join(parts[:depth])
            if enclosing in modules and (depth == len(parts) or not (name + ".").startswith(enclosing + ".")):
                found.add(enclosing)
    found.discard(name)
    return found


def module_graph(package=PACKAGE):
    modules = modules_of(package)
    return {name: imports_of(name, path, modules, package.name) for name, path in modules.items()}


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


def test_the_graph_follows_imports_into_subpackages(tmp_path):
    package = tmp_path / "shop"
    (package / "schemas").mkdir(parents=True)
    (package / "migrations").mkdir()
    files = {
        "__init__.py": "",
        "errors.py": "from .schemas.common import Problem\n",
        "views.py": "from . import errors\nfrom shop.schemas import Order\n",
        "schemas/__init__.py": "from .common import Problem\nfrom .orders import Order\n",
        "schemas/common.py": "",
        "schemas/orders.py": "from .common import Base\n\ndef late():\n    from ..errors import NotFound\n",
        "migrations/env.py": "from shop import views\n",
    }
    for name, text in files.items():
        (package / name).write_text(text, encoding="utf-8")
    assert module_graph(package) == {
        "errors": {"schemas", "schemas.common"},
        "views": {"errors", "schemas"},
        "schemas": {"schemas.common", "schemas.orders"},
        "schemas.common": set(),
        "schemas.orders": {"schemas.common", "errors"},
    }
    assert find_cycle(module_graph(package)) == ["errors", "schemas", "schemas.orders", "errors"]


def test_the_graph_holds_the_subpackages_modules():
    graph = module_graph()
    assert {"api", "api.base", "schemas", "schemas.common", "schemas.identities"} <= graph.keys()
    assert "schemas" in graph["errors"] and "errors" in graph["api.base"]


def test_the_package_modules_import_each_other_without_a_cycle():
    assert find_cycle(module_graph()) is None
