"""Which burn-rate alerts fire at an instant, evaluated in-process over any MetricSource.

The rules come from `opsctl.slo.rules.plan_rules`, so the windows, factors, minimum-traffic guard
and `for:` are the generated rules' own. Each condition is computed with the same float operations
on the same literals as the rule's PromQL (see opsctl.slo.rules). `for:` follows Prometheus: an
alert fires at instant t when its condition held at every rule evaluation from t - for to t, the
evaluations being `alerting.evaluation_interval` apart (ceil(for / interval) + 1 instants).

Only alerts whose condition holds at `at` are checked further back, so a quiet evaluation costs
one batch of queries. Drills call `firing_alerts` at simulated instants.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

from opsctl.clock import format_rfc3339
from opsctl.metrics.base import MetricSource
from opsctl.metrics.promql import increase_query
from opsctl.slo import conventions as cv
from opsctl.slo.model import SloDefinition
from opsctl.slo.rules import BurnAlert, RuleSettings, SloRulePlan, alert_labels, annotations, plan_rules


@dataclass(frozen=True)
class FiringAlert:
    alertname: str
    severity: str
    slo: str
    backend: str
    service: str
    long_window: str
    short_window: str
    factor: float
    burn_rate: float  # over the long window: the alert's value
    short_burn_rate: float
    request_rate: float  # valid events per second over the short window
    at: float
    labels: dict[str, str] = field(compare=False)
    annotations: dict[str, str] = field(compare=False)

    def to_dict(self) -> dict:
        return {
            "alertname": self.alertname,
            "severity": self.severity,
            "slo": self.slo,
            "backend": self.backend,
            "service": self.service,
            "long_window": self.long_window,
            "short_window": self.short_window,
            "factor": self.factor,
            "burn_rate": self.burn_rate,
            "short_burn_rate": self.short_burn_rate,
            "request_rate": self.request_rate,
            "at": format_rfc3339(self.at),
            "labels": dict(self.labels),
            "annotations": dict(self.annotations),
        }


@dataclass(frozen=True)
class AlertEvaluation:
    at: float
    firing: list[FiringAlert]
    unknown: dict[str, str]  # SLO name -> why it could not be evaluated (no data is never "quiet")

    def to_dict(self) -> dict:
        return {
            "at": format_rfc3339(self.at),
            "firing": [a.to_dict() for a in self.firing],
            "unknown": [{"slo": name, "reason": why} for name, why in self.unknown.items()],
        }


# ---------------------------------------------------------------------------------------------
# Mirrors of the rules' PromQL


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


def _check(plan: SloRulePlan, alert: BurnAlert, counts: dict[str, tuple[float | None, float | None]]) -> _Check:
    budget = 1 - plan.slo.goal  # `(1 - GOAL)` in the rule
    long_ratio, short_ratio = error_ratio(*counts[alert.long]), error_ratio(*counts[alert.short])
    valid_short = counts[alert.short][1]
    if long_ratio is None or short_ratio is None or valid_short is None:
        return _Check(False, None, None, None)
    burn_long, burn_short = long_ratio / budget, short_ratio / budget
    rate = valid_short / alert.short_seconds
    holds = burn_long > alert.factor and burn_short > alert.factor and rate >= alert.min_request_rate
    return _Check(holds, burn_long, burn_short, rate)


# ---------------------------------------------------------------------------------------------
# Evaluation


def _counts_at(
    source: MetricSource, at: float, needs: dict[str, tuple[SloRulePlan, set[str]]]
) -> dict[str, dict[str, tuple[float | None, float | None]]]:
    """(good, valid) increases per SLO and window at one instant, in one batch of queries."""
    wanted: dict[str, None] = {}
    for plan, windows in needs.values():
        for w in windows:
            seconds = dict(plan.windows)[w]
            wanted.setdefault(increase_query(plan.good, seconds))
            wanted.setdefault(increase_query(plan.valid, seconds))
    queries = list(wanted)
    answers = dict(zip(queries, source.query_many(queries, at)))
    out: dict[str, dict[str, tuple[float | None, float | None]]] = {}
    for name, (plan, windows) in needs.items():
        spans = dict(plan.windows)
        out[name] = {
            w: (answers[increase_query(plan.good, spans[w])], answers[increase_query(plan.valid, spans[w])])
            for w in windows
        }
    return out


def _windows(alerts: Sequence[BurnAlert]) -> set[str]:
    return {w for a in alerts for w in (a.long, a.short)}


def evaluate_plans(
    plans: Sequence[SloRulePlan], source: MetricSource, at: float, settings: RuleSettings
) -> AlertEvaluation:
    interval = settings.alerting.interval_seconds
    counts = _counts_at(source, at, {p.name: (p, _windows(p.alerts)) for p in plans})
    unknown: dict[str, str] = {}
    live: list[tuple[SloRulePlan, BurnAlert, _Check]] = []
    for plan in plans:
        missing = [w for w, _ in plan.windows if w in counts[plan.name] and counts[plan.name][w][1] is None]
        if missing:
            ordered = sorted(missing, key=lambda w: cv.WINDOWS.get(w, 0))
            unknown[plan.name] = f"filter_valid matched no series over {', '.join(ordered)}"
        for alert in plan.alerts:
            check = _check(plan, alert, counts[plan.name])
            if check.holds:
                live.append((plan, alert, check))
    # `for:` - step back one evaluation interval at a time while any candidate still needs it.
    steps = 1
    while True:
        needing = [(p, a, c) for p, a, c in live if math.ceil(a.for_seconds / interval) >= steps]
        if not needing:
            break
        when = at - steps * interval
        needs: dict[str, tuple[SloRulePlan, set[str]]] = {}
        for p, a, _ in needing:
            needs.setdefault(p.name, (p, set()))[1].update((a.long, a.short))
        past = _counts_at(source, when, needs)
        failed = {(p.name, a) for p, a, _ in needing if not _check(p, a, past[p.name]).holds}
        live = [(p, a, c) for p, a, c in live if (p.name, a) not in failed]
        steps += 1
    firing = [_firing(p, a, c, at, settings) for p, a, c in live]
    return AlertEvaluation(at, firing, unknown)


def _firing(plan: SloRulePlan, alert: BurnAlert, check: _Check, at: float, settings: RuleSettings) -> FiringAlert:
    labels = {"alertname": alert.alertname, **alert_labels(plan, alert, settings)}
    return FiringAlert(
        alertname=alert.alertname,
        severity=alert.severity,
        slo=plan.name,
        backend=plan.slo.backend,
        service=settings.service,
        long_window=alert.long,
        short_window=alert.short,
        factor=alert.factor,
        burn_rate=check.burn_long,
        short_burn_rate=check.burn_short,
        request_rate=check.request_rate,
        at=at,
        labels=labels,
        annotations=annotations(plan, alert, f"{check.burn_long:.2f}", settings.alerting.runbook_base_url),
    )


def evaluate_alerts(
    slos: Sequence[SloDefinition], source: MetricSource, at: float, settings: RuleSettings
) -> AlertEvaluation:
    """Firing alerts, and the SLOs that could not be evaluated for lack of data, at instant `at`."""
    return evaluate_plans(plan_rules(slos, settings), source, at, settings)


def firing_alerts(
    slos: Sequence[SloDefinition], source: MetricSource, at: float, settings: RuleSettings
) -> list[FiringAlert]:
    """The alerts Prometheus would have firing at `at` with the generated rules, on the same data."""
    return evaluate_alerts(slos, source, at, settings).firing
