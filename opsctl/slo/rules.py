"""SLOs -> Prometheus recording and alerting rules: a pure plan and generator, and a separate writer.

`plan_rules` turns SLOs and settings into typed `SloRulePlan`s: the selectors, windows, factors,
thresholds, `for:` and minimum-traffic guard of every alert. `rule_groups` renders a plan as
Prometheus rule groups (plain data); `opsctl.slo.alerts` evaluates the same plan in-process.
Both sides compute with the same float operations on the same literals, so on data sampled every
10 s on a grid aligned with the evaluation instants they fire the same alerts at the same instants:

    error ratio  = 1 - ((sum(increase(GOOD[w])) or vector(0)) / sum(increase(VALID[w])))
    burn rate    = error ratio / (1 - GOAL)                     (the alert's value)
    guard        = sum(increase(VALID[short])) / short_seconds  >= min_request_rate
    alert        = burn(long) > FACTOR and burn(short) > FACTOR and guard, held for `for:`
                   (the fast tier: then kept firing for `keep_firing_for`, see fast_keep_firing)

`or vector(0)` makes an absent success series count as zero successes: a total outage in which no
request succeeded still pages. Prometheus' increase() extrapolates when the first or last sample
in the range sits away from the range's edges; with a sample at every 10 s grid point (the first
one at 0) and evaluation instants on that grid it does not, and equals the embedded store's
difference of running totals. Evaluating after the newest sample is where the two differ
(Prometheus extrapolates up to one step past the last sample).

One rule group per SLO holds its recording rules first and then the alerts reading them: rules in a
group run in order at one timestamp, so an alert sees the ratios recorded at the same instant.

Every alert has the fixed label `category` and a `cause` annotation (docs/design.md, "Shapes the
open work shares", 1). An availability SLO over the proxy's request counter records, per cause
and per short window, `slo:sli_cause_error:ratio_rate<w>{cause}` (that cause's bad events over the
valid ones); its alerts' `cause` and summary are Go templates reading `topk(1, ...)` of them, so
the labels never change while the words follow the dominant outcome. The fast-burn tier
(SloFastBurnPage, `tier: fast`) lives in a group of its own evaluated every few seconds, its
windows inline; SloMetricsAbsent (`absent()` of the SLI's selector) closes each SLO's main group.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from opsctl.clock import format_duration
from opsctl.errors import ConfigError, UsageError
from opsctl.metrics.promql import Matcher, Selector, format_selector, le_regex, parse_selector
from opsctl.slo import conventions as cv
from opsctl.slo.model import SloDefinition, given

if TYPE_CHECKING:
    from opsctl.config import AlertingConfig, Config

FORMATS = ("rules", "prometheusrule")
FACTOR_DIGITS = 10  # factors are written (and compared in-process) rounded to 10 significant digits


@dataclass(frozen=True)
class RuleSettings:
    """What the rules depend on besides the SLOs."""

    service: str
    period_seconds: int
    alerting: "AlertingConfig"
    sloth_labels: bool = False  # slos.sloth_labels: Sloth's labels on the recording series

    @classmethod
    def from_config(cls, cfg: "Config") -> "RuleSettings":
        return cls(service=cfg.service, period_seconds=cfg.slos.period_seconds, alerting=cfg.alerting,
                   sloth_labels=cfg.slos.sloth_labels)

    @property
    def period(self) -> str:
        return cv.window_label(self.period_seconds)


@dataclass(frozen=True)
class BurnAlert:
    """One multi-window burn-rate alert of one SLO, exactly as Prometheus and opsctl evaluate it."""

    alertname: str
    severity: str
    long: str
    short: str
    long_seconds: int
    short_seconds: int
    factor: float  # burn-rate threshold, as written in the rule
    min_request_rate: float  # valid events per second over the short window
    for_seconds: int
    tier: str = ""  # "fast": the fast-burn tier (its own group, raw windows, label tier=fast)
    interval: int = 0  # its group's evaluation interval (0: the plan's)
    keep_firing_seconds: int = 0  # Prometheus' `keep_firing_for` (>= 2.42): firing on after the condition ends

    @property
    def fast(self) -> bool:
        return self.tier == "fast"


@dataclass(frozen=True)
class SloRulePlan:
    slo: SloDefinition
    good: str | None  # selectors as written into PromQL (an exact `le` matcher becomes a regex); None: query_sli
    valid: str | None  # None: query_sli, or an SLI of good and bad events
    labels: tuple[tuple[str, str], ...]  # slo, backend, service
    windows: tuple[tuple[str, int], ...]  # error-ratio windows: the burn-rate windows and the period
    period: str
    alerts: tuple[BurnAlert, ...]
    interval: int = 60  # rule evaluation interval, seconds
    base: tuple[str, int] | None = None  # the recorded increases' window; None: every window raw
    derived: tuple[str, ...] = ()  # windows computed from the recorded increases
    category: str = "availability"  # the fixed `category` label of its alerts (cv.CATEGORIES)
    # Availability SLOs over the proxy's request counter: cause -> selector of that cause's bad
    # events (the SLI's own selector narrowed to the cause's outcomes); empty: no breakdown.
    causes: tuple[tuple[str, str], ...] = ()
    absent: str | None = None  # the selector whose absence SloMetricsAbsent reports (None: no alert)
    absent_for: int = 0
    absent_severity: str = "page"
    sloth: bool = False  # the recording series also carry Sloth's labels (slos.sloth_labels)

    @property
    def name(self) -> str:
        return self.slo.name

    @property
    def label_dict(self) -> dict[str, str]:
        return dict(self.labels)

    @property
    def record_labels(self) -> dict[str, str]:
        """The labels of its recording series: the plan's, plus Sloth's when asked for."""
        labels = self.label_dict
        if self.sloth:
            labels.update(cv.sloth_labels(labels[cv.LABEL_SERVICE], self.name))
        return labels

    @property
    def recorded_base(self) -> tuple[str, int]:
        """The recorded increases' window and its seconds, for a plan that records them (`base`)."""
        if self.base is None:
            raise ValueError(f"{self.name}: its SLI records no increases (no base window)")
        return self.base

    @property
    def guard_windows(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(a.short for a in self.alerts if not a.fast))

    @property
    def fixed_cause(self) -> str | None:
        """The cause every alert of this SLO carries, or None when it is read from the per-cause ratios."""
        if self.category == "latency":
            return "latency"
        return None if self.causes else cv.DEFAULT_AVAILABILITY_CAUSE

    def cause_queries(self, window: str) -> dict[str, str]:
        """Cause -> PromQL counting that cause's bad events over `window` ('300s' or '5m')."""
        from opsctl.slo.model import fmt_query

        return {cause: fmt_query(selector, window, self.slo.operators) for cause, selector in self.causes}

    def queries(self, window: str) -> dict[str, str]:
        """Role -> PromQL over `window`, with the plan's own (rewritten) good and valid filters."""
        return replace(self.slo, filter_good=self.good, filter_valid=self.valid).queries(window)


