"""Where drill scenarios are found: a file path, or a name looked up in the configured scenarios
directory and then in the scenarios shipped inside the package (opsctl/defaults/chaos), so
`opsctl drill run vendor-outage` works from any directory, installed from a wheel or not.

    resolve_scenario("vendor-outage", cfg)             -> <drills.scenarios>/vendor-outage.yaml or the packaged one
    resolve_scenario("chaos/vendor-outage.yaml", cfg)  -> that file if it exists, else found by name
    catalog(cfg)                                       -> every scenario by name, the configured ones first
    scenario_paths(["chaos/"], cfg)                    -> ./chaos if it exists, else the config's, else the packaged
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from opsctl.config import DEFAULTS_DIR
from opsctl.errors import ConfigError

PACKAGED = DEFAULTS_DIR / "chaos"
SUFFIXES = (".yaml", ".yml")


def scenario_dirs(cfg) -> list[Path]:
    """The configured scenarios directory, then the packaged one (once, when they are the same)."""
    dirs: list[Path] = []
    for d in (cfg.path(cfg.drills.scenarios), PACKAGED):
        if d.is_dir() and all(d.resolve() != seen.resolve() for seen in dirs):
            dirs.append(d)
    return dirs


def catalog(cfg) -> list[tuple[str, Path, str]]:
    """(name, file, origin) for every scenario, origin "config" or "packaged"; a configured scenario
    hides a packaged one of the same name."""
    found: dict[str, tuple[str, Path, str]] = {}
    for d in scenario_dirs(cfg):
        origin = "packaged" if d.resolve() == PACKAGED.resolve() and d == PACKAGED else "config"
        for f in sorted(x for x in d.iterdir() if x.suffix in SUFFIXES and x.is_file()):
            found.setdefault(f.stem, (f.stem, f, origin))
    return list(found.values())


def resolve_scenario(arg: str | Path, cfg) -> Path:
    """A scenario file from a path or a name. A path that does not exist is looked up by name only
    when it has no directory or the conventional `chaos/` one, never by guessing elsewhere."""
    text = str(arg)
    path = Path(text)
    if path.is_file():
        return path
    if not path.is_absolute() and cfg.path(text).is_file():
        return cfg.path(text)
    searched = scenario_dirs(cfg)
    if path.parent in (Path("."), Path("chaos")):
        stem = path.stem if path.suffix in SUFFIXES else path.name
        for d in searched:
            for suffix in SUFFIXES:
                candidate = d / f"{stem}{suffix}"
                if candidate.is_file():
                    return candidate
    names = ", ".join(name for name, _, _ in catalog(cfg)) or "none"
    raise ConfigError(f"{text}: no such scenario file, and no scenario of that name in "
                      f"{', '.join(str(d) for d in searched) or 'any scenarios directory'} (known: {names})",
                      hint="`opsctl drill list` shows the scenarios and their names")


def scenario_paths(args, cfg) -> list[Path]:
    """The scenario files under the paths given (files or directories), for `drill list|validate`.

    A path that does not exist here is read next to the config (as the config's own paths are), and
    the conventional `chaos/` directory, named from outside the repository, is the configured
    scenarios directory or the packaged one; a name without a directory is looked up as `drill run`
    looks it up. No argument: the configured scenarios directory."""
    from opsctl.config.loading import yaml_files

    if not args:
        return yaml_files([cfg.path(cfg.drills.scenarios)], "scenario")
    resolved: list[Path] = []
    for arg in args:
        path = Path(str(arg))
        if path.exists():
            resolved.append(path)
        elif not path.is_absolute() and cfg.path(str(path)).exists():
            resolved.append(cfg.path(str(path)))
        elif path == Path("chaos") and scenario_dirs(cfg):
            resolved.append(scenario_dirs(cfg)[0])
        elif path.parent in (Path("."), Path("chaos")) and not str(arg).endswith("/"):  # a name, not a dir
            resolved.append(resolve_scenario(arg, cfg))
        else:
            resolved.append(path)  # yaml_files names it: no such scenario file or directory
    return yaml_files(resolved, "scenario")


def scenario_rows(found: list[tuple[str, Path, str]]) -> list[dict]:
    """`drill list`: a row per scenario file (name, file, origin), with its title, tags, faults and
    number of expectations, or its problems when it does not load."""
    from opsctl.drills.scenario import load_scenario
    from opsctl.drills.text import rel_path

    rows: list[dict[str, Any]] = []
    for name, path, origin in found:
        row = {"name": name, "file": rel_path(path), "origin": origin}
        try:
            sc = load_scenario(path)
        except ConfigError as exc:
            rows.append({**row, "title": None, "valid": False, "problems": exc.problems})
            continue
        rows.append({**row, "title": sc.title, "valid": True, "tags": list(sc.tags),
                     "faults": [f.kind for f in sc.faults], "expectations": len(sc.expectations)})
    return rows


def validate_rows(paths: list[Path], cfg, *, live: bool) -> tuple[list[dict], list[str]]:
    """`drill validate`: a row per scenario file (its format and the config's names checked; with
    `live`, what a live run needs), and every problem found."""
    from opsctl.drills.scenario import check_against_config, load_scenario
    from opsctl.drills.text import rel_path
    from opsctl.slo.loading import load_slos

    slo_names = [s.name for s in load_slos([cfg.slo_dir], cfg.backends, config=cfg)]
    rows, problems = [], []
    for path in paths:
        try:
            sc = load_scenario(path)
            found = check_against_config(sc, cfg, slo_names, live=live)
        except ConfigError as exc:
            found = exc.problems
        rows.append({"file": rel_path(path), "valid": not found, "problems": found})
        problems.extend(found)
    return rows, problems
