"""Generated runbooks <-> a directory: compare (for `check` and `list`) and write (for `generate`).

Only the directory's top level holds runbooks; subdirectories (such as the template overrides in
runbooks/templates/) and hidden files are not runbooks and are never compared or touched. Each
file is written atomically (temp file in the same directory, fsync, rename, directory fsync), and
only when its bytes change. Extra files that carry opsctl's generated mark (an SLO renamed or
removed) are deleted; extra files without it were written by someone else and are kept, reported,
and make `check` fail until they are moved out.
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from opsctl.errors import OpsctlError
from opsctl.runbooks.render import GENERATED_MARK


@dataclass
class DirState:
    """How a directory differs from the runbooks the config generates."""

    directory: Path
    current: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)  # present, different bytes
    missing: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)  # present, not generated

    @property
    def clean(self) -> bool:
        return not (self.stale or self.missing or self.extra)

    def state_of(self, name: str) -> str:
        for state in ("stale", "missing", "extra"):
            if name in getattr(self, state):
                return state
        return "current"

    def to_dict(self, show: str | None = None) -> dict:
        return {"dir": show or str(self.directory), "clean": self.clean, "stale": self.stale,
                "missing": self.missing, "extra": self.extra, "current": len(self.current)}


@dataclass
class WriteResult:
    directory: Path
    written: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)  # extra files opsctl did not write
    dry_run: bool = False

    def to_dict(self, show: str | None = None) -> dict:
        return {"dir": show or str(self.directory), "dry_run": self.dry_run, "written": self.written,
                "unchanged": len(self.unchanged), "removed": self.removed, "kept": self.kept}


def present_files(directory: Path) -> list[str]:
    """Top-level, non-hidden regular files: what a runbooks directory holds."""
    if not directory.is_dir():
        return []
    return sorted(p.name for p in directory.iterdir() if p.is_file() and not p.name.startswith("."))


def compare(files: Mapping[str, str], directory: Path) -> DirState:
    directory = Path(directory)
    state = DirState(directory)
    present = set(present_files(directory))
    for name, text in sorted(files.items()):
        if name not in present:
            state.missing.append(name)
        elif _read(directory / name) == text.encode():
            state.current.append(name)
        else:
            state.stale.append(name)
    state.extra = sorted(present - set(files))
    return state


def write(files: Mapping[str, str], directory: Path, *, dry_run: bool = False) -> WriteResult:
    if not files:
        raise OpsctlError("no runbooks to write")  # the generator never returns none; refuse to empty a directory
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise OpsctlError(f"{directory} exists and is not a directory")
    state = compare(files, directory)
    result = WriteResult(directory, dry_run=dry_run, unchanged=list(state.current))
    result.written = sorted(state.stale + state.missing)
    for name in state.extra:
        (result.removed if _is_generated(directory / name) else result.kept).append(name)
    if dry_run:
        return result
    directory.mkdir(parents=True, exist_ok=True)
    for name in result.written:
        write_atomic(directory / name, files[name])
    for name in result.removed:
        (directory / name).unlink(missing_ok=True)
    if result.removed:
        _fsync_dir(directory)
    return result


def write_atomic(path: Path, text: str) -> None:
    """The whole file or none of it (statefile.atomic_file: temp file, fsync, rename, directory
    fsync). UTF-8 whatever the locale, so the bytes match what `compare` expects."""
    from opsctl.statefile import atomic_file

    with atomic_file(path, mode=0o644) as handle:
        if not isinstance(handle, io.TextIOWrapper):  # what atomic_file opens: os.fdopen(fd, "w")
            raise TypeError(f"atomic_file opened a {type(handle).__name__}, not a text file over bytes")
        handle.flush()
        handle.buffer.write(text.encode())


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise OpsctlError(f"{path}: cannot read: {exc.strerror}") from exc


def _is_generated(path: Path) -> bool:
    try:
        with path.open("rb") as handle:
            return handle.read(len(GENERATED_MARK)).decode(errors="replace") == GENERATED_MARK
    except OSError:
        return False
