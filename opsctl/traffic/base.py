"""The Actuator protocol: where the split lives and how it changes, with optimistic concurrency.

`read()` returns the split, an opaque version (a file's counter, an object's resourceVersion) and
the change record stored with it (opsctl/traffic/record.py). `write()` stores a split and its new
record in one write, only if the version is still the one that was read, else raises
ConflictError; the controller then re-reads, re-plans and re-checks its guards. With `dry_run` the
write is validated (by the API server's dryRun=All for Kubernetes targets) and nothing is stored.
A stored split that cannot be parsed is reported as `corrupt` (split None) rather than raised, so an
emergency change can still repair it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from opsctl.model import Model
from opsctl.traffic.split import Split

if TYPE_CHECKING:
    from opsctl.traffic.record import ChangeRecord


class StoredSplit(Model):
    split: Split | None  # None: the target holds no split yet (unknown state)
    version: str
    note: str = ""  # e.g. "not written yet: the configured default"
    record: "ChangeRecord | None" = None  # the change record stored with the split, typed (record.parse)
    corrupt: str = ""  # why the stored split cannot be used (weights summing to 120, a truncated file)


class WriteResult(Model):
    version: str  # the new version (the old one on a dry run)
    dry_run: bool
    detail: str = ""  # what the server said, e.g. "server dry run accepted"


class ChangeNotice(Model):
    """What an applied change tells the outside world (Kubernetes Event, pager change event)."""

    action: str
    before: Split | None
    after: Split
    actor: str
    reason: str
    incident: str | None
    emergency: bool
    overrides: tuple[str, ...]  # guards overridden, e.g. ("freeze thanksgiving",)

    def message(self, order: list[str]) -> str:
        before = self.before.describe(order) if self.before else "unset"
        text = f"{self.action}: {before} -> {self.after.describe(order)} by {self.actor}"
        if self.incident:
            text += f" (incident {self.incident})"
        if self.reason:
            text += f": {self.reason}"
        if self.overrides:
            text += f" [emergency override: {', '.join(self.overrides)}]"
        return text[:1024]


class Actuator(Protocol):
    kind: str  # file | configmap | istio | gateway-api | noop
    target: str  # human description of where the split lives

    def read(self) -> StoredSplit: ...

    def write(self, split: Split, expected_version: str, *, dry_run: bool, record: "ChangeRecord | None" = None) -> WriteResult:
        """Store `split` and, in the same write, `record` (None keeps the stored record)."""
        ...

    def record_event(self, notice: ChangeNotice) -> str | None:
        """Record the change where operators of the target look (a Kubernetes Event); returns a
        description of what was recorded, or None when the target has no such place."""
        ...


class ChangeHook(Protocol):
    """Told about every applied change, after the audit entry is written (e.g. a pager change event).
    A failing hook is reported as a warning: the change itself has already happened."""

    name: str

    def on_change(self, notice: ChangeNotice) -> None: ...
