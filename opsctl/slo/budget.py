"""Pure error-budget and burn-rate math, and the multi-window multi-burn-rate status.

Inputs are event counts over windows; None means no data (no series matched, or the data
stopped), which is never read as healthy. A window with zero events has no burn rate but is data.
"""

from __future__ import annotations

from dataclasses import dataclass

from opsctl.slo.conventions import ALERT_PAIRS, AlertPair, format_factor


@dataclass(frozen=True)
class WindowCounts:
    good: float | None
    valid: float | None

    @property
    def has_data(self) -> bool:
        return self.good is not None and self.valid is not None

    def counts(self) -> tuple[float, float] | None:
        """(good, valid) when both are known, else None."""
        if self.good is None or self.valid is None:
            return None
        return self.good, self.valid

    @property
    def bad(self) -> float | None:
        known = self.counts()
        return None if known is None else max(known[1] - known[0], 0.0)


def error_ratio(counts: WindowCounts) -> float | None:
    known = counts.counts()
    if known is None or known[1] <= 0:
        return None
    good, valid = known
    return min(max((valid - good) / valid, 0.0), 1.0)


def burn_rate(counts: WindowCounts, goal: float) -> float | None:
    """How many times faster than sustainable the budget burns: error ratio / (1 - goal)."""
    ratio = error_ratio(counts)
    return None if ratio is None else ratio / (1.0 - goal)


def budget_remaining(counts: WindowCounts, goal: float) -> float | None:
    """Fraction of the period's budget left; negative when overspent."""
    rate = burn_rate(counts, goal)
    return None if rate is None else 1.0 - rate


@dataclass(frozen=True)
class Status:
    level: str  # ok | ticket | page | unknown
    fired: tuple[str, ...]  # e.g. "page: 1h/5m > 13.44x"
    reason: str


def pair_fires(pair: AlertPair, burns: dict[str, float | None], period_seconds: int) -> bool:
    """`burns` is keyed by the period's own windows (conventions.period_windows)."""
    factor = pair.factor(period_seconds)
    long_w, _, short_w, _ = pair.windows(period_seconds)
    long, short = burns.get(long_w), burns.get(short_w)
    return long is not None and short is not None and long > factor and short > factor


def evaluate_status(
    burns: dict[str, float | None],
    missing: list[str],
    period_has_events: bool,
    period_seconds: int,
) -> Status:
    """`missing` names windows with no data at all; they make the status unknown, never ok."""
    if missing:
        return Status("unknown", (), f"no data over {', '.join(missing)}")
    if not period_has_events:
        return Status("unknown", (), "no valid events over the period")
    fired = tuple(
        f"{p.severity}: {'/'.join(p.windows(period_seconds)[::2])} burn > {format_factor(p.factor(period_seconds))}x"
        for p in ALERT_PAIRS
        if pair_fires(p, burns, period_seconds)
    )
    for level in ("page", "ticket"):
        if any(f.startswith(level) for f in fired):
            return Status(level, fired, "; ".join(fired))
    return Status("ok", (), "no burn-rate pair above its threshold")
