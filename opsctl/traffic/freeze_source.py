"""The freezes as they are now: the config (or catalog) files re-read when they change.

A process that runs for weeks (`opsctl serve`, a `rollout run`) keeps the config it loaded at
start-up, but a freeze is often added late (docs/decisions/0500-freezes-read-live.md). Every
decision that a freeze binds (the traffic freeze guard, the rollout controller's wait, serve's
emergency check) asks `current_freezes(cfg)`: the files `cfg` came from (its own file, and in a
catalog the shared `_defaults.yaml`) are stat()ed; when the modification time or size of one
changed, their bytes are hashed, and only when the hash differs is the `freezes:` list read again
(merged as loading merges it, built and checked as at start-up; other sections are not re-read). A stat of one or two files a decision:
cheap beside the change it guards.

A file that no longer loads (a half-saved edit, a freeze with a bad zone) raises ConfigError
naming the file: the caller fails closed (the guard refuses a routine change, the controller waits
and says why), never carries on with the old freezes as though nothing had been added.
"""

from __future__ import annotations

import hashlib
import os
import threading
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING

from opsctl.errors import ConfigError
from opsctl.freeze import FreezeWindow
from opsctl.model import Model

if TYPE_CHECKING:
    from opsctl.config.root import Config

_Signature = tuple[tuple[str, int, int], ...]  # (path, mtime_ns, size) per file; -1s for a missing file


class _Seen:
    def __init__(self, signature: _Signature, digest: str, freezes: "list[FreezeWindow]"):
        self.signature, self.digest, self.freezes = signature, digest, freezes


_seen: dict[tuple[str, str | None, str], _Seen] = {}
_lock = threading.Lock()


def config_files(cfg: "Config") -> list[Path]:
    """The files `cfg` was read from: none for the built-in config."""
    if cfg.source_path.startswith("<"):
        return []
    files = [Path(cfg.source_path)]
    if cfg.catalog:
        from opsctl.config.catalog import DEFAULTS_FILE

        files.append(Path(cfg.catalog) / DEFAULTS_FILE)
    return files


def _signature(files: list[Path]) -> _Signature:
    out = []
    for path in files:
        try:
            st = os.stat(path)
            out.append((str(path), st.st_mtime_ns, st.st_size))
        except OSError:
            out.append((str(path), -1, -1))
    return tuple(out)


def _digest(files: list[Path]) -> str:
    h = hashlib.sha256()
    for path in files:
        try:
            h.update(path.read_bytes())
        except OSError:
            h.update(b"\0missing\0")
        h.update(b"\0file\0")
    return h.hexdigest()


class _Freezes(Model):
    freezes: "list[FreezeWindow]" = field(default_factory=list)


def _read(files: list[Path]) -> "list[FreezeWindow]":
    """The `freezes:` list the files hold, as loading merges them: the service's own file wins,
    else the catalog's `_defaults.yaml` (a list is replaced whole); built and checked as at start-up."""
    from opsctl.config.cache import cached_parse
    from opsctl.config.loading import parse_yaml, read_text
    from opsctl.model import build

    for path in files:  # own file first
        if not path.is_file() and path != files[0]:
            continue
        data = cached_parse(path, "config", lambda: read_text(path, "config file"), lambda t: parse_yaml(t, path))
        if isinstance(data, dict) and "freezes" in data:
            built = build(_Freezes, {"freezes": data["freezes"] or []}, str(path)).freezes
            names = [w.name for w in built]
            duplicates = sorted({n for n in names if names.count(n) > 1})
            if duplicates:
                raise ConfigError(f"{path}: freezes: duplicate freeze name(s): {', '.join(duplicates)}")
            return built
        if data is not None and not isinstance(data, dict):
            raise ConfigError(f"{path}: the config must be a mapping of sections, got {type(data).__name__}")
    return []


def current_freezes(cfg: "Config") -> "list[FreezeWindow]":
    """`cfg`'s freezes as its files hold them now (ConfigError naming the file when they no longer load),
    with every freeze the process holds in memory that the files do not name (a drill's injected
    freeze, a freeze removed from the file since start-up: it keeps binding until a restart, the safe
    side). A freeze the files name is the files' version."""
    live = _file_freezes(cfg)
    names = {w.name for w in live}
    return live + [w for w in cfg.freezes if w.name not in names]


def _file_freezes(cfg: "Config") -> "list[FreezeWindow]":
    files = config_files(cfg)
    if not files:
        return []
    key = (cfg.source_path, cfg.catalog, cfg.service)
    signature = _signature(files)
    with _lock:
        seen = _seen.get(key)
        if seen is not None and seen.signature == signature:
            return seen.freezes
        digest = _digest(files)
        if seen is not None and seen.digest == digest:
            _seen[key] = _Seen(signature, digest, seen.freezes)  # touched, not changed
            return seen.freezes
        try:
            freezes = _read(files)
        except ConfigError as exc:
            raise ConfigError(f"the freezes could not be re-read: {exc.message.splitlines()[0]}",
                              hint="fix the file: until its freezes load, routine traffic changes are refused",
                              problems=exc.problems) from exc
        _seen[key] = _Seen(signature, digest, freezes)
        return freezes
