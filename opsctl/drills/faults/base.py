"""The FaultInjector protocol.

Injecting is two steps so that a crash can always be undone: `prepare` reads what the fault will
change and returns a record holding everything needed to undo it (the original Istio fault, the
original replica count); the engine persists that record; only then does `apply` change anything.
`remove` undoes exactly what `apply` did, and leaves alone what someone else changed since, saying
so. Records are plain data: `opsctl drill cleanup` rebuilds the injector from `record["injector"]`.
"""

from __future__ import annotations

from typing import Protocol


class FaultInjector(Protocol):
    name: str  # simulated | istio-route | deployment-scale

    def prepare(self, fault, backend: str, at: float) -> dict:
        """A record of what `apply` will do and how to undo it (nothing is changed yet)."""
        ...

    def apply(self, record: dict) -> str:
        """Inject the fault; returns a description for the timeline."""
        ...

    def remove(self, record: dict, at: float) -> str:
        """Undo `apply`; returns what was done (or why nothing needed doing)."""
        ...


DRILL_ANNOTATION = "opsctl.io/drill-run"  # marks Kubernetes objects a drill has changed
