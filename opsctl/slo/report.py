"""An SLO report: every count fetched at one instant, each SLO computed, status per SLO."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

from opsctl.clock import format_duration, format_rfc3339
from opsctl.errors import OpsctlError
from opsctl.metrics.base import MetricSource
from opsctl.slo import budget
from opsctl.slo import conventions as cv
from opsctl.slo.conventions import WINDOWS
from opsctl.slo.model import SloDefinition, counts_from

PERIOD = "period"


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
    long_windows: str | None = None  # recorded | raw, where recorded series were looked for
    long_windows_why: str = ""

    @property
    def covered_seconds(self) -> float | None:
        if self.data_since is None:
            return None
        return min(float(self.period_seconds), max(0.0, self.at - self.data_since))

    def notes(self) -> list[str]:
        """What a reader must know to read the figures right."""
        out = []
        if self.long_windows:
            out.append(f"{self.long_windows}: {self.long_windows_why}")
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
            "long_windows": self.long_windows,
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
    cross_check: bool = False,
    coverage: bool = False,
    recorded_interval: int | None = None,
) -> list[SloResult]:
    """The figures and status are opsctl's. `cross_check=True` also has slo-generator recompute
    each window's SLI from the same counts and fails on a disagreement (its import and one compute
    per SLO and window cost ~150 ms: `opsctl slo report --cross-check` and tests ask for it).

    `recorded_interval` (the rules' evaluation interval): on a PromQL source, an SLO whose
    recorded base-window increases (`opsctl slo rules`) span its data takes 1d, 3d and the period
    from them instead of raw increase() over days of samples; otherwise raw, and said."""
    windows = report_windows(period_seconds)
    recorded = _recorded_plan(slos, source, at, period_seconds, recorded_interval) if recorded_interval else None
    starts = recorded.starts if recorded else None
    use = recorded.usable if recorded else set()
    raw = {slo.name: {n: s for n, s in windows.items() if not (slo.name in use and n in LONG_WINDOWS)} for slo in slos}
    queries: dict[str, None] = {}
    for slo in slos:
        for seconds in raw[slo.name].values():
            queries.update(dict.fromkeys(slo.queries(f"{seconds}s").values()))
        if slo.name in use:
            for name in LONG_WINDOWS:
                queries.update(dict.fromkeys(recorded.queries(slo, windows[name]).values()))
    queries = list(queries)
    if progress:
        progress(f"querying {source.description}: {len(queries)} queries for {len(slos)} SLOs")
    answers = dict(zip(queries, source.query_many(queries, at)))
    results = []
    for slo in slos:
        counts = {n: window_counts(slo, s, answers) for n, s in raw[slo.name].items()}
        if slo.name in use:
            counts.update({n: recorded.counts(slo, windows[n], answers) for n in LONG_WINDOWS})
        result = _evaluate(slo, windows, counts, at, period_seconds)
        if recorded and slo.counts_increases:
            result.long_windows = "recorded" if slo.name in use else "raw"
            result.long_windows_why = recorded.why.get(slo.name, "")
        results.append(result)
    if coverage:
        _add_coverage(results, source, at, period_seconds, starts)
    if cross_check:
        from opsctl.slo.generator import check_sli, generator_reports

        for result in results:
            check_sli(result, generator_reports(result, windows))
    return results


LONG_WINDOWS = ("1d", "3d", PERIOD)


@dataclass
class _Recorded:
    """Which SLOs' long windows come from the recorded increases, and how to ask for them."""

    base: str
    per_base: int  # evaluations per base window: each event is counted this many times
    usable: set
    why: dict
    starts: dict  # coverage selector -> data start (or None)

    def queries(self, slo: SloDefinition, seconds: int) -> dict[str, str]:
        own = f'{{slo="{slo.name}"}}'
        return {role: f"sum_over_time({record}{own}[{seconds - 1}s])" for role, record in
                (("good", cv.record_good_increase(self.base)), ("valid", cv.record_valid_increase(self.base)))}

    def counts(self, slo: SloDefinition, seconds: int, answers: dict) -> budget.WindowCounts:
        q = self.queries(slo, seconds)
        good, valid = answers[q["good"]], answers[q["valid"]]
        return budget.WindowCounts(None if good is None else good / self.per_base,
                                   None if valid is None else valid / self.per_base)


def _recorded_plan(slos, source, at, period_seconds, interval) -> _Recorded | None:
    """Recorded long windows are used where the recorded valid increases span the SLO's data
    (its start within the period, to an hour): a rule loaded yesterday cannot answer for 28 days."""
    if not getattr(source, "speaks_promql", False):
        return None
    base, base_seconds = cv.base_window(interval)
    counted = [s for s in slos if s.counts_increases]
    selectors = list(dict.fromkeys(sel for s in counted if (sel := coverage_selector(s))))
    starts = dict(zip(selectors, source.data_start(selectors, at, period_seconds))) if selectors else {}
    probes = [f'count_over_time({cv.record_valid_increase(base)}{{slo="{s.name}"}}[{period_seconds - 1}s])'
              for s in counted]
    samples = dict(zip((s.name for s in counted), source.query_many(probes, at))) if probes else {}
    usable, why = set(), {}
    slack = max(5 * interval, period_seconds // 672)
    for s in counted:
        start = starts.get(coverage_selector(s))
        span = period_seconds if start is None else min(period_seconds, at - start)
        have = (samples.get(s.name) or 0) * interval
        if samples.get(s.name) is None:
            why[s.name] = f"no recorded {cv.record_valid_increase(base)} series: load `opsctl slo rules` into Prometheus"
        elif have + slack < span:
            why[s.name] = (f"the recorded {cv.record_valid_increase(base)} series span {have / 86400:.1f} of the"
                           f" {span / 86400:.1f} days of data")
        else:
            usable.add(s.name)
            why[s.name] = f"1d, 3d and the period from the recorded {cv.record_good_increase(base)} and" \
                          f" {cv.record_valid_increase(base)} series"
    return _Recorded(base, base_seconds // interval, usable, why, starts)


def coverage_selector(slo: SloDefinition) -> str | None:
    """The series whose data span bounds the SLO's: its valid (or good) selector, when plain."""
    text = slo.filter_valid or slo.filter_good
    if not slo.counts_events or text is None or "[window]" in text:
        return None
    return text


def _add_coverage(results: list[SloResult], source: MetricSource, at: float, period_seconds: int,
                  starts: dict | None = None) -> None:
    """`coverage=True`: say where the period's data starts when that is inside the period (a 28-day
    budget over 4 days of data is not a 28-day budget)."""
    selectors = {sel: None for r in results if (sel := coverage_selector(r.slo))}
    data_start = getattr(source, "data_start", None)
    if not selectors or data_start is None:
        return
    if starts is None:
        starts = dict(zip(selectors, data_start(list(selectors), at, period_seconds)))
    for r in results:
        start = starts.get(coverage_selector(r.slo))
        if start is not None and start > at - period_seconds + max(60, period_seconds // 672):
            r.data_since = start  # a shortfall finer than the subquery step is not reported


def _evaluate(slo, windows, counts, at, period_seconds) -> SloResult:
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
    return result
