"""Burn rates over chosen windows and the error budget a drill spent, for a few SLOs, per instant.

    burn(w)  = (1 - good(w) / valid(w)) / (1 - goal)          as the burn-rate rules compute it
    spent    = bad events since the drill began / (period budget in events)
    period budget in events = (1 - goal) x valid events over the period

Good and valid come from the SLO's own queries and `counts_from`, as the SLO report reads them:
filter_valid, filter_bad (valid = good + bad) and query_sli alike. A query_sli SLO measures a ratio,
not events, so its counts are weighed by the window's length (every second counts the same).

The period's valid events are measured once, before the fault. The embedded store holds only the
baseline (a few days), so there they are scaled up to the period from the baseline's rate; the
report states which basis it used.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from opsctl.slo.model import counts_from

STEP = 10


@dataclass
class SloSample:
    burn: dict[int, float | None]  # window seconds -> burn rate
    bad_since: float | None
    valid_since: float | None


def _ratio(good: float | None, valid: float | None) -> float | None:
    if valid is None or valid <= 0:
        return None
    good = 0.0 if good is None else good  # no success series: no request succeeded
    return min(max(1.0 - good / valid, 0.0), 1.0)


def _queries(slo, window: int) -> dict[str, str]:
    return slo.queries(f"{window}s")


def _counts(slo, answers: dict[str, float | None], window: int) -> tuple[float | None, float | None]:
    """(good, valid) over `window` from the answers to the SLO's queries."""
    good, valid = counts_from(slo, {role: answers[q] for role, q in _queries(slo, window).items()})
    if not slo.counts_events and valid is not None:  # a ratio: weigh it by the window's length
        good, valid = (None if good is None else good * window), valid * window
    return good, valid


class BurnMeter:
    def __init__(self, source, slos: Sequence, period_seconds: int):
        self.source = source
        self.slos = {s.name: s for s in slos}
        self.period_seconds = period_seconds
        self.period_valid: dict[str, float | None] = {}
        self.basis = ""

    def measure_period(self, at: float, *, history_seconds: int | None = None) -> None:
        """Valid events over the period at `at`; `history_seconds`: only that much history exists."""
        window = self.period_seconds if history_seconds is None else min(history_seconds, self.period_seconds)
        queries = list(dict.fromkeys(q for s in self.slos.values() for q in _queries(s, window).values()))
        answers = dict(zip(queries, self.source.query_many(queries, at))) if queries else {}
        scale = self.period_seconds / window
        for name, s in self.slos.items():
            _, valid = _counts(s, answers, window)
            self.period_valid[name] = None if valid is None else valid * scale
        if history_seconds is not None and window < self.period_seconds:
            self.basis = (f"period budget estimated from {window // 86400}d of baseline traffic scaled to the"
                          f" {self.period_seconds // 86400}d period")
        else:
            self.basis = f"period budget from the valid events of the last {self.period_seconds // 86400}d"

    def sample(self, at: float, windows: Sequence[int], since: float | None) -> dict[str, SloSample]:
        spans = sorted(set(int(w) for w in windows))
        since_window = None
        if since is not None and at - since >= STEP:
            since_window = int((at - since) // STEP * STEP)
        queries: dict[str, None] = {}
        for s in self.slos.values():
            for w in spans + ([since_window] if since_window else []):
                queries.update(dict.fromkeys(_queries(s, w).values()))
        keys = list(queries)
        answers = dict(zip(keys, self.source.query_many(keys, at))) if keys else {}
        out: dict[str, SloSample] = {}
        for name, s in self.slos.items():
            budget = 1.0 - s.goal
            burns = {}
            for w in spans:
                ratio = _ratio(*_counts(s, answers, w))
                burns[w] = None if ratio is None else ratio / budget
            bad = valid = None
            if since_window:
                good_s, valid = _counts(s, answers, since_window)
                if valid is not None:
                    bad = max(valid - (good_s or 0.0), 0.0)
            elif since is not None:
                bad, valid = 0.0, 0.0
            out[name] = SloSample(burns, bad, valid)
        return out

    def spent(self, slo: str, sample: SloSample) -> float | None:
        """Share of the period's error budget the drill has spent (1.0 = all of it)."""
        s = self.slos[slo]
        total = self.period_valid.get(slo)
        if total is None or total <= 0 or sample.bad_since is None:
            return None
        value = sample.bad_since / ((1.0 - s.goal) * total)
        return value if math.isfinite(value) else None
