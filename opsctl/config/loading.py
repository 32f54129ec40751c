"""Where the config comes from and how YAML is read (duplicate keys refused)."""

from __future__ import annotations

import dataclasses
import functools
import os
from pathlib import Path
from typing import Any, Iterable

from opsctl.config.root import Config
from opsctl.errors import ConfigError
from opsctl.model import build
from opsctl.model.types import yaml_safe

DEFAULTS_DIR = Path(__file__).resolve().parent.parent / "defaults"
BUILTIN_CONFIG = DEFAULTS_DIR / "opsctl.yaml"

def find_config_path(explicit: str | None) -> Path | None:
    if explicit:
        return Path(explicit)
    env = os.environ.get("OPSCTL_CONFIG")
    if env:
        return Path(env)
    local = Path("opsctl.yaml")
    return local if local.is_file() else None


def state_home() -> Path:
    """`$XDG_STATE_HOME` (an absolute path), else ~/.local/state, as the XDG base directory spec says."""
    env = os.environ.get("XDG_STATE_HOME", "")
    if env and os.path.isabs(env):
        return Path(env)
    return Path.home() / ".local" / "state"


def load_config(explicit: str | None = None) -> Config:
    path = find_config_path(explicit)
    if path is None:
        # The built-in default keeps its SLOs in the package and its state in one place per user,
        # $XDG_STATE_HOME/opsctl/<service>, whatever directory the command runs from (as kubectl
        # and gh do): a failover made in one directory is restored from any other.
        cfg = load_config_file(BUILTIN_CONFIG)
        return dataclasses.replace(
            cfg, source_path="<built-in>", state_dir=str(state_home() / "opsctl" / cfg.service)
        )
    return load_config_file(path)


def yaml_files(paths: Iterable[str | Path], what: str) -> list[Path]:
    """The YAML files named: a file as it is, a directory's `*.yaml`/`*.yml` files (sorted, not
    recursive); a path that is neither is an error naming `what` (SLO, scenario)."""
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files.extend(sorted(p for p in path.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file()))
        elif path.is_file():
            files.append(path)
        else:
            raise ConfigError(f"{path}: no such {what} file or directory",
                              hint=f"give an existing {what} file or directory (the config's own: slos.dir,"
                                   " drills.scenarios), or write the shipped ones with `opsctl init DIR`")
    return files


def load_yaml_file(path: Path, what: str = "file") -> Any:
    """Parse a YAML file; syntax errors name the file and line."""
    return parse_yaml(read_text(path, what), path)


def read_text(path: Path, what: str = "file") -> str:
    """A file's UTF-8 text; a problem names the file (and the line of a bad byte)."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: {what} not found") from None
    except UnicodeDecodeError as exc:
        line = path.read_bytes()[: exc.start].count(b"\n") + 1
        raise ConfigError(f"{path}: {what} is not UTF-8 text (byte {exc.start}, line {line}: "
                          f"{exc.object[exc.start:exc.start + 1]!r})", hint="save it as UTF-8") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read {what}: {exc.strerror}") from exc


def parse_yaml(text: str, path: Path, *, all_documents: bool = False) -> Any:
    """One YAML document read from `path` (with `all_documents`, the list of its non-empty
    `---`-separated documents); duplicate keys refused, errors name the file and line."""
    import yaml

    try:
        if all_documents:
            return [d for d in yaml.load_all(text, Loader=_strict_loader()) if d is not None]
        return yaml.load(text, Loader=_strict_loader())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "unknown position"
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"{path}: YAML syntax error at {where}: {' '.join(str(problem).split())}") from exc
    except (ValueError, TypeError, OverflowError) as exc:  # e.g. a timestamp like 2026-02-30
        raise ConfigError(f"{path}: YAML value error: {' '.join(str(exc).split())}") from exc
    except RecursionError:
        raise ConfigError(f"{path}: YAML nested too deeply") from None


@functools.lru_cache(maxsize=1)
def _strict_loader() -> Any:
    """A SafeLoader that refuses duplicate keys, which PyYAML would silently let the last one win."""
    import yaml

    # libyaml's loader when present: ~10x faster, which the CLI's fast paths notice (traffic set
    # reads the SLO files for its budget guard).
    class StrictLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
        pass

    def mapping(loader: Any, node: Any, deep: bool = False) -> Any:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = loader.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark)
            seen.add(key)
        return loader.construct_mapping(node, deep=deep)

    StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    # What was read can be written back: a Duration dumps as the text it came from.
    for dumper in (yaml.SafeDumper, yaml.Dumper):
        yaml_safe(dumper)
    return StrictLoader


def load_config_file(path: Path) -> Config:
    from opsctl.config.cache import cached_parse

    data = cached_parse(path, "config", lambda: read_text(path, "config file"), lambda text: parse_yaml(text, path))
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the config must be a mapping of sections, got {type(data).__name__}")
    data = dict(data)
    data["source_path"] = str(path)
    data["base_dir"] = str(path.resolve().parent)
    return build(Config, data, str(path))
