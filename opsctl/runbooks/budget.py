"""What an alert means, in numbers: an SLO's error budget, and each burn-rate pair's threshold as an
error ratio, a share of the budget and the time to spend it. Split from opsctl.runbooks.facts, which re-exports it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

from opsctl.metrics import schema
from opsctl.runbooks.formatting import human_duration, one_in, pct, seconds_text
from opsctl.slo import conventions as cv

if TYPE_CHECKING:
    from opsctl.slo.model import SloDefinition
    from opsctl.slo.rule_plan import BurnAlert


@dataclass(frozen=True)
class Budget:
    """An SLO's objective and error budget over the period."""

    goal: float
    period: str  # "28d"
    period_seconds: int

    @property
    def ratio(self) -> float:
        return 1.0 - self.goal

    @property
    def objective(self) -> str:
        return pct(self.goal)

    @property
    def ratio_text(self) -> str:
        return pct(self.ratio)

    @property
    def minutes(self) -> float:
        return self.period_seconds / 60 * self.ratio

    @property
    def minutes_text(self) -> str:
        return f"{self.minutes:.4g} minutes"

    @property
    def duration_text(self) -> str:
        return human_duration(self.minutes * 60)

    @property
    def period_days(self) -> str:
        return f"{self.period_seconds / 86400:g}"


@dataclass(frozen=True)
class Pair:
    """One multi-window burn-rate condition of an alert, with what its threshold means."""

    severity: str
    long: str
    short: str
    factor: float
    for_text: str  # "2m", or "0s" when the alert fires at once
    min_request_rate: float
    budget: Budget
    long_seconds: int

    @property
    def factor_text(self) -> str:
        from opsctl.slo.conventions import format_factor

        return format_factor(self.factor)

    @property
    def error_ratio(self) -> float:
        return self.factor * self.budget.ratio

    @property
    def error_ratio_text(self) -> str:
        return pct(self.error_ratio)

    @property
    def one_in(self) -> str:
        return one_in(self.error_ratio)

    @property
    def budget_share(self) -> float:
        """Share of the period's budget spent over the long window at exactly the threshold."""
        return self.factor * self.long_seconds / self.budget.period_seconds

    @property
    def budget_share_text(self) -> str:
        return pct(self.budget_share)

    @property
    def spent_text(self) -> str:
        """That share as minutes of full outage."""
        return human_duration(self.budget_share * self.budget.minutes * 60)

    @property
    def exhausted_in(self) -> str:
        """How long the whole budget lasts at the threshold burn rate."""
        return human_duration(self.budget.period_seconds / self.factor)

    def bad_per_second_at(self, rps: float | None) -> str | None:
        if rps is None:
            return None
        return f"{rps * self.error_ratio:.3g}"


def budget_of(slo: "SloDefinition", period_seconds: int) -> Budget:
    return Budget(slo.goal, cv.window_label(period_seconds), period_seconds)


def pairs_of(alerts: Sequence["BurnAlert"], budget: Budget) -> list[Pair]:
    from opsctl.clock import format_duration

    return [
        Pair(a.severity, a.long, a.short, a.factor, format_duration(a.for_seconds) if a.for_seconds else "0s",
             a.min_request_rate, budget, a.long_seconds)
        for a in alerts
    ]


def bad_events(slo: "SloDefinition") -> str:
    """What the SLO counts as bad, in words."""
    if slo.kind == "latency" and slo.threshold_seconds is not None:
        return f"requests slower than {seconds_text(slo.threshold_seconds)}"
    return "failed requests (" + ", ".join(schema.BAD_OUTCOMES) + ")"
