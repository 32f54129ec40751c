"""The plan's A/B metrics read from the counters once, judged at the fixed horizon, as typed
results: `judge_arms` is the one A/B loop of `opsctl rollout ab` (`check_ab`: the CLI parses, calls
it and renders; its exit code is the worst verdict's) and of the rollout's ab-equivalence analysis
(rollout.analyses), both reading through `WithCounters`, so they agree on the same data."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from opsctl.model import Model, field
from opsctl.quality.abtest import AbVerdict
from opsctl.rollout.margins import Margin

if TYPE_CHECKING:
    from opsctl.rollout.plan import AbStage, RolloutPlan


class AbMetricResult(Model):
    """One metric's verdict, with how long today's traffic takes to reach its horizon."""

    metric: str
    window: str
    verdict: AbVerdict
    days: float | None  # None when today's trials a day are unknown
    daily_trials: int | None
    daily_basis: str | None  # plan | window | weekly profile (quality.abtest.daily_trials)
    ratios: tuple[float | None, float | None] = (None, None)  # successes / trials per arm (baseline, new)
    margin: Margin | None = None  # the margin judged against, and where it comes from (rollout.margins)

    def to_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "window": self.window, **self.verdict.to_dict(), "days": self.days,
                "daily_trials": self.daily_trials, "daily_basis": self.daily_basis,
                **(self.margin.to_dict() if self.margin else {})}


class AbCheck(Model):
    results: list[AbMetricResult] = field(default_factory=list)

    @property
    def verdicts(self) -> set[str]:
        return {r.verdict.verdict for r in self.results}

    @property
    def worst(self) -> str:
        """different when any metric is, else inconclusive when any is, else equivalent."""
        found = self.verdicts
        return "different" if "different" in found else "inconclusive" if "inconclusive" in found else "equivalent"

    def to_list(self) -> list[dict[str, Any]]:
        return [r.to_dict() for r in self.results]


def ab_stage(plan: RolloutPlan, plan_file: str) -> AbStage:
    """The plan's first A/B stage; UsageError when it has none with metrics."""
    from opsctl.errors import UsageError

    stages = [s.ab for s in plan.stages if s.ab is not None]  # kind "ab": the one body given
    if not stages or not stages[0].metrics:
        raise UsageError(f"{plan_file}: the plan has no A/B stage with metrics")
    return stages[0]


def check_ab(plan: RolloutPlan, stage: AbStage, source: Any, when: float, window: str | None) -> AbCheck:
    """`opsctl rollout ab`: `judge_arms` over `window` (default the stage's min_duration), refusing a
    metric without a baseline ratio (NoDataError: neither the plan's nor the baseline arm's)."""
    from opsctl.clock import format_duration, parse_duration
    from opsctl.errors import UsageError

    if window is not None:
        try:
            parse_duration(window)
        except ValueError as exc:
            raise UsageError(f"--window: {exc}") from exc
    return judge_arms(plan, stage, source, when, window or format_duration(stage.min_duration.seconds))


def judge_arms(plan: RolloutPlan, stage: AbStage, source: Any, when: float, span: str, *,
               assumed_baseline: float | None = None) -> AbCheck:
    """Each metric's `successes` and `trials` PromQL evaluated per arm (`$arm` = the plan's baseline
    and backend, `$window` = `span`, in seconds on the embedded store) at `when` through
    `WithCounters` (the grammar service's counters in the embedded store's gauges table are read
    too), judged by TOST against the sample size its margin needs (binomial variance): the one A/B
    loop of `rollout ab` and of the rollout's ab-equivalence analysis. A metric with no baseline
    ratio (the plan gives none and the baseline arm has no trials) takes `assumed_baseline`; None
    refuses it (NoDataError), as a baseline ratio of 0 or 1 read from the arm."""
    from opsctl.clock import parse_duration
    from opsctl.errors import NoDataError
    from opsctl.quality.abtest import daily_trials, read_arms, sample_size, verdict
    from opsctl.rollout.margins import ab_margin

    seconds = parse_duration(span)
    counters = WithCounters(source)
    spelled = counters.window(span, seconds)
    results = []
    for metric in stage.metrics:
        arms = read_arms(counters, metric.successes, metric.trials, (plan.baseline, plan.backend), spelled, when)
        (s_a, n_a), (s_b, n_b) = arms[plan.baseline], arms[plan.backend]
        base = metric.baseline if metric.baseline is not None else (s_a / n_a if n_a else assumed_baseline)
        if base is None or (assumed_baseline is None and not 0 < base < 1):
            raise NoDataError(f"A/B {metric.name}: no baseline ratio (give `baseline` in the plan)")
        # Today's trials a day (both arms), as the rollout's analysis reads them (quality.abtest.daily_trials):
        # the stage's `daily_trials`, else the window's own when it spans a day, else the weekly profile.
        per_day = daily_trials(n_a + n_b, seconds, when, declared=stage.daily_trials)
        share = stage.share / 100
        margin = ab_margin(metric)
        size = sample_size(base, margin.value, alpha=stage.alpha, power=stage.power,
                           daily_trials=per_day.trials if per_day else None, share=share if per_day else None)
        # unequal arms sized as unequal arms (calendar.smaller_arm), as the plan's horizon counts them
        from opsctl.rollout.calendar import horizon_days, smaller_arm

        needed = smaller_arm(size.per_arm, share)
        days = horizon_days(size.per_arm, share, per_day.trials) if per_day else None
        result = verdict(s_a, n_a, s_b, n_b, margin=margin.value, needed=needed, alpha=stage.alpha)
        results.append(AbMetricResult(metric.name, span, result,
                                      round(days, 2) if days is not None else None,
                                      per_day.trials if per_day else None,
                                      per_day.basis if per_day else None,
                                      (s_a / n_a if n_a else None, s_b / n_b if n_b else None), margin))
    return AbCheck(results)


class WithCounters:
    """A metric source whose `query_many` answers, where the source itself has no data, from the
    counters kept in the embedded store file's gauges table (the grammar service's A/B arms, which
    the proxy's fixed schema does not hold): sum(increase(SELECTOR[Ns])) over every label set of
    the counter the selector matches, reset-aware as Prometheus' increase (a drop is a restart)."""

    def __init__(self, source: Any) -> None:
        self.source = source

    def window(self, span: str, seconds: int) -> str:
        """`$window` as this source reads it: seconds on the embedded store (its only form), else as given."""
        return f"{seconds}s" if getattr(self.source, "path", None) is not None else span

    def query_many(self, exprs: list[str], at: float) -> list[float | None]:
        values = list(self.source.query_many(exprs, at))
        path = getattr(self.source, "path", None)
        if path is None or all(v is not None for v in values):
            return values
        from opsctl.metrics.gauges import GaugeStore
        from opsctl.metrics.promql import parse_range_query

        store = GaugeStore.open(Path(path))
        try:
            for i, expr in enumerate(exprs):
                if values[i] is not None:
                    continue
                query = parse_range_query(expr)
                rows = store.conn.execute(
                    "SELECT labels, value FROM gauges WHERE name = ? AND ts >= ? AND ts <= ? ORDER BY labels, ts",
                    (query.selector.metric, int(at) - query.window, int(at))).fetchall()
                total, matched = 0.0, False
                last: dict[str, float] = {}
                for labels, value in rows:
                    if not query.selector.label_matches(json.loads(labels)):
                        continue
                    matched = True
                    if labels in last:
                        total += value - last[labels] if value >= last[labels] else value
                    last[labels] = value
                if matched:
                    values[i] = total / query.window if query.function == "rate" else total
        finally:
            store.close()
        return values
