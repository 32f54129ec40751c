"""OpenSLO v1 objects as typed models, built by the toolkit's one engine (`opsctl.config.build`).

Field names are the specification's own (camelCase), so an unknown key is refused with the key
path a user reads in their file (`spec.indicator.spec.ratioMetric.good.metricSource.spec.qurey`).
Each model checks what the spec says about its own fields; what needs other objects (references,
the configured period, opsctl's alert windows) is checked in `opsctl.slo.openslo`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

API_VERSION = "openslo/v1"
KINDS = ("SLO", "SLI", "DataSource", "AlertPolicy", "AlertCondition", "AlertNotificationTarget", "Service")
_SHORTHAND = re.compile(r"^([1-9][0-9]*)([mhdwMQY])$")
FIXED_UNITS = {"m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def shorthand_seconds(value: str) -> int:
    """The spec's duration-shorthand (`28d`, `4w`, `1h`) in seconds. Months, quarters and years
    have no fixed length, so a rolling window or alert window in them is refused."""
    match = _SHORTHAND.match(value) if isinstance(value, str) else None
    if not match:
        raise ValueError(f"must be a duration-shorthand such as 5m, 1h, 28d or 4w, got {value!r}")
    number, unit = match.groups()
    if unit not in FIXED_UNITS:
        raise ValueError(f"{value!r}: months, quarters and years have no fixed length; write days or weeks (e.g. 28d)")
    return int(number) * FIXED_UNITS[unit]


@dataclass(frozen=True)
class Metadata:
    name: str
    displayName: str | None = None
    labels: dict[str, str | list[str]] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class PrometheusQuery:
    """A Prometheus metric source's `spec`: one PromQL query, and the `dimensions` the spec's
    examples give beside it (label names; read, and said to be ignored: opsctl's SLI is the query's)."""

    query: str
    dimensions: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.query.strip():
            raise ValueError("query: must be a PromQL expression")


@dataclass(frozen=True)
class MetricSource:
    metricSourceRef: str | None = None
    type: str | None = None
    spec: PrometheusQuery | None = None

    def __post_init__(self) -> None:
        if self.spec is None:
            raise ValueError("spec: required (with the PromQL `query`)")
        if self.metricSourceRef is None and self.type is None:
            raise ValueError("give `type: Prometheus` or a `metricSourceRef` to a DataSource")


@dataclass(frozen=True)
class Metric:
    metricSource: MetricSource


@dataclass(frozen=True)
class RatioMetric:
    counter: bool | None = None
    good: Metric | None = None
    bad: Metric | None = None
    total: Metric | None = None
    rawType: Literal["success", "failure"] | None = None
    raw: Metric | None = None

    def __post_init__(self) -> None:
        if self.raw is not None:
            if self.good or self.bad or self.total:
                raise ValueError("raw can't be used together with good, bad or total")
            if self.rawType is None:
                raise ValueError("rawType: required with raw (success or failure)")
            return
        if self.rawType is not None:
            raise ValueError("rawType: only with raw")
        if self.total is None:
            raise ValueError("give total with good or bad, or raw with rawType")
        if (self.good is None) == (self.bad is None):
            raise ValueError("give exactly one of good or bad with total")


@dataclass(frozen=True)
class SliSpec:
    description: str = ""
    thresholdMetric: Metric | None = None
    ratioMetric: RatioMetric | None = None

    def __post_init__(self) -> None:
        if (self.thresholdMetric is None) == (self.ratioMetric is None):
            raise ValueError("give exactly one of thresholdMetric or ratioMetric")


@dataclass(frozen=True)
class InlineSli:
    metadata: Metadata
    spec: SliSpec


@dataclass(frozen=True)
class Calendar:
    startTime: str
    timeZone: str


@dataclass(frozen=True)
class TimeWindow:
    duration: str
    isRolling: bool | None = None
    calendar: Calendar | None = None


@dataclass(frozen=True)
class Objective:
    displayName: str | None = None
    op: Literal["lte", "gte", "lt", "gt"] | None = None
    value: float | None = None
    target: float | None = None
    targetPercent: float | None = None
    timeSliceTarget: float | None = None
    timeSliceWindow: str | int | None = None

    def __post_init__(self) -> None:
        if (self.target is None) == (self.targetPercent is None):
            raise ValueError("give exactly one of target or targetPercent")
        if self.target is not None and not 0 < self.target < 1:
            raise ValueError(f"target: must be strictly between 0 and 1 (e.g. 0.9999), got {self.target!r}")
        if self.targetPercent is not None and not 0 < self.targetPercent < 100:
            raise ValueError(f"targetPercent: must be strictly between 0 and 100, got {self.targetPercent!r}")

    @property
    def goal(self) -> float:
        if self.target is not None:
            return self.target
        from decimal import Decimal  # 99.99 / 100 is 0.9998999999999999 in floats; as written it is 0.9999

        return float(Decimal(repr(self.targetPercent)) / 100)


@dataclass(frozen=True)
class BurnRateCondition:
    op: Literal["lte", "gte", "lt", "gt"]
    threshold: float
    lookbackWindow: str
    kind: Literal["burnrate"] = "burnrate"
    alertAfter: str = "0m"

    def __post_init__(self) -> None:
        for name in ("lookbackWindow", "alertAfter"):
            value = getattr(self, name)
            if name == "alertAfter" and value == "0m":
                continue
            try:
                shorthand_seconds(value)
            except ValueError as exc:
                raise ValueError(f"{name}: {exc}") from None


@dataclass(frozen=True)
class AlertConditionSpec:
    severity: str
    condition: BurnRateCondition
    description: str = ""


@dataclass(frozen=True)
class PolicyCondition:
    """One entry of an AlertPolicy's conditions: a `conditionRef`, or an inline AlertCondition."""

    conditionRef: str | None = None
    kind: Literal["AlertCondition"] | None = None
    metadata: Metadata | None = None
    spec: AlertConditionSpec | None = None

    def __post_init__(self) -> None:
        inline = self.kind is not None or self.metadata is not None or self.spec is not None
        if (self.conditionRef is not None) == inline:
            raise ValueError("give a conditionRef or an inline AlertCondition (kind, metadata, spec), not both")
        if inline and (self.metadata is None or self.spec is None):
            raise ValueError("an inline AlertCondition needs metadata and spec")