# ---------------------------------------------------------------------------------------------
# The plan


def plan_rules(slos: Sequence[SloDefinition], settings: RuleSettings) -> list[SloRulePlan]:
    """Validate that every SLO can be expressed as rules and plan them; every problem is listed."""
    problems: list[str] = []
    plans = []
    for slo in slos:
        selectors = _sli_selectors(slo, problems)
        if selectors:
            plans.append(_plan_one(slo, *selectors, settings))
    if problems:
        raise ConfigError(f"{len(problems)} SLO(s) cannot be expressed as Prometheus rules", problems=problems)
    if not plans:
        raise UsageError("no SLOs to generate rules for", hint="pass SLO files or directories, or set slos.dir")
    return plans


def _plan_one(slo: SloDefinition, good: str | None, valid: str | None, settings: RuleSettings) -> SloRulePlan:
    period_seconds = slo.period_or(settings.period_seconds)  # its own period, else slos.period
    period = cv.window_label(period_seconds)
    windows = cv.period_windows(period_seconds)  # the table's windows, scaled off 28-30 days
    windows.setdefault(period, period_seconds)
    alerting = settings.alerting
    alerts = []
    for pair in cv.ALERT_PAIRS:
        sev = settings.alerting.severity(pair.severity)
        long, long_seconds, short, short_seconds = pair.windows(period_seconds)
        alerts.append(BurnAlert(
            alertname=cv.alert_name(pair.severity),
            severity=pair.severity,
            long=long,
            short=short,
            long_seconds=long_seconds,
            short_seconds=short_seconds,
            factor=float(f"{pair.factor(period_seconds):.{FACTOR_DIGITS}g}"),
            min_request_rate=float(sev.min_request_rate),
            for_seconds=cv.scaled_for(sev.for_seconds, period_seconds),
        ))
    fast = alerting.fast
    category = "latency" if slo.kind == "latency" else "availability"
    if fast.enabled and slo.counts_events and category == "availability":  # hard outages: errors, not tails
        long, short = cv.window_label(fast.long.seconds), cv.window_label(fast.short.seconds)
        alerts.append(BurnAlert(
            alertname=cv.FAST_ALERT_NAME, severity="page", long=long, short=short,
            long_seconds=fast.long.seconds, short_seconds=fast.short.seconds,
            factor=float(f"{fast.factor:.{FACTOR_DIGITS}g}"), min_request_rate=float(fast.min_request_rate),
            for_seconds=fast.for_seconds, tier="fast", interval=fast.interval_seconds,
            keep_firing_seconds=fast_keep_firing(alerts, settings.alerting.interval_seconds),
        ))
        for w, sec in ((long, fast.long.seconds), (short, fast.short.seconds)):
            windows.setdefault(w, sec)
    labels = ((cv.LABEL_SLO, slo.name),) + (((cv.LABEL_BACKEND, slo.backend),) if slo.backend else ()) + (
        (cv.LABEL_SERVICE, slo.service_name or settings.service),)
    interval = settings.alerting.interval_seconds
    base = derived = None
    if slo.counts_increases:  # counts can be summed over time; a ratio (query_sli) or rates cannot
        base = cv.base_window(interval, period_seconds)
        base_seconds = base[1]
        derived = tuple(w for w in (*cv.derived_windows(period_seconds), period) if windows[w] > base_seconds)
    causes = _cause_selectors(slo, valid) if category == "availability" else ()
    absent = _absent_selector(slo, valid) if alerting.absent.enabled else None
    return SloRulePlan(slo, good, valid, labels, tuple(windows.items()), period, tuple(alerts),
                       interval, base, tuple(dict.fromkeys(derived or ())), category, causes, absent,
                       alerting.absent.for_seconds, alerting.absent.severity, settings.sloth_labels)


