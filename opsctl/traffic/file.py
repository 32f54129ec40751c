"""The embedded default actuator: the split in a JSON file under the state dir.

Writes are atomic (temp file, fsync, rename, directory fsync) under an exclusive lock, and carry a
version counter for optimistic concurrency: a write whose expected version is no longer current
raises ConflictError and leaves the file alone. A grammar service reading the file sees either the
old or the new split, never half of one.
"""

from __future__ import annotations

from pathlib import Path

from opsctl.errors import ConflictError, NoDataError, OpsctlError, UsageError
from opsctl.statefile import locked, read_json, write_json_atomic
from opsctl.traffic.base import ChangeNotice, StoredSplit, WriteResult
from opsctl.traffic.split import Split


class FileActuator:
    kind = "file"

    def __init__(self, path: Path, *, default: Split | None, backends: list[str]):
        self.path = Path(path)
        self.default = default
        self.backends = backends
        self.target = f"file {self.path}"

    def _load(self) -> dict | None:
        try:
            data = read_json(self.path, None)
        except OpsctlError as exc:
            raise NoDataError(f"the stored split is unreadable: {exc.message}", hint=exc.hint) from exc
        if data is not None and not isinstance(data, dict):
            raise NoDataError(f"{self.path}: the stored split is not a JSON object")
        return data

    def read(self) -> StoredSplit:
        data = self._load()
        if data is None:
            if self.default is None:
                return StoredSplit(None, "0", "no split stored yet and traffic.default_split is not set")
            return StoredSplit(self.default, "0", "not written yet: traffic.default_split")
        try:
            split = Split.from_dict(data, self.backends, str(self.path))
        except UsageError as exc:
            raise NoDataError(
                f"the stored split is not valid: {exc.message}",
                hint="fix or remove the file, or set the split again with `opsctl traffic set ... --emergency`",
            ) from exc
        return StoredSplit(split, str(data.get("version", 0)))

    def write(self, split: Split, expected_version: str, *, dry_run: bool) -> WriteResult:
        with locked(self.path):
            data = self._load()
            current = str(data.get("version", 0)) if data else "0"
            if current != expected_version:
                raise ConflictError(
                    f"{self.path}: the split changed while this change was planned (version {expected_version} -> {current})"
                )
            if dry_run:
                return WriteResult(current, True, "dry run: nothing written")
            version = int(current) + 1
            write_json_atomic(self.path, {"version": version, **split.to_dict(self.backends)})
        return WriteResult(str(version), False)

    def record_event(self, notice: ChangeNotice) -> str | None:
        return None
