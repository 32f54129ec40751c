"""The dry-run actuator: reads through to the real one, writes nothing.

Used for `--dry-run` on targets that have no server-side dry run (the file actuator). The version
check still runs, so a dry run reports a conflict exactly where the real write would.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from opsctl.errors import ConflictError
from opsctl.traffic.base import Actuator, ChangeNotice, StoredSplit, WriteResult
from opsctl.traffic.split import Split

if TYPE_CHECKING:
    from opsctl.traffic.record import ChangeRecord


class DryRunActuator:
    kind = "noop"

    def __init__(self, inner: Actuator):
        self.inner = inner
        self.target = f"{inner.target} (dry run: nothing is written)"

    def read(self) -> StoredSplit:
        return self.inner.read()

    def write(self, split: Split, expected_version: str, *, dry_run: bool = True, record: ChangeRecord | None = None) -> WriteResult:
        current = self.inner.read().version
        if current != expected_version:
            raise ConflictError(f"{self.inner.target}: the split changed while this change was planned")
        return WriteResult(current, True, "dry run: nothing written")

    def record_event(self, notice: ChangeNotice) -> str | None:
        return None
