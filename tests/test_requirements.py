"""Serving installs only what serving needs: requirements.txt pins exactly the runtime closure of the
package's install_requires (and its postgresql extra); requirements-dev.txt adds every test and
development tool, transitive ones included; `make run` installs only the first."""

import configparser
import re
import subprocess
from importlib import metadata

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.common.live import ROOT


def pins(name):
    found = {}
    for line in (ROOT / name).read_text().splitlines():
        line = line.split("#")[0].strip()
        if not line or line.startswith("-r "):
            continue
        package, version = line.split("==")
        found[canonicalize_name(package)] = version
    return found


def declared(extra=None):
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    text = config["options.extras_require"][extra] if extra else config["options"]["install_requires"]
    return [Requirement(line) for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]


def closure(requirements):
    """Every distribution the requirements pull in, as installed here (markers evaluated, extras followed)."""
    seen, todo = set(), [(requirement, frozenset(requirement.extras)) for requirement in requirements]
    while todo:
        requirement, extras = todo.pop()
        name = canonicalize_name(requirement.name)
        if (name, extras) in seen:
            continue
        seen.add((name, extras))
        for line in metadata.requires(name) or []:
            child = Requirement(line)
            if child.marker is None or any(child.marker.evaluate({"extra": extra}) for extra in extras or {""}):
                todo.append((child, frozenset(child.extras)))
    return {name for name, _ in seen}


def test_requirements_txt_pins_exactly_what_serving_needs():
    runtime = closure(declared() + declared("postgresql"))
    assert set(pins("requirements.txt")) == runtime


def test_requirements_dev_txt_adds_the_test_tools_and_everything_they_pull_in():
    runtime, dev = pins("requirements.txt"), pins("requirements-dev.txt")
    assert "-r requirements.txt" in (ROOT / "requirements-dev.txt").read_text().splitlines()
    assert not set(runtime) & set(dev), "a pin is in both files"
    needed = closure(declared("test")) - set(runtime)
    assert needed <= set(dev)
    # Nothing pinned that nothing needs (the test extra, or a dependency of one of its tools).
    assert set(dev) == needed


def test_every_pin_is_the_version_installed_for_the_suite():
    for name, version in {**pins("requirements.txt"), **pins("requirements-dev.txt")}.items():
        assert metadata.version(name) == version, name


def test_test_tools_are_not_in_the_runtime_pins():
    runtime = pins("requirements.txt")
    for tool in ("pytest", "pytest-xdist", "schemathesis", "hypothesis", "bandit", "ruff", "requests",
                 "jsonschema-rs", "openapi-python-client", "openapi-spec-validator", "openapi-generator-cli"):
        assert tool not in runtime, tool


def test_make_run_installs_only_the_runtime_pins_and_make_test_adds_the_dev_ones(tmp_path):
    def commands(target):
        # -B: every step, whatever is installed; -n: printed, not run. VENV elsewhere: nothing here is touched.
        result = subprocess.run(["make", "-B", "-n", target, f"VENV={tmp_path}/venv"], cwd=ROOT, capture_output=True,
                                text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        return result.stdout

    run = commands("run")
    assert re.search(r"pip install .*-r requirements\.txt", run)
    assert "requirements-dev.txt" not in run
    assert re.search(r"^exec env .*gunicorn -c gunicorn\.conf\.py app:app$", run, flags=re.M)
    for target in ("test", "lint", "bench"):
        assert "-r requirements-dev.txt" in commands(target), target
