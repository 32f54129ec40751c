"""Incidents as files: one JSON document per incident under `<state_dir>/incidents/`, written
atomically under a file lock with a version counter as the compare-and-swap token (the local state
store). One host only: local mode and embedded drills."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Callable

from opsctl.incident.grouping import DEFAULT_QUIET
from opsctl.incident.store import StateIncidentStore

if TYPE_CHECKING:
    from opsctl.fencing import Term


def file_incident_store(state_dir: Path, *, service: str, quiet: float = DEFAULT_QUIET,
                        term: "Callable[[], Term | None] | None" = None,
                        clock: Callable[[], float] | None = None) -> StateIncidentStore:
    from opsctl.state.local import LocalStateStore

    return StateIncidentStore(LocalStateStore(Path(state_dir) / "incidents"), service=service, quiet=quiet,
                              term=term, clock=clock)


__all__ = ["file_incident_store"]
