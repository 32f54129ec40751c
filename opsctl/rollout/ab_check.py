"""`opsctl rollout ab`: the plan's A/B metrics read from the counters once, judged at the fixed
horizon, as typed results (the CLI parses, calls `check_ab` and renders; its exit code is the worst
verdict's)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from opsctl.model import Model, field
from opsctl.quality.abtest import AbVerdict

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

    def to_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "window": self.window, **self.verdict.to_dict(), "days": self.days,
                "daily_trials": self.daily_trials, "daily_basis": self.daily_basis}


class AbCheck(Model):
    results: list[AbMetricResult] = field(default_factory=list)

    @property
    def verdicts(self) -> set[str]:
        return {r.verdict.verdict for r in self.results}

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
    """Each metric's `successes` and `trials` PromQL evaluated per arm (`$arm` = the plan's baseline
    and backend, `$window` = `window`, default the stage's min_duration) at `when`, judged by TOST
    against the sample size its margin needs (binomial variance). NoDataError when an arm has no data
    or the metric no baseline ratio (neither the plan's nor the baseline arm's)."""
    from opsctl.clock import format_duration, parse_duration
    from opsctl.errors import NoDataError
    from opsctl.quality.abtest import daily_trials, read_arms, sample_size, verdict

    span = window or format_duration(stage.min_duration.seconds)
    results = []
    for metric in stage.metrics:
        arms = read_arms(source, metric.successes, metric.trials, (plan.baseline, plan.backend), span, when)
        (s_a, n_a), (s_b, n_b) = arms[plan.baseline], arms[plan.backend]
        base = metric.baseline if metric.baseline is not None else (s_a / n_a if n_a else None)
        if base is None or not 0 < base < 1:
            raise NoDataError(f"A/B {metric.name}: no baseline ratio (give `baseline` in the plan)")
        # Today's trials a day (both arms), as the rollout's analysis reads them (quality.abtest.daily_trials):
        # the stage's `daily_trials`, else the window's own when it spans a day, else the weekly profile.
        per_day = daily_trials(n_a + n_b, parse_duration(span), when, declared=stage.daily_trials)
        share = stage.share / 100
        size = sample_size(base, metric.margin, alpha=stage.alpha, power=stage.power,
                           daily_trials=per_day.trials if per_day else None, share=share if per_day else None)
        result = verdict(s_a, n_a, s_b, n_b, margin=metric.margin, needed=size.per_arm, alpha=stage.alpha)
        results.append(AbMetricResult(metric.name, span, result,
                                      round(size.days, 2) if size.days is not None else None,
                                      per_day.trials if per_day else None,
                                      per_day.basis if per_day else None))
    return AbCheck(results)
