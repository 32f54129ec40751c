"""Live quality rules over the proxy's own counters: a pure plan from the config, and its PromQL.

A vendor release that stops prepending the beginning-of-text token fails nothing: the model answers,
slightly differently. The proxy's counters show it at once if someone looks:

  prompt tokens per request   the same prompts cost one token fewer on that backend than on the
                              reference backend over the same window (a constant shift: a tokenizer
                              or BOS change);
  completion tokens per answer, suggestions per answer
                              drift from the backend's own figure `baseline_offset` earlier.

Each rule has a minimum-traffic guard (requests/s over the window on every side compared), a
threshold, a severity and a `for:` from `quality.rules`, and links the quality-regression runbook.
`quality_group` renders the plan as one Prometheus rule group (recording rules first, then the
alerts reading them, so the alerts see the figures recorded at the same instant);
`opsctl.quality.live` evaluates the same plan in-process with the same float operations:

    per request  = sum(increase(TOKENS[w])) / sum(increase(REQUESTS[w]))         per backend
    shift        = abs(per_request(b) - per_request(reference))   > threshold
    drift        = abs(per_answer(b) / per_answer(b) offset - 1)  > threshold   (completion tokens)
    drop         = 1 - per_answer(b) / per_answer(b) offset       > threshold   (suggestions)
    noise        = 1 / (rate(side 1) * w_seconds) + 1 / (rate(side 2) * w_seconds) <= NOISE_LIMIT
    guard        = sum(increase(REQUESTS[w])) / w_seconds >= min_request_rate, on every side (if > 0)

The noise guard is the minimum traffic, from sampling noise: the compared figure of n requests
varies by spread / sqrt(n), so the two sides' difference by spread x sqrt(1/n1 + 1/n2); the alert
may fire only where its threshold clears `noise_sigmas` of that, i.e. 1/n1 + 1/n2 <= NOISE_LIMIT =
(threshold / (noise_sigmas x spread))^2. Below it the rule is suppressed, and `quality alerts` and
`slo alerts` say so with the numbers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from opsctl.clock import format_duration
from opsctl.metrics import schema
from opsctl.slo.conventions import window_label

if TYPE_CHECKING:
    from opsctl.config import Config

SIGNALS = ("prompt_tokens", "completion_tokens", "suggestions")
ALERT_NAMES = {
    "prompt_tokens": "QualityPromptTokensShift",
    "completion_tokens": "QualityCompletionTokensDrift",
    "suggestions": "QualitySuggestionsDrop",
}
CATEGORY = "quality"  # the `category` label of every quality alert: not availability, not latency
RUNBOOK = "scenario-quality-regression.md"
GROUP_SUFFIX = "quality"

# Labels set on every quality alert.
LABEL_SIGNAL = "signal"
LABEL_REFERENCE = "reference"
LABEL_CATEGORY = "category"


@dataclass(frozen=True)
class QualityAlert:
    """One alert rule: a signal on one backend (against a reference backend, or its own baseline)."""

    signal: str
    backend: str
    reference: str | None  # the other backend (prompt tokens); None: the backend's own baseline
    threshold: float
    severity: str
    for_seconds: int
    spread: float = 1.0  # one request's spread of the compared figure (QualitySignal.spread)
    sigmas: float = 5.0

    @property
    def alertname(self) -> str:
        return ALERT_NAMES[self.signal]

    @property
    def noise_limit(self) -> float:
        """The largest 1/n1 + 1/n2 (requests over the window on each side) at which the threshold
        still clears `sigmas` standard deviations of sampling noise."""
        return float(f"{(self.threshold / (self.sigmas * self.spread)) ** 2:.10g}")

    def needs_per_side(self) -> float:
        """Requests over the window on each side when both sides carry the same."""
        return 2 / self.noise_limit

    @property
    def compared_with(self) -> str:
        """The reference backend a prompt_tokens alert compares with (`quality_plan` always names one)."""
        if self.reference is None:
            raise ValueError(f"{self.alertname} on {self.backend}: a {self.signal} alert names no reference backend")
        return self.reference


@dataclass(frozen=True)
class QualityPlan:
    service: str
    window: str
    window_seconds: int
    offset: str
    offset_seconds: int
    min_request_rate: float
    interval_seconds: int
    group_name: str
    runbook_url: str
    labels: tuple[tuple[str, str], ...]  # alerting.labels
    alerts: tuple[QualityAlert, ...]
    # The service's labels (Config.service_labels): every selector matches them, every recorded
    # series keeps them, so services sharing one Prometheus never mix.
    scope: tuple[tuple[str, str], ...] = ()


def reference_backend(cfg: "Config") -> str:
    """The backend whose prompt tokens are the yardstick: configured, else the internal one (ours)."""
    if cfg.quality.rules.reference:
        return cfg.quality.rules.reference
    internal = [name for name, b in cfg.backends.items() if b.kind == "internal"]
    return (internal or list(cfg.backends))[0]


def plan_quality(cfg: "Config") -> QualityPlan | None:
    """The quality rules the config asks for; None when `quality.rules.enabled` is false."""
    rules = cfg.quality.rules
    if not rules.enabled:
        return None
    from opsctl.config.quality import QUALITY_SPREADS

    reference = reference_backend(cfg)
    sigmas = float(rules.noise_sigmas)

    def spread(signal: str) -> float:
        own = getattr(rules, signal).spread
        return float(own if own is not None else QUALITY_SPREADS[signal])

    alerts = []
    for backend in cfg.backends:
        if backend != reference:
            s = rules.prompt_tokens
            alerts.append(QualityAlert("prompt_tokens", backend, reference, float(s.threshold), s.severity, s.for_seconds,
                                       spread("prompt_tokens"), sigmas))
    for signal in ("completion_tokens", "suggestions"):
        s = getattr(rules, signal)
        for backend in cfg.backends:
            alerts.append(QualityAlert(signal, backend, None, float(s.threshold), s.severity, s.for_seconds,
                                       spread(signal), sigmas))
    base = cfg.alerting.runbook_base_url.rstrip("/")
    return QualityPlan(
        service=cfg.service,
        window=window_label(rules.window_seconds),
        window_seconds=rules.window_seconds,
        offset=window_label(rules.baseline_seconds),
        offset_seconds=rules.baseline_seconds,
        min_request_rate=float(rules.min_request_rate),
        interval_seconds=cfg.alerting.interval_seconds,
        group_name=f"opsctl-{GROUP_SUFFIX}" + (f"-{cfg.service}" if cfg.catalog else ""),
        runbook_url=f"{base}/{RUNBOOK}",
        labels=tuple(cfg.alerting.labels.items()),
        alerts=tuple(alerts),
        scope=tuple(cfg.service_labels.items()),
    )


def scoped(plan: QualityPlan, selector: str, **matchers: str) -> str:
    """`selector` with the plan's service matchers first and `matchers` added (label="value")."""
    from opsctl.metrics.promql import Matcher, format_selector, parse_selector

    parsed = parse_selector(selector)
    extra = tuple(Matcher(k, "=", v) for k, v in (*plan.scope, *matchers.items()))
    return format_selector(type(parsed)(parsed.metric, extra + parsed.matchers))