def fast_keep_firing(pairs: Sequence[BurnAlert], interval: int) -> int:
    """The fast tier's `keep_firing_for`: the longest `for:` of the slower page pairs (as scaled with
    the SLO's period) plus one evaluation of their group.

    The fast tier's own failover empties its short window of the failed backend's traffic, so its
    condition ends one evaluation after it fired (the minimum-traffic guard). The slower page pair's
    condition already holds by then (its factor is lower over longer windows) and fires within its
    `for:` plus one evaluation; kept firing that long, the fast page hands its episode over to it
    instead of resolving and starting the restore hold-down towards a backend that still fails."""
    return max((a.for_seconds for a in pairs if a.severity == "page" and not a.fast), default=0) + interval


def _cause_selectors(slo: SloDefinition, valid: str | None) -> tuple[tuple[str, str], ...]:
    """For an SLI counting the proxy's requests by outcome: each availability cause's bad events,
    as the SLI's own selector (valid events, else bad ones) with an outcome matcher added. Two
    matchers on one label both apply, so the cause counts only outcomes the SLI counts as valid."""
    from opsctl.metrics import schema

    text = valid if valid is not None else slo.filter_bad
    if not slo.counts_increases or text is None or "[window]" in text:
        return ()
    selector = parse_selector(text)
    if selector.metric != schema.REQUESTS:
        return ()
    out = []
    for cause, outcomes in cv.CAUSE_OUTCOMES.items():
        matcher = Matcher("outcome", "=~", "|".join(outcomes))
        out.append((cause, format_selector(Selector(selector.metric, selector.matchers + (matcher,)))))
    return tuple(out)


def _absent_selector(slo: SloDefinition, valid: str | None) -> str | None:
    """The series whose absence means the SLI cannot be measured: the valid (else good) selector."""
    for text in (valid, slo.filter_good):
        if text is not None and "[window]" not in text:
            try:
                return format_selector(parse_selector(text))
            except UsageError:
                return None
    return None


