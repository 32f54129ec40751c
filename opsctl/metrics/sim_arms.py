"""The A/B arms' counters of the grammar service, simulated from the proxy's suggestions.

During an A/B test the grammar service counts, per arm (the backend its experiment gate assigned
the user to), the suggestions it showed and the suggestions the user accepted:

    grammar_suggestions_shown_total{arm}       counter; the arm's suggestions shown
    grammar_suggestions_accepted_total{arm}    counter; of them, accepted by the user

They are not the proxy's client-side counters, so the embedded store keeps them in its gauges table
(opsctl.metrics.gauges: one row per name, label set and instant), as cumulative values per step.
`arm_counters()` draws them from a backend's simulated steps: shown = the step's `suggestions`
column (what the proxy parsed from the answers), accepted ~ Binomial(shown, the arm's acceptance
rate), from a random stream of its own (seed, 5, backend), so no other column changes. Each
simulated range is a counter of its own, starting at 0 at the range's start (as after a restart),
and `write_arm_counters()` replaces what the gauges table held in that range.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Mapping

from opsctl.errors import UsageError
from opsctl.metrics import schema

if TYPE_CHECKING:
    from opsctl.metrics.sim_series import SimSeries

SHOWN = "grammar_suggestions_shown_total"
ACCEPTED = "grammar_suggestions_accepted_total"
LABEL_ARM = "arm"
ACCEPT_RATE = 0.32  # a suggestion's chance to be accepted, the same on both backends unless told otherwise


def arm_counters(series: "Mapping[str, SimSeries]", *, seed: int = 0,
                 accept: Mapping[str, float] | None = None) -> list[tuple[str, dict[str, str], int, float]]:
    """(name, labels, ts, cumulative value) of both counters per arm (= backend), at the range's
    start (0) and at every step end."""
    import numpy as np

    from opsctl.metrics.sim_draw import _rng, _stream_id

    out: list[tuple[str, dict[str, str], int, float]] = []
    for name, s in series.items():
        if not len(s):
            continue
        rate = (accept or {}).get(name, ACCEPT_RATE)
        if not 0 <= rate <= 1:
            raise UsageError(f"arm {name}: an acceptance rate must be between 0 and 1, got {rate}")
        shown = np.asarray(s.columns["suggestions"], dtype=np.int64)
        accepted = _rng(seed, 5, _stream_id(name)).binomial(shown, rate)
        first = int(s.timestamps[0]) - schema.STEP_SECONDS
        labels = {LABEL_ARM: name}
        for metric, steps in ((SHOWN, shown), (ACCEPTED, accepted)):
            out.append((metric, labels, first, 0.0))
            out.extend((metric, labels, int(ts), float(v)) for ts, v in zip(s.timestamps.tolist(), np.cumsum(steps).tolist()))
    return out


def write_arm_counters(path: Path, series: "Mapping[str, SimSeries]", *, seed: int = 0,
                       accept: Mapping[str, float] | None = None) -> int:
    """Write the arms' counters into the gauges table of the embedded store file at `path`,
    replacing their samples inside each arm's simulated range. Returns the rows written."""
    from opsctl.metrics.gauges import GaugeStore

    samples = arm_counters(series, seed=seed, accept=accept)
    store = GaugeStore.open(Path(path))
    try:
        with store.conn:
            store.conn.execute("BEGIN IMMEDIATE")
            for name, s in series.items():
                if not len(s):
                    continue
                labels = json.dumps({LABEL_ARM: name}, sort_keys=True, separators=(",", ":"))
                store.conn.execute("DELETE FROM gauges WHERE name IN (?, ?) AND labels = ? AND ts >= ? AND ts <= ?",
                                   (SHOWN, ACCEPTED, labels, int(s.timestamps[0]) - schema.STEP_SECONDS,
                                    int(s.timestamps[-1])))
            store.conn.executemany(
                "INSERT INTO gauges (name, labels, ts, value) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (name, labels, ts) DO UPDATE SET value = excluded.value",
                [(n, json.dumps(lab, sort_keys=True, separators=(",", ":")), ts, v) for n, lab, ts, v in samples])
    finally:
        store.close()
    return len(samples)
