"""The simulator's store writer: simulated steps written into the embedded store (replacing the
simulated range, or adding to it). Split from opsctl.metrics.simulator, which re-exports it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping

from opsctl.errors import UsageError
from opsctl.metrics import schema

if TYPE_CHECKING:
    from opsctl.metrics.embedded import EmbeddedStore
    from opsctl.metrics.sim_series import Progress, SimSeries


def write_to_store(store: "EmbeddedStore", series: Mapping[str, SimSeries], *, mode: str = "replace",
                   progress: Progress | None = None) -> int:
    """Write simulated steps. 'replace' first removes each backend's steps in the simulated range
    (so nothing older survives inside it); 'add' adds the counts to what the store holds."""
    if mode not in ("replace", "add"):
        raise UsageError(f"unknown write mode {mode!r} (known: replace, add)")
    written = 0
    for name, s in series.items():
        if not len(s):
            continue
        timestamps = s.timestamps.tolist()
        if mode == "replace":
            store.delete_range(timestamps[0], timestamps[-1], [name])
        values = {c: s.columns[c].tolist() for c in schema.VALUE_COLUMNS}
        written += store.write_steps(name, timestamps, values, mode="add")
        if progress:
            progress(f"wrote {name}: {len(s):,} steps")
    return written
