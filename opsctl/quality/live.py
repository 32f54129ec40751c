"""The live quality rules evaluated in-process over any MetricSource (embedded store or Prometheus).

Same plan as the generated rules (`opsctl.quality.rules`), same float operations on the same
literals, and Prometheus' `for:`: an alert fires at t when its condition held at every evaluation
from t - for to t, `alerting.evaluation_interval` apart. A backend with no series over a window is
`unknown` (never quiet); one under the minimum-traffic guard is quiet, as in Prometheus.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

from opsctl.clock import format_rfc3339
from opsctl.metrics import schema
from opsctl.metrics.base import MetricSource
from opsctl.metrics.promql import increase_query
from opsctl.quality.rules import NUMERATOR, QualityAlert, QualityPlan, alert_annotations, alert_labels, sides


@dataclass(frozen=True)
class QualityFiring:
    alertname: str
    severity: str
    backend: str
    reference: str | None
    signal: str
    value: float  # the alert's value: tokens per request apart, or the relative change
    threshold: float
    at: float
    window: str
    labels: dict[str, str] = field(compare=False)
    annotations: dict[str, str] = field(compare=False)

    # What the drill engine and its reports read off any alert (a burn-rate alert's names).
    @property
    def slo(self) -> str:
        return f"quality-{self.signal}"

    @property
    def long_window(self) -> str:
        return self.window

    @property
    def short_window(self) -> str:
        return "quality"

    @property
    def burn_rate(self) -> float:
        return self.value

    @property
    def factor(self) -> float:
        return self.threshold

    def describe(self) -> str:
        return f"{self.alertname} on {self.backend}: {self.value:.2f} > {self.threshold:g} ({self.signal})"

    def to_dict(self) -> dict:
        return {"alertname": self.alertname, "severity": self.severity, "backend": self.backend,
                "reference": self.reference, "signal": self.signal, "value": self.value,
                "threshold": self.threshold, "at": format_rfc3339(self.at), "labels": dict(self.labels),
                "annotations": dict(self.annotations)}


@dataclass(frozen=True)
class QualityEvaluation:
    at: float
    firing: list[QualityFiring]
    unknown: dict[str, str]  # backend -> why
    # rules that cannot fire now for too little traffic: (alertname, backend, signal, why)
    suppressed: list[tuple[str, str, str, str]] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"at": format_rfc3339(self.at), "firing": [a.to_dict() for a in self.firing],
                "unknown": [{"backend": b, "reason": why} for b, why in self.unknown.items()],
                "suppressed": [{"alertname": n, "backend": b, "signal": s, "reason": why}
                               for n, b, s, why in self.suppressed]}


def _division(a: float, b: float) -> float:
    """a / b as Prometheus computes it (IEEE 754: x/0 is ±Inf, 0/0 NaN)."""
    if b == 0:
        return math.nan if a == 0 else math.copysign(math.inf, a)
    return a / b


@dataclass(frozen=True)
class _Figures:
    """One backend's counts over the window at one instant, or None where no series matched."""

    requests: float | None
    answers: float | None
    numerators: dict[str, float | None]

    def per(self, signal: str) -> float | None:
        top = self.numerators[signal]
        bottom = self.requests if signal == "prompt_tokens" else self.answers
        if top is None or bottom is None:
            return None
        return _division(top, bottom)


def _queries(backend: str, window: int, scope: tuple[tuple[str, str], ...] = ()) -> dict[str, str]:
    """`scope`: the service's matchers (QualityPlan.scope), first in every selector."""
    own = "".join(f'{k}="{v}",' for k, v in scope)
    sel = f'{{{own}backend="{backend}"}}'
    out = {"requests": increase_query(f"{schema.REQUESTS}{sel}", window),
           "answers": increase_query(f'{schema.REQUESTS}{{{own}backend="{backend}",outcome="ok"}}', window)}
    for signal, metric in NUMERATOR.items():
        out[signal] = increase_query(f"{metric}{sel}", window)
    return out