@dataclass(frozen=True)
class TargetRef:
    targetRef: str | None = None
    kind: Literal["AlertNotificationTarget"] | None = None
    metadata: Metadata | None = None
    spec: dict[str, Any] | None = None


@dataclass(frozen=True)
class AlertPolicySpec:
    conditions: list[PolicyCondition]
    description: str = ""
    alertWhenNoData: bool = False
    alertWhenResolved: bool = False
    alertWhenBreaching: bool = True
    notificationTargets: list[TargetRef] = field(default_factory=list)

    def __post_init__(self) -> None:
        if len(self.conditions) != 1:
            raise ValueError(f"conditions: the spec allows exactly one condition per AlertPolicy, got {len(self.conditions)}")


@dataclass(frozen=True)
class SloPolicy:
    """One entry of an SLO's alertPolicies: an `alertPolicyRef`, or an inline AlertPolicy."""

    alertPolicyRef: str | None = None
    kind: Literal["AlertPolicy"] | None = None
    metadata: Metadata | None = None
    spec: AlertPolicySpec | None = None

    def __post_init__(self) -> None:
        inline = self.kind is not None or self.metadata is not None or self.spec is not None
        if (self.alertPolicyRef is not None) == inline:
            raise ValueError("give an alertPolicyRef or an inline AlertPolicy (kind, metadata, spec), not both")
        if inline and (self.metadata is None or self.spec is None):
            raise ValueError("an inline AlertPolicy needs metadata and spec")


@dataclass(frozen=True)
class SloSpec:
    budgetingMethod: Literal["Occurrences", "Timeslices", "RatioTimeslices"]
    objectives: list[Objective]
    description: str = ""
    service: str | None = None
    indicator: InlineSli | None = None
    indicatorRef: str | None = None
    timeWindow: list[TimeWindow] = field(default_factory=list)
    alertPolicies: list[SloPolicy] = field(default_factory=list)

    def __post_init__(self) -> None:
        if (self.indicator is None) == (self.indicatorRef is None):
            raise ValueError("give exactly one of indicator or indicatorRef")
        if not self.objectives:
            raise ValueError("objectives: at least one objective is required")


@dataclass(frozen=True)
class DataSourceSpec:
    type: str
    description: str = ""
    connectionDetails: Any = None  # any YAML, per the spec: opsctl connects through its own config


@dataclass(frozen=True)
class ServiceSpec:
    description: str = ""


@dataclass(frozen=True)
class NotificationTargetSpec:
    target: str
    description: str = ""


def _document(spec_type: type, kind: str) -> type:
    @dataclass(frozen=True)
    class Document:
        apiVersion: Literal["openslo/v1"]
        kind: Literal[kind]  # type: ignore[valid-type]
        metadata: Metadata
        spec: spec_type  # type: ignore[valid-type]

    Document.__name__ = f"{kind}Document"
    Document.__annotations__ = {"apiVersion": Literal["openslo/v1"], "kind": Literal[kind], "metadata": Metadata,
                                "spec": spec_type}
    return Document


DOCUMENTS: dict[str, type] = {
    "SLO": _document(SloSpec, "SLO"),
    "SLI": _document(SliSpec, "SLI"),
    "DataSource": _document(DataSourceSpec, "DataSource"),
    "AlertPolicy": _document(AlertPolicySpec, "AlertPolicy"),
    "AlertCondition": _document(AlertConditionSpec, "AlertCondition"),
    "AlertNotificationTarget": _document(NotificationTargetSpec, "AlertNotificationTarget"),
    "Service": _document(ServiceSpec, "Service"),
}