def _sli_selectors(slo: SloDefinition, problems: list[str]) -> tuple[str | None, str | None] | None:
    """The good and valid filters for PromQL, or None with the reason added to `problems`.
    Only plain selectors of good and valid events are checked further (histogram, `le`)."""
    where = f"{slo.file}: {slo.name}"
    if slo.method == "query_sli" or slo.filter_good is None or slo.filter_valid is None \
            or "[window" in slo.filter_good + slo.filter_valid:
        return slo.filter_good, slo.filter_valid
    good, valid = parse_selector(slo.filter_good), parse_selector(slo.filter_valid)
    # A latency SLO is known by its histogram selector; one named so without it cannot be expressed.
    declared_latency = "latency" in slo.name.lower() or "latency" in str(
        (slo.document.get("metadata") or {}).get("labels", {}).get("slo_name", "")
    ).lower()
    if slo.kind != "latency":
        if declared_latency:
            problems.append(
                f"{where}: a latency SLO needs a histogram: filter_good must select `<histogram>_bucket` with an"
                f" `le` matcher (e.g. le=~\"0\\\\.5|0\\\\.50*\"), got {slo.filter_good!r}"
            )
            return None
        return slo.filter_good, slo.filter_valid
    le = [m for m in good.matchers if m.label == "le"]
    if len(le) != 1 or le[0].op not in ("=", "=~"):
        problems.append(
            f"{where}: filter_good selects histogram buckets but needs exactly one `le=` or `le=~` matcher"
            f" naming the latency threshold, got {slo.filter_good!r}"
        )
        return None
    bound = _le_bound(le[0].value) if le[0].op == "=" else None
    if le[0].op == "=" and bound is None:
        problems.append(f"{where}: le=\"{le[0].value}\" is not a finite bucket bound")
        return None
    base = good.metric[: -len("_bucket")]
    valid_le = [m for m in valid.matchers if m.label == "le"]
    counts_all = valid.metric == f"{base}_count" or (
        valid.metric == good.metric and len(valid_le) == 1 and valid_le[0].op == "=" and valid_le[0].value == "+Inf"
    )
    if not counts_all:
        problems.append(
            f"{where}: filter_valid must count every request of the same histogram ({base}_count), got {slo.filter_valid!r}"
        )
        return None
    if bound is not None:  # le="1" misses buckets exposed as "1.0" (and the other way round)
        matchers = tuple(m if m.label != "le" else Matcher("le", "=~", le_regex(bound)) for m in good.matchers)
        return format_selector(Selector(good.metric, matchers)), slo.filter_valid
    return slo.filter_good, slo.filter_valid


def _le_bound(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) and value > 0 else None


# ---------------------------------------------------------------------------------------------
# PromQL and annotations (the in-process evaluation in opsctl.slo.alerts mirrors these)


def number(value: float) -> str:
    """A float literal both Prometheus and Python read back as the same float64."""
    return repr(float(value))


def error_ratio_expr(plan: SloRulePlan, window: str) -> str:
    q = plan.queries(window)
    if "sli" in q:
        return f"1 - ({q['sli']})"
    valid = q["valid"] if "valid" in q else f"({q['good']} + ({q['bad']} or vector(0)))"
    return f"1 - (({q['good']} or vector(0)) / {valid})"


def derived_error_ratio_expr(plan: SloRulePlan, seconds: int) -> str:
    """A long window's error ratio from the recorded base-window increases, weighted by traffic:
    sum of good over sum of valid (not an average of ratios). The range is one second short of the
    window so it holds window / interval samples whether or not its start is inclusive; those
    samples telescope to the sum of the raw window's counts at the last base / interval
    evaluation instants (see docs/design.md)."""
    base = plan.recorded_base[0]
    good = f"sum_over_time({_own(cv.record_good_increase(base), plan)}[{seconds - 1}s])"
    valid = f"sum_over_time({_own(cv.record_valid_increase(base), plan)}[{seconds - 1}s])"
    return f"1 - ({good} / {valid})"


def base_increase_exprs(plan: SloRulePlan) -> tuple[str, str]:
    """(good, valid) events over the base window, aggregated to one series (pod, instance and every
    other label dropped by the sum); an absent good series records zero successes."""
    q = plan.queries(plan.recorded_base[0])
    valid = q["valid"] if "valid" in q else f"({q['good']} + ({q['bad']} or vector(0)))"
    return f"{q['good']} or vector(0)", valid


