"""Burn-rate alerting: per-severity behaviour and PrometheusRule metadata."""

from __future__ import annotations

from opsctl.model import Duration, Model, field

class SeverityAlerting(Model):
    """How one severity's burn-rate alerts behave: `for:` and the minimum-traffic guard."""

    for_duration: Duration  # Prometheus `for:`: the condition must hold this long before the alert fires
    min_request_rate: float  # valid events per second over the pair's short window, below which it never fires

    def __post_init__(self):
        if not 0 <= self.for_duration.seconds <= 86400:
            raise ValueError("for_duration must be between 0s and 1d")
        if not 0 <= self.min_request_rate < 1e6:
            raise ValueError("min_request_rate must be >= 0 (requests per second)")

    @property
    def for_seconds(self) -> int:
        return self.for_duration.seconds


class PrometheusRuleMeta(Model):
    """metadata of the PrometheusRule manifest (`opsctl slo rules --format prometheusrule`)."""

    name: str = "opsctl-slo-burn-rate"
    namespace: str = "monitoring"
    labels: dict[str, str] = field(default_factory=dict)  # what prometheus-operator's ruleSelector matches

    def __post_init__(self):
        import re

        for what, value in (("name", self.name), ("namespace", self.namespace)):
            if not re.fullmatch(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?", value):
                raise ValueError(f"{what} must be a Kubernetes name (lower case, digits, - and .), got {value!r}")


class AlertingConfig(Model):
    """Burn-rate alerting: the generated Prometheus rules and the in-process evaluation share it."""

    # Rule evaluation interval: each group's `interval:` and the in-process `for:` steps.
    evaluation_interval: Duration = "1m"
    runbook_base_url: str = "https://runbooks.example.com/llm-inference"
    rule_group_prefix: str = "opsctl-slo"
    labels: dict[str, str] = field(default_factory=dict)  # extra labels on every alert, e.g. team
    page: SeverityAlerting = field(default_factory=lambda: SeverityAlerting("2m", 1.0))
    ticket: SeverityAlerting = field(default_factory=lambda: SeverityAlerting("15m", 0.1))
    prometheus_rule: PrometheusRuleMeta = field(default_factory=PrometheusRuleMeta)

    def __post_init__(self):
        import re

        from opsctl.slo.conventions import RESERVED_LABELS

        interval = self.evaluation_interval.seconds
        if not 10 <= interval <= 3600 or interval % 10:
            raise ValueError("evaluation_interval must be a multiple of 10s between 10s and 1h (metrics come every 10s)")
        if not self.runbook_base_url.startswith(("http://", "https://")):
            raise ValueError(f"runbook_base_url must start with http:// or https:// (got {self.runbook_base_url!r})")
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