def _by(plan: QualityPlan) -> str:
    return ", ".join([k for k, _ in plan.scope] + ["backend"])


# ---------------------------------------------------------------------------------------------
# Names of the recording rules (Prometheus' level:metric:operation form)


def record_request_rate(plan: QualityPlan, baseline: bool = False) -> str:
    return f"backend:llm_proxy_requests:rate{plan.window}" + (f"_offset{plan.offset}" if baseline else "")


def record_per_request(plan: QualityPlan, signal: str, baseline: bool = False) -> str:
    what = {"prompt_tokens": "prompt_tokens_per_request", "completion_tokens": "completion_tokens_per_answer",
            "suggestions": "suggestions_per_answer"}[signal]
    return f"backend:llm_proxy_{what}:ratio_rate{plan.window}" + (f"_offset{plan.offset}" if baseline else "")


# Counter and denominator per signal: prompt tokens are sent with every request, completion tokens
# and suggestions come back with answered (ok) ones.
NUMERATOR = {"prompt_tokens": schema.PROMPT_TOKENS, "completion_tokens": schema.COMPLETION_TOKENS,
             "suggestions": schema.SUGGESTIONS}
DENOMINATOR = {"prompt_tokens": schema.REQUESTS, "completion_tokens": f'{schema.REQUESTS}{{outcome="ok"}}',
               "suggestions": f'{schema.REQUESTS}{{outcome="ok"}}'}


def number(value: float) -> str:
    return repr(float(value))


def _increase(plan: QualityPlan, selector: str, baseline: bool) -> str:
    offset = f" offset {plan.offset}" if baseline else ""
    return f"sum by ({_by(plan)}) (increase({scoped(plan, selector)}[{plan.window}]{offset}))"


def recording_rules(plan: QualityPlan) -> list[dict]:
    rules = []
    for baseline in (False, True):
        rules.append({"record": record_request_rate(plan, baseline),
                      "expr": f"{_increase(plan, schema.REQUESTS, baseline)} / {plan.window_seconds}"})
    for signal in SIGNALS:
        for baseline in ((False,) if signal == "prompt_tokens" else (False, True)):
            rules.append({
                "record": record_per_request(plan, signal, baseline),
                "expr": f"{_increase(plan, NUMERATOR[signal], baseline)} / {_increase(plan, DENOMINATOR[signal], baseline)}",
            })
    return rules


def _sel(record: str, backend: str, plan: QualityPlan | None = None) -> str:
    if plan is not None and plan.scope:
        return scoped(plan, record, backend=backend)
    return f'{record}{{backend="{backend}"}}'


def _guard(plan: QualityPlan, backend: str, baseline: bool = False) -> str:
    if not plan.min_request_rate:
        return ""
    return f"\nand on() ({_sel(record_request_rate(plan, baseline), backend, plan)} >= {number(plan.min_request_rate)})"


