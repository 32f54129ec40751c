"""Drills as a Prometheus series, for the dashboards' drill annotations.

A drill's window lives in its state, not in Prometheus. `drill_openmetrics` writes the windows of
the drills that spent the service's budget (the ones `slo report --exclude-drills` forgives:
`--live`, `--live --chain`) as `opsctl_drill_active{service, run_id, mode} 1`, a sample a minute over
each window, in OpenMetrics: backfill it next to the recorded series with `promtool tsdb
create-blocks-from openmetrics FILE DATA_DIR`. The overview's "Drills" annotation reads it; a board
with no such series simply shows no drill.
"""

from __future__ import annotations

from typing import Protocol, Sequence


class DrillWindow(Protocol):
    """A drill's window as opsctl.drills.spend keeps it (that floor is above this one)."""

    @property
    def run_id(self) -> str: ...
    @property
    def mode(self) -> str: ...
    @property
    def start(self) -> float: ...
    @property
    def end(self) -> float: ...


DRILL_SERIES = "opsctl_drill_active"
STEP = 60


def _quote(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def drill_openmetrics(windows_by_service: Sequence[tuple[str, Sequence[DrillWindow]]]) -> str:
    """(service, DrillWindows) pairs -> OpenMetrics text; each window from its first minute to its last."""
    lines = [f"# TYPE {DRILL_SERIES} gauge", f"# HELP {DRILL_SERIES} 1 while a drill faults the service's traffic."]
    for service, windows in windows_by_service:
        for w in sorted(windows, key=lambda w: (w.start, w.run_id)):
            labels = f'mode="{_quote(w.mode)}",run_id="{_quote(w.run_id)}",service="{_quote(service)}"'
            t, end = int(w.start // STEP * STEP), int(-(-w.end // STEP) * STEP)
            while t <= end:
                lines.append(f"{DRILL_SERIES}{{{labels}}} 1 {t}")
                t += STEP
    lines.append("# EOF")
    return "\n".join(lines) + "\n"
