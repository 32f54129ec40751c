"""What the simulator returns: one backend's simulated steps (SimSeries), and the progress callback
`simulate()` and the store writer report through. Split from opsctl.metrics.simulator, which
re-exports it (its writers import it from here, so they do not import the simulator)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from opsctl.metrics import schema

if TYPE_CHECKING:  # numpy is imported inside the functions that use it (start-up stays light)
    import numpy as np

Progress = Callable[[str], None]


@dataclass
class SimSeries:
    """One backend's simulated steps: step-end timestamps and one array per store column."""

    backend: str
    timestamps: "np.ndarray"  # int64, step ends on the 10-second grid
    columns: dict[str, "np.ndarray"] = field(repr=False)  # schema.VALUE_COLUMNS -> per-step increments

    def __len__(self) -> int:
        return len(self.timestamps)

    def requests(self) -> int:
        return int(sum(self.columns[c].sum() for c in schema.REQUEST_COLUMNS))

    def outcome_totals(self) -> dict[str, int]:
        return {o: int(self.columns[f"req_{o}"].sum()) for o in schema.OUTCOMES}