def valid_rate_expr(plan: SloRulePlan, window: str, seconds: int) -> str | None:
    """Valid events per second, or None when the SLI counts no events (no traffic guard then)."""
    if not plan.slo.counts_increases:
        return None
    q = plan.queries(window)
    # increase()/seconds rather than sum(rate()): summing per-series quotients rounds differently.
    valid = q["valid"] if "valid" in q else f"({q['good']} + ({q['bad']} or vector(0)))"
    return f"{valid} / {seconds}"


def _budget_expr(plan: SloRulePlan) -> str:
    return f"(1 - {number(plan.slo.goal)})"


def own_matchers(plan: SloRulePlan) -> str:
    """The braces selecting one SLO's recorded series: its `slo` and `service` labels (as written on
    the series), so two services of one Prometheus with an SLO of the same name stay apart."""
    return f'{{{cv.LABEL_SLO}="{plan.name}",{cv.LABEL_SERVICE}="{plan.label_dict[cv.LABEL_SERVICE]}"}}'


def _own(record: str, plan: SloRulePlan) -> str:
    return f"{record}{own_matchers(plan)}"


def _valid_of(q: dict[str, str]) -> str:
    return q["valid"] if "valid" in q else f"({q['good']} + ({q['bad']} or vector(0)))"


def alert_expr(plan: SloRulePlan, alert: BurnAlert) -> str:
    budget, factor = _budget_expr(plan), number(alert.factor)
    if alert.fast:  # its own group, more often: raw windows inline (the records are the slower group's)
        expr = (
            f"(\n  ({error_ratio_expr(plan, alert.long)}) / {budget} > {factor}\n)\n"
            f"and\n(\n  ({error_ratio_expr(plan, alert.short)}) / {budget} > {factor}\n)"
        )
        if plan.slo.counts_increases:
            expr += (f"\nand\n(\n  {valid_rate_expr(plan, alert.short, alert.short_seconds)}"
                     f" >= {number(alert.min_request_rate)}\n)")
        return expr
    expr = (
        f"(\n  {_own(cv.record_error_ratio(alert.long), plan)} / {budget} > {factor}\n)\n"
        f"and\n(\n  {_own(cv.record_error_ratio(alert.short), plan)} / {budget} > {factor}\n)"
    )
    if plan.slo.counts_increases:
        expr += f"\nand\n(\n  {_own(cv.record_valid_rate(alert.short), plan)} >= {number(alert.min_request_rate)}\n)"
    return expr


def cause_ratio_expr(plan: SloRulePlan, cause_query: str, window: str) -> str:
    """One cause's bad events over all valid events over `window`."""
    return f"{cause_query} / {_valid_of(plan.queries(window))}"


def cause_windows(plan: SloRulePlan, fast: bool) -> tuple[str, ...]:
    """The windows whose per-cause ratios are recorded: the alerts' short windows (per group)."""
    if not plan.causes:
        return ()
    return tuple(dict.fromkeys(a.short for a in plan.alerts if a.fast == fast))


GO_BURN_RATE = '{{ printf "%.2f" $value }}'


def _cause_lookup(plan: SloRulePlan, window: str) -> str:
    """PromQL naming the dominant cause over `window`: the largest recorded per-cause ratio above 0."""
    return f"topk(1, {_own(cv.record_cause_ratio(window), plan)} > 0)"


def cause_template(plan: SloRulePlan, window: str) -> str:
    """The `cause` annotation as a Go template Prometheus renders at each evaluation."""
    return (f"{{{{ with query `{_cause_lookup(plan, window)}` }}}}"
            f"{{{{ . | first | label \"{cv.LABEL_CAUSE}\" }}}}{{{{ else }}}}{cv.DEFAULT_AVAILABILITY_CAUSE}{{{{ end }}}}")


def _cause_text_template(plan: SloRulePlan, window: str) -> str:
    """The cause's words in the summary, from the same lookup (a Go template)."""
    lookup = _cause_lookup(plan, window)
    branches = [c for c in cv.AVAILABILITY_CAUSES if c != cv.DEFAULT_AVAILABILITY_CAUSE]
    text = f'{{{{ $cause := "{cv.DEFAULT_AVAILABILITY_CAUSE}" }}}}'
    text += f'{{{{ with query `{lookup}` }}}}{{{{ $cause = . | first | label "{cv.LABEL_CAUSE}" }}}}{{{{ end }}}}'
    for i, cause in enumerate(branches):
        text += f'{{{{ {"if" if i == 0 else "else if"} eq $cause "{cause}" }}}}{cv.cause_text(cause)}'
    return text + f"{{{{ else }}}}{cv.cause_text(cv.DEFAULT_AVAILABILITY_CAUSE)}{{{{ end }}}}"


