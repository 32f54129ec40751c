"""SLOs -> the typed rule plan (`plan_rules`): for every SLO its selectors, windows, factors,
thresholds, `for:`, the fast tier's keep and the minimum-traffic guard of every alert, as
`SloRulePlan`s. rule_exprs.py writes the plan's PromQL and annotations, rules.py its rule groups
and files, and `opsctl.slo.alerts` evaluates the same plan in-process (rules.py's docstring says
why both fire the same alerts at the same instants)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Sequence

from opsctl.errors import ConfigError, UsageError
from opsctl.metrics.promql import Matcher, Selector, format_selector, le_regex, parse_selector
from opsctl.slo import conventions as cv
from opsctl.slo.model import SloDefinition

if TYPE_CHECKING:
    from opsctl.config import AlertingConfig, Config
    from opsctl.config.alerting import FastBurnAlerting

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
    # Below min_request_rate the pair still holds with at least this many bad events over the short
    # window (0: never below it). The fast tier keeps the rate guard alone.
    min_bad_events: float = 0.0

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
            min_bad_events=float(sev.min_bad_events),
        ))
    fast = alerting.fast
    category = "latency" if slo.kind == "latency" else "availability"
    fast_factor = fast_tier_factor(slo, category, alerts, fast)
    if fast.enabled and slo.counts_events and fast_factor is not None:
        long, short = cv.window_label(fast.long.seconds), cv.window_label(fast.short.seconds)
        alerts.append(BurnAlert(
            alertname=cv.FAST_ALERT_NAME, severity="page", long=long, short=short,
            long_seconds=fast.long.seconds, short_seconds=fast.short.seconds,
            factor=fast_factor, min_request_rate=float(fast.min_request_rate),
            for_seconds=fast.for_seconds, tier="fast", interval=fast.interval_seconds,
            keep_firing_seconds=fast_keep_firing(alerts, settings.alerting.interval_seconds),
        ))
        for w, sec in ((long, fast.long.seconds), (short, fast.short.seconds)):
            windows.setdefault(w, sec)
    labels = ((cv.LABEL_SLO, slo.name),) + (((cv.LABEL_BACKEND, slo.backend),) if slo.backend else ()) + (
        (cv.LABEL_SERVICE, settings.service),)  # the config's service: never a copy in the file
    interval = settings.alerting.interval_seconds
    base = derived = None
    if slo.counts_increases:  # counts can be summed over time; a ratio (query_sli) or rates cannot
        base = cv.base_window(interval, period_seconds)
        base_seconds = base[1]
        derived = tuple(w for w in (*cv.derived_windows(period_seconds), period) if windows[w] > base_seconds)
    causes = _cause_selectors(slo, valid) if category == "availability" else ()
    absent = _absent_selector(slo, valid) if alerting.absent.enabled and slo.alerts_on("absent") else None
    alerts = [a for a in alerts if slo.alerts_on(a.severity)]  # the file's own switches: recording rules kept
    return SloRulePlan(slo, good, valid, labels, tuple(windows.items()), period, tuple(alerts),
                       interval, base, tuple(dict.fromkeys(derived or ())), category, causes, absent,
                       alerting.absent.for_seconds, alerting.absent.severity, settings.sloth_labels)


def fast_tier_factor(slo: SloDefinition, category: str, pairs: Sequence[BurnAlert],
                     fast: "FastBurnAlerting") -> float | None:
    """The fast tier's factor for one SLO, or None when it gets no fast tier.

    Availability: `alerting.fast.factor` (300x: 3% of requests failing on a 99.99% SLO). Latency:
    the same idea, a share of slow requests no clean minute reaches (`alerting.fast.latency_share`,
    3%), as a burn rate of the SLO's own budget: share / (1 - goal), 30x on a 99.9% SLO. A latency
    SLO whose factor would not exceed its slower page pairs' (a 99% SLO: 3x) gets none: the pairs
    page first there (docs/decisions/0400-latency-fast-tier.md)."""
    if category == "availability":
        return float(f"{fast.factor:.{FACTOR_DIGITS}g}")
    if category != "latency" or fast.latency_share <= 0 or slo.goal >= 1:
        return None
    factor = float(f"{fast.latency_share / (1 - slo.goal):.{FACTOR_DIGITS}g}")
    slower = max((a.factor for a in pairs if a.severity == "page" and not a.fast), default=0.0)
    return factor if factor > slower else None


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
