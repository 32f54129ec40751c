"""Every third-party module opsctl imports is a declared dependency, and every one the tests import
is declared by the package or its `test` extra: a fresh venv with `pip install -e '.[test]'` (the
README's second command) has all of them, not only the machine that happened to have them."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())


def _name(requirement: str) -> str:
    """A requirement's distribution name, normalised as PEP 503 does."""
    return re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9._-]+", requirement).group(0)).lower()


def third_party_imports(root: Path) -> dict[str, str]:
    """Top-level module -> a file importing it, for every absolute import under root that is not
    the standard library or the project's own packages."""
    found: dict[str, str] = {}
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else []
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in ("opsctl", "tests", "_pytest"):
                    found.setdefault(top, str(path.relative_to(REPO)))
    return found


def undeclared(root: Path, declared: set[str]) -> list[str]:
    dists = packages_distributions()
    problems = []
    for module, where in third_party_imports(root).items():
        names = {_name(d) for d in dists.get(module, [])}
        if not names & declared:
            problems.append(f"{where} imports {module} (distribution {sorted(names) or 'not installed'}), not declared")
    return problems


def test_every_third_party_module_opsctl_imports_is_a_declared_dependency():
    declared = {_name(r) for r in PYPROJECT["project"]["dependencies"]}
    assert undeclared(REPO / "opsctl", declared) == []


def test_every_third_party_module_the_tests_import_comes_with_the_test_extra():
    declared = {_name(r) for r in PYPROJECT["project"]["dependencies"]}
    declared |= {_name(r) for r in PYPROJECT["project"]["optional-dependencies"]["test"]}
    # pytest's own module is `_pytest` (skipped above); `pytest` maps to the pytest distribution.
    assert undeclared(REPO / "tests", declared) == []


def test_the_test_extra_brings_the_tools_the_tests_and_ci_run_and_the_wheel_build_needs():
    test = {_name(r) for r in PYPROJECT["project"]["optional-dependencies"]["test"]}
    build = {_name(r) for r in PYPROJECT["build-system"]["requires"]}
    assert {"ruff", "mypy", "pytest", "pytest-xdist"} <= test
    assert build <= test, f"the wheel test builds without isolation: {sorted(build - test)} missing from [test]"