def subject(plan: SloRulePlan) -> str:
    """Who an alert is about, first in its summary: the backend, or the service for a service-wide SLO."""
    backend = plan.slo.backend
    return backend if backend and backend != cv.ALL_BACKENDS else plan.label_dict[cv.LABEL_SERVICE]


def alert_annotations(plan: SloRulePlan, alert: BurnAlert, base_url: str, burn: float | None = None,
                      cause: str | None = None) -> dict[str, str]:
    """Alert annotations: Go templates for the rule (burn None), or their rendering for a burn rate
    and the cause the in-process evaluation found (None: the SLO's fixed cause).

    Prometheus renders `{{ printf "%.2f" $value }}` with the alert's value, the long-window burn
    rate; Go and Python both round the exact binary value, so the texts are identical. The cause is
    the largest per-cause ratio recorded over the alert's short window (`topk(1, ...)`).
    """
    slo = plan.slo
    description = (slo.description or slo.name).rstrip(". ")
    fixed = plan.fixed_cause
    if burn is None:
        burn_text, description = GO_BURN_RATE, description.replace("{{", '{{ "{{" }}')
        cause_value = fixed or cause_template(plan, alert.short)
        words = cv.cause_text(fixed) if fixed else _cause_text_template(plan, alert.short)
    else:
        burn_text = f"{burn:.2f}"
        cause_value = fixed or cause or cv.DEFAULT_AVAILABILITY_CAUSE
        words = cv.cause_text(cause_value)
    objective = f"{slo.goal * 100:.10g}%"
    level = f"fast {alert.severity}" if alert.fast else alert.severity
    return {
        "summary": (
            f"{subject(plan)}: {words} at {burn_text}x over {alert.long}"
            f" ({slo.name} {level} above {cv.format_factor(alert.factor)}x over {alert.long} and {alert.short})"
        ),
        "description": (
            f"{description}. Objective {objective} over {plan.period}. This alert fires when the error budget"
            f" burns faster than {cv.format_factor(alert.factor)}x the sustainable rate over both the last {alert.long} and the"
            f" last {alert.short}, with at least {alert.min_request_rate:g} requests/s over {alert.short}."
        ),
        "burn_rate": burn_text,
        "cause": cause_value,
        "runbook_url": cv.runbook_url(base_url, slo.name, alert.severity),
    }


def alert_labels(plan: SloRulePlan, alert: BurnAlert, settings: RuleSettings) -> dict[str, str]:
    return {
        **settings.alerting.labels,
        **plan.label_dict,
        cv.LABEL_SEVERITY: alert.severity,
        cv.LABEL_CATEGORY: plan.category,
        **({cv.LABEL_TIER: alert.tier} if alert.tier else {}),
        cv.LABEL_LONG_WINDOW: alert.long,
        cv.LABEL_SHORT_WINDOW: alert.short,
    }


def absent_labels(plan: SloRulePlan, settings: RuleSettings) -> dict[str, str]:
    """The rule's labels over what `absent()` itself returns (the selector's equality matchers)."""
    own = {m.label: m.value for m in parse_selector(given(plan.absent, f"{plan.name}: absent")).matchers
           if m.op == "=" and m.label != "__name__"}
    return {**own, **settings.alerting.labels, **plan.label_dict, cv.LABEL_SEVERITY: plan.absent_severity,
            cv.LABEL_CATEGORY: "absent"}


def absent_annotations(plan: SloRulePlan, base_url: str) -> dict[str, str]:
    held = format_duration(plan.absent_for)
    return {
        "summary": f"{subject(plan)}: {cv.cause_text('absent')}: no series of {plan.name}'s SLI for {held}",
        "description": (
            f"No sample of {plan.absent} for {held}: the LLM proxy stopped exporting, or a relabelling dropped"
            f" the series. {plan.name} cannot be measured and its burn-rate alerts cannot fire."
        ),
        "cause": "absent",
        "runbook_url": cv.runbook_url(base_url, plan.name, plan.absent_severity),
    }