class QualityEvaluator:
    """Evaluates a quality plan at instants, remembering the figures it fetched (the past of an
    embedded drill store never changes; use a fresh evaluator where late samples may arrive)."""

    def __init__(self, plan: QualityPlan, source: MetricSource):
        self.plan = plan
        self.source = source
        self._figures: dict[float, dict[str, _Figures]] = {}

    def _at(self, when: float) -> dict[str, _Figures]:
        when = float(when)
        if when not in self._figures:
            backends = sorted({a.backend for a in self.plan.alerts} | {a.reference for a in self.plan.alerts if a.reference})
            wanted = {b: _queries(b, self.plan.window_seconds, self.plan.scope) for b in backends}
            flat = [q for qs in wanted.values() for q in qs.values()]
            answers = dict(zip(flat, self.source.query_many(flat, when)))
            self._figures[when] = {
                b: _Figures(answers[qs["requests"]], answers[qs["answers"]], {s: answers[qs[s]] for s in NUMERATOR})
                for b, qs in wanted.items()
            }
        return self._figures[when]

    def _rate(self, figures: _Figures) -> float | None:
        return None if figures.requests is None else figures.requests / self.plan.window_seconds

    def _noise_ok(self, alert: QualityAlert, rates: tuple[float | None, float | None]) -> bool:
        """The rule's noise guard with its float operations: 1/(r1 w) + 1/(r2 w) <= limit."""
        r1, r2 = rates
        if r1 is None or r2 is None:
            return False
        w = self.plan.window_seconds
        total = _division(1, r1 * w) + _division(1, r2 * w)
        return total <= alert.noise_limit

    def suppression(self, alert: QualityAlert, when: float) -> str | None:
        """Why the rule cannot fire at `when` although both sides have data (None: it can)."""
        r1, r2 = self._side_rates(alert, when)
        if r1 is None or r2 is None:
            return None  # no data: unknown, not suppressed
        rates = (r1, r2)
        w, plan = self.plan.window_seconds, self.plan
        counts = [r * w for r in rates]
        (a, base_a), (b, base_b) = sides(alert)
        names = [f"{a}{' ' + plan.offset + ' earlier' if base_a else ''}", f"{b}{' ' + plan.offset + ' earlier' if base_b else ''}"]
        if not self._noise_ok(alert, rates):
            return (f"sampling noise: {alert.sigmas:g} sigma of {alert.spread:g} per request against a threshold of"
                    f" {alert.threshold:g} needs 1/n1 + 1/n2 <= {alert.noise_limit:.3g} requests over {plan.window}"
                    f" (about {alert.needs_per_side():,.0f} on each side at an even split); has"
                    f" {counts[0]:,.0f} ({names[0]}) and {counts[1]:,.0f} ({names[1]})")
        if plan.min_request_rate and any(r < plan.min_request_rate for r in rates):
            return (f"under min_request_rate {plan.min_request_rate:g} requests/s: {rates[0]:.4g} ({names[0]}) and"
                    f" {rates[1]:.4g} ({names[1]})")
        return None

    def _side_rates(self, alert: QualityAlert, when: float) -> tuple[float | None, float | None]:
        (a, base_a), (b, base_b) = sides(alert)
        return (self._rate(self._at(when - self.plan.offset_seconds if base_a else when)[a]),
                self._rate(self._at(when - self.plan.offset_seconds if base_b else when)[b]))

    def condition(self, alert: QualityAlert, when: float) -> tuple[bool, float | None]:
        """(holds, value) of one alert's expression at one instant."""
        now = self._at(when)
        guard = self.plan.min_request_rate
        mine = now[alert.backend]
        if alert.signal == "prompt_tokens":
            other = now[alert.compared_with]
            a, b = mine.per("prompt_tokens"), other.per("prompt_tokens")
            if a is None or b is None:
                return False, None
            value = abs(a - b)
            rates = (self._rate(mine), self._rate(other))
        else:
            then = self._at(when - self.plan.offset_seconds)[alert.backend]
            a, b = mine.per(alert.signal), then.per(alert.signal)
            if a is None or b is None:
                return False, None
            value = abs(_division(a, b) - 1) if alert.signal == "completion_tokens" else 1 - _division(a, b)
            rates = (self._rate(mine), self._rate(then))
        holds = (value > alert.threshold and self._noise_ok(alert, rates)
                 and all(r is not None and r >= guard for r in rates))
        return holds, value

    def evaluate(self, at: float) -> QualityEvaluation:
        at = float(at)
        now = self._at(at)
        unknown = {b: f"no {schema.REQUESTS} series over the last {self.plan.window}"
                   for b, f in now.items() if f.requests is None}
        firing = []
        suppressed = [(a.alertname, a.backend, a.signal, why) for a in self.plan.alerts
                      if (why := self.suppression(a, at))]
        for alert in self.plan.alerts:
            holds, value = self.condition(alert, at)
            if not holds or value is None:  # a condition that holds has its value
                continue
            steps = math.ceil(alert.for_seconds / self.plan.interval_seconds)
            if all(self.condition(alert, at - k * self.plan.interval_seconds)[0] for k in range(1, steps + 1)):
                firing.append(_firing(self.plan, alert, value, at))
        return QualityEvaluation(at, firing, unknown, suppressed)


def _firing(plan: QualityPlan, alert: QualityAlert, value: float, at: float) -> QualityFiring:
    return QualityFiring(
        alertname=alert.alertname, severity=alert.severity, backend=alert.backend, reference=alert.reference,
        signal=alert.signal, value=value, threshold=alert.threshold, at=at, window=plan.window,
        labels={"alertname": alert.alertname, **alert_labels(plan, alert)},
        annotations=alert_annotations(plan, alert, value),
    )


def evaluate_quality(plan: QualityPlan, source: MetricSource, at: float) -> QualityEvaluation:
    return QualityEvaluator(plan, source).evaluate(at)


def first_firing(plan: QualityPlan, source: MetricSource, instants: Sequence[float]) -> dict[str, float]:
    """alertname/backend -> the first of `instants` at which it fires (a replay, e.g. in tests)."""
    evaluator = QualityEvaluator(plan, source)
    first: dict[str, float] = {}
    for t in instants:
        for a in evaluator.evaluate(t).firing:
            first.setdefault(f"{a.alertname}/{a.backend}", t)
    return first
