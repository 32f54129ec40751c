"""The embedded default actuator: the split in a JSON file under the state dir.

Writes are atomic (temp file, fsync, rename, directory fsync) under an exclusive lock, and carry a
version counter for optimistic concurrency: a write whose expected version is no longer current
raises ConflictError and leaves the file alone. A grammar service reading the file sees either the
old or the new split, never half of one. The change record (opsctl/traffic/record.py) lives in the
same file under the key `opsctl`, so the split and its record are one write.

A file that is not a valid split (weights summing to 120, truncated JSON) is read as corrupt: its
version is a digest of its bytes, so an emergency `traffic set` can still replace it by CAS.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from opsctl.errors import ConflictError, UsageError
from opsctl.statefile import locked, write_json_atomic
from opsctl.traffic import record as records
from opsctl.traffic.base import ChangeNotice, StoredSplit, WriteResult
from opsctl.traffic.split import Split

REPAIR_HINT = ("repair it with an emergency set, e.g. `opsctl traffic set {example} --emergency --incident ID"
               " --reason \"repair the stored split\" --yes` (audited), or fail over with `opsctl traffic failover`")


def repair_hint(default: Split | None, backends: list[str]) -> str:
    if default is not None:
        example = " ".join(f"{b}={default.weight(b)}" for b in backends)
    else:
        example = f"{backends[0]}=100" if backends else "BACKEND=100"
    return REPAIR_HINT.format(example=example)


class FileActuator:
    kind = "file"

    def __init__(self, path: Path, *, default: Split | None, backends: list[str]):
        self.path = Path(path)
        self.default = default
        self.backends = backends
        self.target = f"file {self.path}"

    def _raw(self) -> bytes | None:
        try:
            return self.path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            from opsctl.errors import OpsctlError

            raise OpsctlError(f"{self.path}: cannot read the stored split: {exc.strerror}") from exc

    @staticmethod
    def _parse(raw: bytes) -> tuple[dict[str, Any] | None, str]:
        """(the JSON object or None, its version token)."""
        try:
            data = json.loads(raw)
        except ValueError:
            data = None
        if isinstance(data, dict) and isinstance(data.get("version", 0), int):
            return data, str(data.get("version", 0))
        import hashlib

        return None, "corrupt-" + hashlib.sha256(raw).hexdigest()[:12]

    def read(self) -> StoredSplit:
        raw = self._raw()
        if raw is None:
            if self.default is None:
                return StoredSplit(None, "0", "no split stored yet and traffic.default_split is not set",
                                   record=records.empty())
            return StoredSplit(self.default, "0", "not written yet: traffic.default_split", record=records.empty())
        data, version = self._parse(raw)
        hint = repair_hint(self.default, self.backends)
        if data is None:
            why = f"{self.path}: the stored split is not a JSON object with a version (truncated or overwritten?)"
            return StoredSplit(None, version, f"corrupt: {why}; {hint}", record=records.empty(), corrupt=why)
        try:
            record = records.parse(data.get(records.FILE_KEY), str(self.path))
        except Exception:  # a damaged record must not block a repair either
            record = records.empty()
        try:
            split = Split.from_dict(data, self.backends, str(self.path))
        except UsageError as exc:
            why = f"the stored split is not valid: {exc.message}"
            return StoredSplit(None, version, f"corrupt: {why}; {hint}", record=record, corrupt=why)
        return StoredSplit(split, version, record=record)

    def write(self, split: Split, expected_version: str, *, dry_run: bool, record: records.ChangeRecord | None = None) -> WriteResult:
        with locked(self.path):
            raw = self._raw()
            data, current = self._parse(raw) if raw is not None else ({}, "0")
            if current != expected_version:
                raise ConflictError(
                    f"{self.path}: the split changed while this change was planned (version {expected_version} -> {current})"
                )
            if dry_run:
                return WriteResult(current, True, "dry run: nothing written")
            version = int(current) + 1 if current.isdigit() else 1
            kept = (data or {}).get(records.FILE_KEY)  # as stored, when no new record is given
            body = {"version": version, **split.to_dict(self.backends)}
            if record is not None:
                body[records.FILE_KEY] = record.stored()
            elif kept is not None:
                body[records.FILE_KEY] = kept
            write_json_atomic(self.path, body)
        return WriteResult(str(version), False)

    def record_event(self, notice: ChangeNotice) -> str | None:
        return None
