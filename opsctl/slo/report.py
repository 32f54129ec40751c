"""An SLO report: every count fetched at one instant, each SLO computed, status per SLO."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

from opsctl.clock import format_duration, format_rfc3339
from opsctl.errors import OpsctlError
from opsctl.metrics.base import MetricSource
from opsctl.slo import budget
from opsctl.slo.conventions import WINDOWS
from opsctl.slo.generator import MemoClient, compute_windows
from opsctl.slo.model import SloDefinition, counts_from

PERIOD = "period"
SLI_TOLERANCE = 1e-6  # slo-generator rounds its SLI to 6 decimals


@dataclass
class SloResult:
    slo: SloDefinition
    at: float
    period_seconds: int
    counts: dict[str, budget.WindowCounts]
    burn_rate: dict[str, float | None]
    status: budget.Status
    sli: float | None = None
    error_budget_remaining: float | None = None
    missing: list[str] = field(default_factory=list)
    data_since: float | None = None  # where the period's data starts, when it starts inside the period

    @property
    def covered_seconds(self) -> float | None:
        if self.data_since is None:
            return None
        return min(float(self.period_seconds), max(0.0, self.at - self.data_since))

    def notes(self) -> list[str]:
        """What a reader must know to read the figures right."""
        out = []
        covered = self.covered_seconds
        if covered is not None and covered < self.period_seconds:
            out.append(f"only {_days(covered)} of the {round(self.period_seconds / 86400)}-day period have data"
                       f" (since {format_rfc3339(self.data_since)}): SLI and budget cover that span alone")
        return out

    @property
    def events(self) -> float | None:
        return self.counts[PERIOD].valid if self.slo.counts_increases else None

    @property
    def bad_events(self) -> float | None:
        return self.counts[PERIOD].bad if self.slo.counts_increases else None

    def worst_burn(self) -> tuple[str, float] | None:
        rated = [(w, r) for w, r in self.burn_rate.items() if r is not None]
        return max(rated, key=lambda item: item[1]) if rated else None

    def to_dict(self) -> dict:
        return {
            "name": self.slo.name,
            "backend": self.slo.backend,
            "kind": self.slo.kind,
            "goal": self.slo.goal,
            "period": format_duration(self.period_seconds),
            "at": format_rfc3339(self.at),
            "sli": self.sli,
            "error_budget_remaining": self.error_budget_remaining,
            "burn_rate": dict(self.burn_rate),
            "status": self.status.level,
            "reason": self.status.reason,
            "alerts": list(self.status.fired),
            "events": _count(self.events),
            "bad_events": _count(self.bad_events),
            "period_covered": None if self.covered_seconds is None else self.covered_seconds / self.period_seconds,
            "data_since": None if self.data_since is None else format_rfc3339(self.data_since),
            "notes": self.notes(),
            "file": self.slo.file,
        }


def _days(seconds: float) -> str:
    days = seconds / 86400
    return f"{days:.1f} days" if abs(days - round(days)) > 0.05 else f"{round(days)} days"


def _count(value: float | None) -> float | int | None:
    if value is None:
        return None
    return int(round(value)) if abs(value - round(value)) < 1e-9 else value


def report_windows(period_seconds: int) -> dict[str, int]:
    return {**WINDOWS, PERIOD: period_seconds}


def plan_queries(slos: Sequence[SloDefinition], windows: dict[str, int]) -> list[str]:
    """Every distinct query a report needs, each with the SLO's own matchers."""
    seen: dict[str, None] = {}
    for slo in slos:
        for seconds in windows.values():
            for query in slo.queries(f"{seconds}s").values():
                seen.setdefault(query)
    return list(seen)


def window_counts(slo: SloDefinition, seconds: int, answers: dict[str, float | None]) -> budget.WindowCounts:
    good, valid = counts_from(slo, {role: answers[q] for role, q in slo.queries(f"{seconds}s").items()})
    return budget.WindowCounts(good=good, valid=valid)


