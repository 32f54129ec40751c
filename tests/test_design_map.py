"""docs/design.md is a map (docs/decisions/0000-a-map-and-one-file-a-decision.md): short, naming only
modules that exist, naming every package, and linking decision files that exist and are indexed."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MAP = REPO / "docs" / "design.md"
DECISIONS = REPO / "docs" / "decisions"
INDEX = DECISIONS / "README.md"

MAX_WORDS = 4000

# `opsctl/...` as the map writes a module, a package or a data directory: path characters up to the
# first that is not one (a backtick, a space, a closing parenthesis). Not a path under another
# directory (`$XDG_CACHE_HOME/opsctl/parsed/` is a cache, not the package).
PATH = re.compile(r"(?<![\w/$.-])opsctl/[A-Za-z0-9_/.]*[A-Za-z0-9_/]")
# A link to a decision file, from the map (`decisions/...`) or elsewhere in docs/.
LINK = re.compile(r"\]\((?:\.\./)?(?:docs/)?decisions/([^)#]+)\)")


def map_text() -> str:
    return MAP.read_text(encoding="utf-8")


def test_the_map_is_at_most_4000_words():
    words = len(map_text().split())  # what `wc -w` counts: runs of non-whitespace
    assert words <= MAX_WORDS, f"docs/design.md has {words} words; the map keeps to {MAX_WORDS}"


def test_every_opsctl_path_the_map_names_exists():
    named = sorted(set(PATH.findall(map_text())))
    assert named, "the map names opsctl/ paths"
    missing = [p for p in named if not (REPO / p.rstrip("/")).exists()]
    assert missing == [], f"docs/design.md names paths that do not exist: {missing}"


# A module the map names relative to its room (`traffic/controller.py`, `chain/runner.py`, or `base.py`
# in a package's row), or a tests/ path: a backticked name ending in .py, or a directory ending in /.
NAMED = re.compile(r"`([A-Za-z0-9_][A-Za-z0-9_./]*(?:\.py|/))`")


def resolves(name: str, files: list[str]) -> bool:
    """Some file or directory of the repository is that path, or ends in it."""
    name = name.rstrip("/")
    return (REPO / name).exists() or any(f == name or f.endswith("/" + name) for f in files)


def repo_paths() -> list[str]:
    found: set[str] = set()
    for top in ("opsctl", "tests", "bench", "deploy"):
        for p in (REPO / top).rglob("*"):
            if "__pycache__" not in p.parts:
                found.add(p.relative_to(REPO).as_posix())
    return sorted(found)


def test_every_module_the_map_names_in_backticks_exists():
    names = sorted(set(NAMED.findall(map_text())))
    assert "traffic/controller.py" in names
    files = repo_paths()
    missing = [n for n in names if not resolves(n, files)]
    assert missing == [], f"docs/design.md names modules that do not exist: {missing}"


def test_the_map_counts_a_path_that_does_not_exist_as_missing(tmp_path):
    # The check above must be able to fail: a made-up module is reported.
    text = "see `opsctl/traffic/no_such_module.py` and `opsctl/traffic/controller.py`"
    named = PATH.findall(text)
    assert named == ["opsctl/traffic/no_such_module.py", "opsctl/traffic/controller.py"]
    assert [p for p in named if not (REPO / p).exists()] == ["opsctl/traffic/no_such_module.py"]


def packages() -> list[str]:
    root = REPO / "opsctl"
    return sorted(f"opsctl/{p.parent.relative_to(root).as_posix()}/" for p in root.glob("*/__init__.py"))


def test_every_package_under_opsctl_is_named_in_the_map():
    text = map_text()
    found = packages()
    assert "opsctl/traffic/" in found and "opsctl/incident/" in found
    unnamed = [p for p in found if f"`{p}`" not in text]
    assert unnamed == [], f"docs/design.md does not name these packages: {unnamed}"


def test_every_top_level_module_under_opsctl_is_named_in_the_map():
    text = map_text()
    modules = sorted(f"opsctl/{p.name}" for p in (REPO / "opsctl").glob("*.py") if p.name != "__init__.py")
    unnamed = [m for m in modules if m not in text]
    assert unnamed == [], f"docs/design.md does not name these modules: {unnamed}"


def decision_files() -> list[str]:
    return sorted(p.name for p in DECISIONS.glob("[0-9][0-9][0-9][0-9]-*.md"))


def test_every_decision_the_map_links_exists():
    linked = sorted(set(LINK.findall(map_text())))
    assert "README.md" in linked, "the map links the decisions' index"
    missing = [f for f in linked if not (DECISIONS / f).is_file()]
    assert missing == [], f"docs/design.md links decision files that do not exist: {missing}"


def test_every_decision_file_is_in_the_index_and_every_index_link_exists():
    index = INDEX.read_text(encoding="utf-8")
    listed = set(re.findall(r"\]\(([0-9]{4}-[^)#]+\.md)\)", index))
    files = set(decision_files())
    assert files - listed == set(), f"decision files missing from docs/decisions/README.md: {sorted(files - listed)}"
    assert listed - files == set(), f"docs/decisions/README.md lists files that do not exist: {sorted(listed - files)}"


def test_decision_numbers_are_unique():
    numbers = [name[:4] for name in decision_files()]
    assert len(numbers) == len(set(numbers)), sorted(n for n in numbers if numbers.count(n) > 1)


def test_every_decision_file_has_context_decision_and_consequences():
    for name in decision_files():
        if name[:2] != "00":  # the other ranges keep their own shape; 0000-0099 are this map's
            continue
        text = (DECISIONS / name).read_text(encoding="utf-8")
        for heading in ("## Context", "## Decision", "## Consequences"):
            assert heading in text, f"{name} lacks {heading!r}"