def sides(alert: QualityAlert) -> tuple[tuple[str, bool], tuple[str, bool]]:
    """The two sides an alert compares: (backend, baseline) each."""
    if alert.signal == "prompt_tokens":
        return (alert.backend, False), (alert.compared_with, False)
    return (alert.backend, False), (alert.backend, True)


def _noise_guard(plan: QualityPlan, alert: QualityAlert) -> str:
    w = plan.window_seconds
    (a, base_a), (b, base_b) = sides(alert)
    one = f"(1 / ({_sel(record_request_rate(plan, base_a), a, plan)} * {w}))"
    two = f"(1 / ({_sel(record_request_rate(plan, base_b), b, plan)} * {w}))"
    return f"\nand on() ({one} + ignoring(backend) {two} <= {number(alert.noise_limit)})"


def alert_expr(plan: QualityPlan, alert: QualityAlert) -> str:
    b, thr = alert.backend, number(alert.threshold)
    (_, _), (other, baseline) = sides(alert)
    guards = f"{_noise_guard(plan, alert)}{_guard(plan, b)}{_guard(plan, other, baseline)}"
    if alert.signal == "prompt_tokens":
        rec = record_per_request(plan, "prompt_tokens")
        return (f"abs(\n  {_sel(rec, b, plan)}\n  - ignoring(backend)\n  {_sel(rec, alert.compared_with, plan)}\n) > {thr}"
                + guards)
    now, then = _sel(record_per_request(plan, alert.signal), b, plan), _sel(record_per_request(plan, alert.signal, True), b, plan)
    if alert.signal == "completion_tokens":
        change = f"abs({now} / {then} - 1) > {thr}"
    else:
        change = f"(1 - {now} / {then}) > {thr}"
    return change + guards


GO_VALUE = '{{ printf "%.2f" $value }}'


def alert_labels(plan: QualityPlan, alert: QualityAlert) -> dict[str, str]:
    labels = {**dict(plan.labels), "severity": alert.severity, "backend": alert.backend, "service": plan.service,
              LABEL_CATEGORY: CATEGORY, LABEL_SIGNAL: alert.signal}
    if alert.reference:
        labels[LABEL_REFERENCE] = alert.reference
    return labels


def alert_annotations(plan: QualityPlan, alert: QualityAlert, value: float | None = None) -> dict[str, str]:
    """Go templates for the rule (value None), or their rendering for a value (in-process)."""
    shown = GO_VALUE if value is None else f"{value:.2f}"
    pct = f"{alert.threshold:.0%}"
    if alert.signal == "prompt_tokens":
        summary = (f"Quality: {alert.backend} prompt tokens per request differ from {alert.reference} by {shown}"
                   f" over {plan.window} (a tokenizer or beginning-of-text change)")
        description = (
            f"The same prompts cost a different number of tokens on {alert.backend} than on {alert.reference}"
            f" (more than {alert.threshold:g} per request over {plan.window}, with enough requests on each side for"
            f" {alert.sigmas:g} sigma of sampling noise at {alert.spread:g} tokens per request)."
            f" Every request may still succeed: this is a model"
            f" quality regression, not an availability problem. Confirm with `opsctl probe consistency`.")
    elif alert.signal == "completion_tokens":
        summary = (f"Quality: {alert.backend} completion tokens per answer changed by {shown} (relative) against"
                   f" {plan.offset} earlier (threshold {pct})")
        description = (f"Answers on {alert.backend} are longer or shorter than the same window {plan.offset} earlier"
                       f" (relative change above {pct} over {plan.window}): the model answers differently.")
    else:
        summary = (f"Quality: {alert.backend} suggestions per answer dropped by {shown} (relative) against"
                   f" {plan.offset} earlier (threshold {pct})")
        description = (f"Answers on {alert.backend} hold fewer suggestions than the same window {plan.offset}"
                       f" earlier (drop above {pct} over {plan.window}), while requests succeed: a quality"
                       f" regression, not an availability problem.")
    return {"summary": summary, "description": description, "value": shown, "cause": "quality",
            "runbook_url": plan.runbook_url}


def quality_group(plan: QualityPlan) -> dict:
    """The plan as one Prometheus rule group (plain data)."""
    rules = recording_rules(plan)
    for alert in plan.alerts:
        rule: dict[str, object] = {"alert": alert.alertname, "expr": alert_expr(plan, alert)}
        if alert.for_seconds:
            rule["for"] = format_duration(alert.for_seconds)
        rule["labels"] = alert_labels(plan, alert)
        rule["annotations"] = alert_annotations(plan, alert)
        rules.append(rule)
    return {"name": plan.group_name, "interval": format_duration(plan.interval_seconds), "rules": rules}


def add_quality_group(document: dict, cfg: "Config") -> dict:
    """Append the quality group to a rules document of either format (`opsctl slo rules`)."""
    plan = plan_quality(cfg)
    if plan is not None:
        groups = document["groups"] if "groups" in document else document["spec"]["groups"]
        groups.append(quality_group(plan))
    return document