# ---------------------------------------------------------------------------------------------
# Rule groups (plain data)


def rule_groups(plans: Sequence[SloRulePlan], settings: RuleSettings) -> list[dict[str, Any]]:
    return [group for plan in plans for group in _groups(plan, settings)]


def _groups(plan: SloRulePlan, settings: RuleSettings) -> list[dict[str, Any]]:
    fast = [_fast_group(plan, settings)] if any(a.fast for a in plan.alerts) else []
    return [_group(plan, settings), *fast, _period_group(plan, settings)]


def _cause_rules(plan: SloRulePlan, fast: bool) -> list[dict[str, Any]]:
    rules = []
    for window in cause_windows(plan, fast):
        for cause, query in plan.cause_queries(window).items():
            rules.append({"record": cv.record_cause_ratio(window), "expr": cause_ratio_expr(plan, query, window),
                          "labels": {**plan.record_labels, cv.LABEL_CAUSE: cause}})
    return rules


def _alert_rule(plan: SloRulePlan, alert: BurnAlert, settings: RuleSettings) -> dict[str, Any]:
    rule: dict[str, Any] = {"alert": alert.alertname, "expr": alert_expr(plan, alert)}
    if alert.for_seconds:
        rule["for"] = format_duration(alert.for_seconds)
    if alert.keep_firing_seconds:
        rule["keep_firing_for"] = format_duration(alert.keep_firing_seconds)
    rule["labels"] = alert_labels(plan, alert, settings)
    rule["annotations"] = alert_annotations(plan, alert, settings.alerting.runbook_base_url)
    return rule


def _fast_group(plan: SloRulePlan, settings: RuleSettings) -> dict[str, Any]:
    """The fast-burn tier: its per-cause ratios and alert, evaluated every few seconds."""
    alerts = [a for a in plan.alerts if a.fast]
    return {
        "name": cv.fast_group_name(settings.alerting.rule_group_prefix, plan.name),
        "interval": format_duration(alerts[0].interval),
        "rules": _cause_rules(plan, True) + [_alert_rule(plan, a, settings) for a in alerts],
    }


def _ratio_rule(plan: SloRulePlan, window: str, seconds: int) -> dict[str, Any]:
    expr = derived_error_ratio_expr(plan, seconds) if window in plan.derived else error_ratio_expr(plan, window)
    return {"record": cv.record_error_ratio(window), "expr": expr, "labels": plan.record_labels}


def _period_group(plan: SloRulePlan, settings: RuleSettings) -> dict[str, Any]:
    """The period's ratio and the budget left: no alert reads them, so every 5 minutes is enough."""
    seconds = dict(plan.windows)[plan.period]
    rules = [_ratio_rule(plan, plan.period, seconds), {
        "record": cv.RECORD_BUDGET_REMAINING,
        "expr": f"1 - ({_own(cv.record_error_ratio(plan.period), plan)} / {_budget_expr(plan)})",
        "labels": plan.record_labels,
    }]
    return {
        "name": cv.period_group_name(settings.alerting.rule_group_prefix, plan.name),
        "interval": format_duration(max(plan.interval, cv.BASE_WINDOW_SECONDS)),
        "rules": rules,
    }


