"""Burn-rate alerting: per-severity behaviour and PrometheusRule metadata."""

from __future__ import annotations

from opsctl.model import Duration, Model, field

class SeverityAlerting(Model):
    """How one severity's burn-rate alerts behave: `for:` and the minimum-traffic guard."""

    for_duration: Duration  # Prometheus `for:`: the condition must hold this long before the alert fires
    min_request_rate: float  # valid events per second over the pair's short window, below which it never fires
    # ... unless the short window counts at least this many bad events (few events, a real burn: the
    # workbook's low-traffic advice). 0: below min_request_rate the pair never fires.
    min_bad_events: float = 10.0

    def __post_init__(self) -> None:
        if not 0 <= self.for_duration.seconds <= 86400:
            raise ValueError("for_duration must be between 0s and 1d")
        if not 0 <= self.min_request_rate < 1e6:
            raise ValueError("min_request_rate must be >= 0 (requests per second)")
        if not 0 <= self.min_bad_events < 1e9:
            raise ValueError("min_bad_events must be >= 0 (bad events over the pair's short window)")

    @property
    def for_seconds(self) -> int:
        return self.for_duration.seconds


class FastBurnAlerting(Model):
    """The fast-burn tier: a burn no sampling noise can produce (a hard outage) pages within seconds.

    Fires when the error budget burns above `factor` over both `long` and `short` (raw windows,
    evaluated every `evaluation_interval` in a group of its own), with at least `min_request_rate`
    valid requests/s over `short`, held for `for_duration` (0s: at the first evaluation). A latency SLO's
    factor is `latency_share` over its budget, when that exceeds its slower page pairs'. The alert is
    SloFastBurnPage, severity page, labels `tier: fast` and the SLO's `category`, so it drives the
    same policies as the slower pages. docs/decisions/0011-fast-burn-tier-keeps-firing.md gives the time to page of a hard outage."""

    enabled: bool = True
    long: Duration = Duration("5m")
    short: Duration = Duration("1m")
    factor: float = 300.0
    for_duration: Duration = Duration("0s")
    evaluation_interval: Duration = Duration("10s")
    min_request_rate: float = 1.0
    # Latency SLOs: the share of requests slower than the threshold over both windows that pages at
    # once; the factor is share / (1 - goal) (30x on a 99.9% SLO). 0: no fast tier for latency.
    latency_share: float = 0.03

    def __post_init__(self) -> None:
        long, short = self.long.seconds, self.short.seconds
        if not 0 <= self.latency_share < 1:
            raise ValueError("latency_share must be a share of requests, 0 <= share < 1 (0.03: 3%)")
        if not 60 <= short < long <= 3600 or long % 60 or short % 60:
            raise ValueError("short and long must be whole minutes, 1m <= short < long <= 1h")
        if not 10 <= self.evaluation_interval.seconds <= 60 or self.evaluation_interval.seconds % 10:
            raise ValueError("evaluation_interval must be a multiple of 10s between 10s and 1m")
        if not 0 <= self.for_duration.seconds <= 600:
            raise ValueError("for_duration must be between 0s and 10m")
        if not 1 < self.factor < 1e6:
            raise ValueError("factor must be a burn rate above 1")
        if not 0 <= self.min_request_rate < 1e6:
            raise ValueError("min_request_rate must be >= 0 (requests per second)")

    @property
    def for_seconds(self) -> int:
        return self.for_duration.seconds

    @property
    def interval_seconds(self) -> int:
        return self.evaluation_interval.seconds


class AbsentAlerting(Model):
    """One SloMetricsAbsent alert per SLO: its SLI's series have no sample (the proxy stopped
    exporting, a relabelling dropped them) for `for_duration`. No data is never read as healthy."""

    enabled: bool = True
    for_duration: Duration = Duration("10m")
    severity: str = "page"

    def __post_init__(self) -> None:
        if not 60 <= self.for_duration.seconds <= 86400:
            raise ValueError("for_duration must be between 1m and 1d")
        if self.severity not in ("page", "ticket"):
            raise ValueError("severity must be page or ticket")

    @property
    def for_seconds(self) -> int:
        return self.for_duration.seconds


class PrometheusRuleMeta(Model):
    """metadata of the PrometheusRule manifest (`opsctl slo rules --format prometheusrule`)."""

    name: str = "opsctl-slo-burn-rate"
    namespace: str = "monitoring"
    labels: dict[str, str] = field(default_factory=dict)  # what prometheus-operator's ruleSelector matches

    def __post_init__(self) -> None:
        import re

        for what, value in (("name", self.name), ("namespace", self.namespace)):
            if not re.fullmatch(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?", value):
                raise ValueError(f"{what} must be a Kubernetes name (lower case, digits, - and .), got {value!r}")


class AlertingConfig(Model):
    """Burn-rate alerting: the generated Prometheus rules and the in-process evaluation share it."""

    # Rule evaluation interval: each group's `interval:` and the in-process `for:` steps.
    evaluation_interval: Duration = Duration("1m")
    # `{service}` is replaced by the config's `service:` (Config resolves it), so a rename is one edit
    runbook_base_url: str = "https://runbooks.example.com/{service}"
    rule_group_prefix: str = "opsctl-slo"
    labels: dict[str, str] = field(default_factory=dict)  # extra labels on every alert, e.g. team
    page: SeverityAlerting = field(default_factory=lambda: SeverityAlerting(Duration("2m"), 1.0))
    ticket: SeverityAlerting = field(default_factory=lambda: SeverityAlerting(Duration("3m"), 0.1))  # 0410
    fast: FastBurnAlerting = field(default_factory=FastBurnAlerting)
    absent: AbsentAlerting = field(default_factory=AbsentAlerting)
    prometheus_rule: PrometheusRuleMeta = field(default_factory=PrometheusRuleMeta)

    def __post_init__(self) -> None:
        import re

        from opsctl.slo.conventions import RESERVED_LABELS

        interval = self.evaluation_interval.seconds
        if not 10 <= interval <= 3600 or interval % 10:
            raise ValueError("evaluation_interval must be a multiple of 10s between 10s and 1h (metrics come every 10s)")
        if not self.runbook_base_url.startswith(("http://", "https://")):
            raise ValueError(f"runbook_base_url must start with http:// or https:// (got {self.runbook_base_url!r})")
        if re.search(r"\{(?!service\})[^}]*\}", self.runbook_base_url):
            raise ValueError(f"runbook_base_url: the only placeholder is {{service}} (got {self.runbook_base_url!r})")
        if not re.fullmatch(r"[A-Za-z0-9_.:-]+", self.rule_group_prefix):
            raise ValueError(f"rule_group_prefix must be letters, digits, _ . : -, got {self.rule_group_prefix!r}")
        for name in self.labels:
            if not re.fullmatch(r"[a-zA-Z_][a-zA-Z0-9_]*", name) or name.startswith("__"):
                raise ValueError(f"labels: {name!r} is not a Prometheus label name")
            if name in RESERVED_LABELS:
                raise ValueError(f"labels: {name!r} is set by opsctl on every alert and cannot be overridden")

    @property
    def interval_seconds(self) -> int:
        return self.evaluation_interval.seconds

    def severity(self, name: str) -> SeverityAlerting:
        return {"page": self.page, "ticket": self.ticket}[name]