def build_report(
    slos: Sequence[SloDefinition],
    source: MetricSource,
    at: float,
    period_seconds: int,
    *,
    progress: Callable[[str], None] | None = None,
    cross_check: bool = True,
    coverage: bool = False,
) -> list[SloResult]:
    """`cross_check=False` skips slo-generator's recomputation of each SLI (its import and one
    compute per SLO and window, ~150 ms): for callers that need only the status, such as the
    traffic guards on a fast CLI path. The figures and status are opsctl's either way."""
    windows = report_windows(period_seconds)
    queries = plan_queries(slos, windows)
    if progress:
        progress(f"querying {source.description}: {len(queries)} queries for {len(slos)} SLOs")
    answers = dict(zip(queries, source.query_many(queries, at)))
    results = [_evaluate(slo, windows, answers, at, period_seconds, cross_check) for slo in slos]
    if coverage:
        _add_coverage(results, source, at, period_seconds)
    return results


def coverage_selector(slo: SloDefinition) -> str | None:
    """The series whose data span bounds the SLO's: its valid (or good) selector, when plain."""
    text = slo.filter_valid or slo.filter_good
    if not slo.counts_events or text is None or "[window]" in text:
        return None
    return text


def _add_coverage(results: list[SloResult], source: MetricSource, at: float, period_seconds: int) -> None:
    """`coverage=True`: say where the period's data starts when that is inside the period (a 28-day
    budget over 4 days of data is not a 28-day budget)."""
    selectors = {sel: None for r in results if (sel := coverage_selector(r.slo))}
    data_start = getattr(source, "data_start", None)
    if not selectors or data_start is None:
        return
    starts = dict(zip(selectors, data_start(list(selectors), at, period_seconds)))
    for r in results:
        start = starts.get(coverage_selector(r.slo))
        if start is not None and start > at - period_seconds + max(60, period_seconds // 672):
            r.data_since = start  # a shortfall finer than the subquery step is not reported


def _evaluate(slo, windows, answers, at, period_seconds, cross_check=True) -> SloResult:
    counts = {name: window_counts(slo, seconds, answers) for name, seconds in windows.items()}
    missing = []
    for name, c in counts.items():
        if c.good is None and c.valid is None:
            missing.append(name if slo.counts_events else f"{name} (the SLI expression matched no series)")
        elif c.good is None:
            missing.append(f"{name} (filter_good matched no series)")
        elif c.valid is None:
            missing.append(f"{name} (filter_valid matched no series)")
    burns = {name: budget.burn_rate(counts[name], slo.goal) for name in WINDOWS}
    period = counts[PERIOD]
    status = budget.evaluate_status(
        burns, missing, period.has_data and period.valid > 0, period_seconds
    )
    result = SloResult(slo, at, period_seconds, counts, burns, status, missing=missing)
    if period.has_data and period.valid > 0:
        result.sli = 1.0 - budget.error_ratio(period)
        result.error_budget_remaining = budget.budget_remaining(period, slo.goal)
    if cross_check:
        _cross_check(slo, windows, counts, answers, at)
    return result


def _cross_check(slo, windows, counts, answers, at) -> None:
    """slo-generator computes the same windows from the same answers; its SLI must agree with ours.
    Its queries are answered with opsctl's answer for the same role (see SloDefinition)."""
    computable = {n: s for n, s in windows.items() if counts[n].has_data and counts[n].valid > 0}
    if not computable:
        return
    memo: dict[str, float | None] = {}
    for seconds in computable.values():
        ours = slo.queries(f"{seconds}s")
        for role, query in slo.generator_queries(seconds).items():
            memo[query] = answers[ours[role]]
    reports = compute_windows(slo, computable, MemoClient(memo, at))
    for name in computable:
        report = reports.get(name)
        if report is None or not report.get("valid"):
            errors = "; ".join(report.get("errors", [])) if report else "no report"
            raise OpsctlError(f"slo-generator could not compute {slo.name} over {name}: {errors}")
        ours = 1.0 - budget.error_ratio(counts[name])
        if abs(report["sli_measurement"] - round(ours, 6)) > SLI_TOLERANCE:
            raise OpsctlError(
                f"internal error: slo-generator's SLI {report['sli_measurement']} for {slo.name} over {name}"
                f" disagrees with opsctl's {ours:.6f}"
            )