def _group(plan: SloRulePlan, settings: RuleSettings) -> dict[str, Any]:
    labels = plan.record_labels
    rules: list[dict[str, Any]] = []
    if plan.base:
        good, valid = base_increase_exprs(plan)
        rules.append({"record": cv.record_good_increase(plan.base[0]), "expr": good, "labels": dict(labels)})
        rules.append({"record": cv.record_valid_increase(plan.base[0]), "expr": valid, "labels": dict(labels)})
    fast = {w for a in plan.alerts if a.fast for w in (a.long, a.short)} - {w for a in plan.alerts if not a.fast
                                                                          for w in (a.long, a.short)}
    for window, seconds in plan.windows:
        if window != plan.period and window not in fast:  # the fast tier's windows are inline
            rules.append(_ratio_rule(plan, window, seconds))
    spans = dict(plan.windows)
    rates = {w: spans[w] for w in plan.guard_windows}
    rates.setdefault(cv.TRAFFIC_RATE_WINDOW, cv.WINDOWS[cv.TRAFFIC_RATE_WINDOW])  # the split's, every period
    for window, seconds in rates.items() if plan.slo.counts_increases else ():
        rules.append({
            "record": cv.record_valid_rate(window),
            "expr": valid_rate_expr(plan, window, seconds),
            "labels": dict(labels),
        })
    rules.append({"record": cv.RECORD_OBJECTIVE, "expr": f"vector({number(plan.slo.goal)})", "labels": dict(labels)})
    rules.append({"record": cv.RECORD_ERROR_BUDGET, "expr": f"vector{_budget_expr(plan)}", "labels": dict(labels)})
    if plan.sloth:  # Sloth's metadata series, which its dashboards list SLOs from
        rules.append({"record": cv.RECORD_SLOTH_INFO, "expr": "vector(1)",
                      "labels": {**labels, **cv.sloth_info_labels(plan.slo.goal)}})
    rules += _cause_rules(plan, False)
    rules += [_alert_rule(plan, alert, settings) for alert in plan.alerts if not alert.fast]
    if plan.absent:
        rules.append({"alert": cv.ABSENT_ALERT_NAME, "expr": f"absent({plan.absent})",
                      "for": format_duration(plan.absent_for), "labels": absent_labels(plan, settings),
                      "annotations": absent_annotations(plan, settings.alerting.runbook_base_url)})
    return {
        "name": cv.rule_group_name(settings.alerting.rule_group_prefix, plan.name),
        "interval": format_duration(settings.alerting.interval_seconds),
        "rules": rules,
    }


def rules_document(plans: Sequence[SloRulePlan], settings: RuleSettings, fmt: str = "rules") -> dict[str, Any]:
    """A Prometheus rule file, or a prometheus-operator PrometheusRule manifest holding the same groups."""
    groups = rule_groups(plans, settings)
    if not groups or not any(g["rules"] for g in groups):
        raise UsageError("no rules generated")
    if fmt == "rules":
        return {"groups": groups}
    if fmt == "prometheusrule":
        meta = settings.alerting.prometheus_rule
        metadata: dict[str, Any] = {"name": meta.name, "namespace": meta.namespace}
        if meta.labels:
            metadata["labels"] = dict(meta.labels)
        return {
            "apiVersion": "monitoring.coreos.com/v1",
            "kind": "PrometheusRule",
            "metadata": metadata,
            "spec": {"groups": groups},
        }
    raise UsageError(f"unknown rules format {fmt!r} (known: {', '.join(FORMATS)})")


def count_rules(document: dict[str, Any]) -> tuple[int, int, int]:
    """(groups, recording rules, alerting rules) in a rules document of either format."""
    groups = document["groups"] if "groups" in document else document["spec"]["groups"]
    rules = [r for g in groups for r in g["rules"]]
    return len(groups), sum("record" in r for r in rules), sum("alert" in r for r in rules)


def render_yaml(document: dict[str, Any], header: str = "") -> str:
    import yaml

    class Dumper(yaml.SafeDumper):  # type: ignore[misc]  # PyYAML ships no stubs: SafeDumper is Any here
        pass

    def text(dumper: Any, value: str) -> Any:
        style = "|" if "\n" in value else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    Dumper.add_representer(str, text)
    body: str = yaml.dump(document, Dumper=Dumper, sort_keys=False, width=1000, allow_unicode=True)
    lead = "".join(f"# {line}\n" if line else "#\n" for line in header.splitlines())
    return lead + body


def header(plans: Sequence[SloRulePlan], settings: RuleSettings) -> str:
    files = sorted({p.slo.file for p in plans})
    periods = sorted({dict(p.windows)[p.period]: p.period for p in plans}.items())
    return (
        f"Generated by `opsctl slo rules` from {len(files)} SLO file(s) for {settings.service},"
        f" period{'s' if len(periods) > 1 else ''} {', '.join(label for _, label in periods)}. Do not edit: regenerate."
    )


# ---------------------------------------------------------------------------------------------
# Writer


def write_atomic(path: str | Path, text: str) -> None:
    """Write a rule file whole or not at all, readable by the Prometheus that loads it."""
    from opsctl.statefile import write_text_atomic

    path = Path(path)
    directory = path.parent if str(path.parent) else Path(".")
    if not directory.is_dir():
        raise UsageError(f"--out: directory {directory} does not exist")
    write_text_atomic(path, text, mode=0o644)
