"""The in-process mirror of the rules' PromQL (rule_exprs.py writes it): the error ratio, one
alert's check on the counts of its windows, the counts at an instant (from the recorded base
windows or raw queries, `_counts_at`), and the grouped and recorded sources they are read from;
alerts.py walks the evaluations with them."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from opsctl.metrics.base import MetricSource
from opsctl.slo.model import counts_from
from opsctl.slo.recorded import GroupedSource, Recorded
from opsctl.slo.rule_plan import BurnAlert, SloRulePlan


def error_ratio(good: float | None, valid: float | None) -> float | None:
    """1 - ((sum(increase(GOOD[w])) or vector(0)) / sum(increase(VALID[w]))); None when VALID has no series."""
    if valid is None:
        return None
    good = 0.0 if good is None else good
    if valid == 0:
        return math.nan if good == 0 else -math.inf  # 0/0 and x/0 as Prometheus computes them
    return 1.0 - good / valid


@dataclass(frozen=True)
class _Check:
    holds: bool
    burn_long: float | None
    burn_short: float | None
    request_rate: float | None
    valid_short: float | None = None


def _check(plan: SloRulePlan, alert: BurnAlert, counts: dict[str, tuple[float | None, float | None]]) -> _Check:
    budget = 1 - plan.slo.goal  # `(1 - GOAL)` in the rule
    long_ratio, short_ratio = error_ratio(*counts[alert.long]), error_ratio(*counts[alert.short])
    valid_short = counts[alert.short][1]
    if long_ratio is None or short_ratio is None or valid_short is None:
        return _Check(False, None, None, None, valid_short)
    burn_long, burn_short = long_ratio / budget, short_ratio / budget
    counted = plan.slo.counts_increases  # otherwise the rule has no traffic clause
    rate = valid_short / alert.short_seconds if counted else None
    holds = burn_long > alert.factor and burn_short > alert.factor and (rate is None or enough_traffic(alert, short_ratio, rate))
    return _Check(holds, burn_long, burn_short, rate, valid_short)


def enough_traffic(alert: BurnAlert, short_ratio: float, rate: float) -> bool:
    """The rule's traffic clause: `rate >= MIN_RATE or ratio * rate * SHORT >= MIN_BAD` (the same
    float operations in the same order as Prometheus on the recorded ratio and rate)."""
    if rate >= alert.min_request_rate:
        return True
    return alert.min_bad_events > 0 and short_ratio * rate * alert.short_seconds >= alert.min_bad_events


# ---------------------------------------------------------------------------------------------
# Evaluation


def _counts_at(
    source: MetricSource, at: float, needs: dict[str, tuple[SloRulePlan, set[str]]],
    recorded: Recorded | _ByBase | None = None
) -> dict[str, dict[str, tuple[float | None, float | None]]]:
    """(good, valid) per SLO and window at one instant, in one batch of queries per instant.

    A window the rules derive from the recorded base-window increases (1d, 3d) is read from those
    series when `recorded` says they span it: the sums of the recorded good and valid increases,
    whose ratio is the rule's. Otherwise it is mirrored from raw queries by the identity the rules
    rest on: the sum of the base-window increases recorded every interval over the window equals
    the sum of the window's raw counts at the last base / interval evaluation instants (t,
    t - interval, ...), so it is asked at each of those instants and summed."""
    use = recorded.usable if recorded else set()
    by_instant: dict[float, dict[str, None]] = {}
    plan_queries: dict[tuple[str, str], list[tuple[float, dict[str, str]]]] = {}
    for name, (plan, windows) in needs.items():
        spans = dict(plan.windows)
        for w in windows:
            if recorded is not None and w in plan.derived and name in use:
                asked = [(at, recorded.queries(name, spans[w]))]
            else:
                instants = [at]
                if w in plan.derived:
                    instants = [at - j * plan.interval for j in range(plan.recorded_base[1] // plan.interval)]
                asked = [(when, plan.queries(f"{spans[w]}s")) for when in instants]
            plan_queries[(name, w)] = asked
            for when, queries in asked:
                for query in queries.values():
                    by_instant.setdefault(when, {}).setdefault(query)
    answers: dict[tuple[float, str], float | None] = {}
    for when, wanted in by_instant.items():
        batch = list(wanted)
        answers.update({(when, q): v for q, v in zip(batch, source.query_many(batch, when))})
    out: dict[str, dict[str, tuple[float | None, float | None]]] = {}
    for name, (plan, windows) in needs.items():
        out[name] = {}
        for w in windows:
            good, valid = 0.0, None  # an instant without data adds nothing, as an absent sample
            for when, queries in plan_queries[(name, w)]:
                by_role = {role: answers[(when, q)] for role, q in queries.items()}
                if w in plan.derived and name in use:
                    g, v = by_role["good"], by_role["valid"]  # the recorded sums, as the rule divides them
                else:
                    g, v = counts_from(plan.slo, by_role)
                if v is not None:
                    good, valid = good + (g or 0.0), (valid or 0.0) + v
            out[name][w] = (good if valid is not None else None, valid)
    return out


def _windows(alerts: Sequence[BurnAlert]) -> set[str]:
    return {w for a in alerts for w in (a.long, a.short)}


class _GroupSource:
    """One group's series of a source's grouped answers (an SLO with a grouping). Not PromQL to
    the evaluator: its long windows are read raw, by the rules' identity (no recorded selector
    names one group)."""

    speaks_promql = False

    def __init__(self, source: GroupedSource, grouping: tuple[str, ...], key: tuple[str, ...],
                 shared: dict[tuple[float, tuple[str, ...]], list[dict[tuple[str, ...], float | None]]]):
        self.source, self.grouping, self.key = source, grouping, key
        self.description = source.description
        self._shared = shared  # (at, queries) -> grouped answers, one ask for every group of an SLO

    def query_many(self, exprs: Sequence[str], at: float) -> list[float | None]:
        asked = (at, tuple(exprs))
        if asked not in self._shared:
            self._shared[asked] = self.source.query_grouped(list(exprs), at, self.grouping)
        return [answer.get(self.key) for answer in self._shared[asked]]

    # The rest of MetricSource, the source's own.
    def check(self) -> None:
        self.source.check()

    def default_time(self, now: float | None = None) -> float:
        return self.source.default_time(now)

    def data_start(self, selectors: Sequence[str], at: float, span: int) -> list[float | None]:
        return self.source.data_start(selectors, at, span)

    def newest_sample(self, at: float) -> float | None:
        return self.source.newest_sample(at)


class _ByBase:
    """The recorded plans of SLOs with different base windows (periods), read as one `Recorded`."""

    def __init__(self, parts: dict[str, Recorded], base_of: dict[str, str]):
        self.parts, self.base_of = parts, base_of
        self.usable = set().union(*(r.usable for r in parts.values()))
        self.why = {k: v for r in parts.values() for k, v in r.why.items()}

    def queries(self, slo_name: str, seconds: int) -> dict[str, str]:
        return self.parts[self.base_of[slo_name]].queries(slo_name, seconds)


@dataclass
class _Walk:
    """One alert's walk back from an instant (AlertEvaluator._kept_firing), in evaluations."""

    plan: SloRulePlan
    index: int
    step: int  # its group's evaluation interval
    keep: int  # ceil(keep_firing_for / step)
    hold: int  # ceil(for / step) + 1 holding evaluations fire it
    bound: int  # the last step back it looks at
    failing: int = 0
    holding: int = 0
    last: float | None = None  # the latest evaluation its condition held at

    @classmethod
    def of(cls, plan: SloRulePlan, index: int, step: int) -> "_Walk":
        alert = plan.alerts[index]
        keep, hold = math.ceil(alert.keep_firing_seconds / step), math.ceil(alert.for_seconds / step) + 1
        return cls(plan, index, step, keep, hold, math.ceil(alert.long_seconds / step) + keep + hold)
