"""opsctl's import graph: no cycle between modules, and no arrow from a lower floor to a higher one.

Every `import` and `from ... import` in opsctl/ counts, wherever it sits: at the top, inside a
function (a lazy import still ties the two modules together) or under `if TYPE_CHECKING:`. An edge
goes to the module named (`from opsctl.config import Config` -> opsctl.config, the package;
`from opsctl.traffic import record` -> opsctl.traffic.record). The implicit import of a parent
package is not an edge: a package's `__init__` may re-export its own modules.

The floors, lowest first (docs/design.md, "The rooms"; docs/decisions/0002-floors-and-no-cycles.md); a module may import its own floor
and the floors below it:
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "opsctl"

# (floor, module prefixes); a module belongs to the floor of its longest matching prefix.
FLOORS = [
    ("foundation", ["opsctl", "opsctl.errors", "opsctl.clock", "opsctl.model", "opsctl.remote",
                    "opsctl.retry", "opsctl.statefile", "opsctl.fencing", "opsctl.slo.conventions"]),
    ("records and calendars", ["opsctl.audit", "opsctl.freeze"]),
    ("config", ["opsctl.config"]),
    ("signals and channels", ["opsctl.metrics", "opsctl.paging", "opsctl.tickets"]),
    ("judgement", ["opsctl.slo", "opsctl.quality"]),
    ("control", ["opsctl.traffic", "opsctl.state", "opsctl.incident"]),
    ("orchestration", ["opsctl.automation", "opsctl.drills", "opsctl.runbooks", "opsctl.rollout"]),
    ("interface", ["opsctl.cli", "opsctl.__main__"]),
]
__doc__ += "\n".join(f"    {i}. {name}: {', '.join(p)}" for i, (name, p) in enumerate(FLOORS)) + "\n"


def modules_of(root: Path) -> dict[str, Path]:
    mods = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        mods[".".join(parts)] = path
    return mods


def import_graph(root: Path) -> dict[str, set[str]]:
    """module -> the opsctl modules it imports (every import statement in the file)."""
    mods = modules_of(root)
    top = root.name

    def known(name: str) -> str:
        while name not in mods:
            name = name.rpartition(".")[0]
        return name

    graph: dict[str, set[str]] = {m: set() for m in mods}
    for module, path in mods.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join(anchor + ([base] if base else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            else:
                continue
            for target in targets:
                if target == top or target.startswith(top + "."):
                    graph[module].add(known(target))
        graph[module].discard(module)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def placement(module: str) -> tuple[int, str]:
    """(floor, the prefix that placed it): the longest matching prefix wins."""
    best = (0, "opsctl")
    for i, (_, prefixes) in enumerate(FLOORS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > len(best[1]):
                best = (i, prefix)
    return best


def floor_of(module: str) -> int:
    return placement(module)[0]


def test_opsctl_has_no_import_cycle():
    graph = import_graph(ROOT)
    assert len(graph) > 100  # the walk found the package
    assert cycles(graph) == []


def test_every_opsctl_module_sits_on_a_floor_and_imports_only_its_floor_and_below():
    graph = import_graph(ROOT)
    # Only the package's own __init__ (the version) sits on a floor by the bare "opsctl" prefix:
    # a new top-level module or package must be given its floor in FLOORS.
    unplaced = sorted(m for m in graph if m != "opsctl" and placement(m)[1] == "opsctl")
    assert unplaced == []
    upward = [
        f"{a} ({FLOORS[floor_of(a)][0]}) imports {b} ({FLOORS[floor_of(b)][0]})"
        for a, targets in sorted(graph.items()) for b in sorted(targets) if floor_of(b) > floor_of(a)
    ]
    assert upward == []


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "opsctl"
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_the_checker_sees_a_cycle_through_a_lazy_or_type_only_import(tmp_path):
    root = _tree(tmp_path, {
        "__init__.py": "",
        "a.py": "from opsctl.b import thing\n",
        "b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from opsctl.c import X\n",
        "c.py": "def f():\n    from . import a\n",
        "d.py": "import opsctl.a\n",
    })
    assert cycles(import_graph(root)) == [["opsctl.a", "opsctl.b", "opsctl.c"]]


def test_the_checker_resolves_modules_named_in_a_from_import_and_relative_imports(tmp_path):
    root = _tree(tmp_path, {
        "__init__.py": "",
        "pkg/__init__.py": "from opsctl.pkg.one import x\n",
        "pkg/one.py": "from . import two\nfrom ..other import y\n",
        "pkg/two.py": "",
        "other.py": "from opsctl.pkg import two, nothing_module\n",
    })
    graph = import_graph(root)
    assert graph["opsctl.pkg"] == {"opsctl.pkg.one"}
    assert graph["opsctl.pkg.one"] == {"opsctl.pkg.two", "opsctl.other"}
    assert graph["opsctl.other"] == {"opsctl.pkg.two", "opsctl.pkg"}


@pytest.mark.parametrize("module, floor", [
    ("opsctl.newthing", "foundation"),
    ("opsctl.config.root", "config"), ("opsctl.slo.conventions", "foundation"), ("opsctl.slo.rules", "judgement"),
    ("opsctl.freeze", "records and calendars"), ("opsctl.cli.main", "interface"),
])
def test_a_module_takes_the_floor_of_its_longest_prefix(module, floor):
    assert FLOORS[floor_of(module)][0] == floor


def test_a_module_no_floor_names_is_placed_only_by_the_bare_package_prefix():
    assert placement("opsctl.newthing.part") == (0, "opsctl")
    assert placement("opsctl.config.root") == (2, "opsctl.config")
