"""What drills spent of the error budget: each drill's window, and the bad events inside it.

A drill records its window in its state: from the first fault (`t0`) to the last fault removed
(a chain drill writes both as `window`). Embedded drills and
local chain drills run on their own metrics, so they spend none of the user's budget; drills on the
user's systems (`--live`, `--live --chain`) do. `opsctl slo report --exclude-drills` shows the
budget with and without them, as adjustments:

    drill share = bad events inside the drills' windows / ((1 - goal) x valid events over the period)
    remaining without drills = remaining + drill share
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Sequence

from opsctl.metrics.promql import increase_query

SPENDING_MODES = ("live", "live-chain")  # drills that fault the user's own traffic
STEP = 10


@dataclass(frozen=True)
class DrillWindow:
    run_id: str
    mode: str
    start: float
    end: float

    def to_dict(self) -> dict:
        from opsctl.clock import format_rfc3339

        return {"run_id": self.run_id, "mode": self.mode, "start": format_rfc3339(self.start),
                "end": format_rfc3339(self.end)}


def drill_windows(cfg, *, now: float | None = None) -> list[DrillWindow]:
    """The windows of the drills that faulted the user's traffic (newest first)."""
    from opsctl.drills.state import iter_runs

    now = time.time() if now is None else now
    out = []
    for state in iter_runs(cfg.drills_path):
        d = state.data
        if d.get("mode") not in SPENDING_MODES:
            continue
        window = d.get("window") or {}
        start = window.get("start") or d.get("t0")
        if start is None:  # refused or stopped before any fault: nothing spent
            continue
        removed = [f.get("removed_at") for f in d.get("faults") or [] if f.get("removed_at")]
        end = window.get("end") or (max(removed) if removed else None) or d.get("finished_at") or now
        out.append(DrillWindow(state.run_id, d["mode"], float(start), float(max(end, start))))
    return out


def _merged(windows: Sequence[DrillWindow], lo: float, hi: float) -> list[tuple[float, float, list[str]]]:
    """Windows clipped to (lo, hi], overlaps merged (an event is forgiven once), on the 10 s grid."""
    spans = sorted((max(w.start, lo) // STEP * STEP, min(-(-min(w.end, hi) // STEP) * STEP, hi), w.run_id)
                   for w in windows if w.end > lo and w.start < hi)
    merged: list[tuple[float, float, list[str]]] = []
    for start, end, run in spans:
        if end <= start:
            continue
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end), merged[-1][2] + [run])
        else:
            merged.append((start, end, [run]))
    return merged


def drill_spend(results, source, windows: Sequence[DrillWindow], at: float, period_seconds: int) -> dict[str, dict]:
    """Per SLO result: the bad events the drills' windows hold and the budget share they are."""
    spans = _merged(windows, at - period_seconds, at)
    queries: dict[str, tuple[float, str]] = {}
    for r in results:
        for start, end, _ in spans:
            for f in (r.slo.filter_good, r.slo.filter_valid):
                queries.setdefault(f"{end}|{f}", (end, increase_query(f, int(end - start))))
    answers: dict[str, float | None] = {}
    by_time: dict[float, list[str]] = {}
    for key, (end, q) in queries.items():
        by_time.setdefault(end, []).append(key)
    for end, keys in by_time.items():
        values = source.query_many([queries[k][1] for k in keys], end)
        answers.update(zip(keys, values))
    out = {}
    for r in results:
        bad = 0.0
        runs = []
        for start, end, ids in spans:
            valid = answers.get(f"{end}|{r.slo.filter_valid}")
            good = answers.get(f"{end}|{r.slo.filter_good}") or 0.0
            if valid:
                bad += max(valid - good, 0.0)
            runs += ids
        total = r.events
        share = None if not total else bad / ((1.0 - r.slo.goal) * total)
        remaining = r.error_budget_remaining
        out[r.slo.name] = {
            "drill_bad_events": round(bad, 3), "drill_budget_spent": share, "drills": runs,
            "error_budget_remaining_excluding_drills": None if remaining is None or share is None else remaining + share,
        }
    return out


def with_drill_spend(cfg, results, rows: list[dict], source, at: float) -> list[dict]:
    """`slo report --exclude-drills`: each row with the drills' share of its budget as an adjustment."""
    windows = drill_windows(cfg, now=at)
    spent = drill_spend(results, source, windows, at, cfg.slos.period_seconds) if windows else {}
    shown = {w.run_id: w.to_dict() for w in windows}
    out = []
    for r, row in zip(results, rows):
        extra = spent.get(r.slo.name) or {"drill_bad_events": 0.0, "drill_budget_spent": 0.0 if r.events else None,
                                          "drills": [], "error_budget_remaining_excluding_drills": r.error_budget_remaining}
        out.append({**row, **extra, "drill_windows": [shown[i] for i in extra["drills"] if i in shown]})
    return out
