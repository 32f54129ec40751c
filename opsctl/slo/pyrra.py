"""Pyrra ServiceLevelObjectives (`apiVersion: pyrra.dev/v1alpha1`) -> SloDefinitions, read from
the SLO dirs beside the other formats (one per document; a file may hold several documents, or a
Kubernetes `List` of them).

How each indicator maps onto what opsctl computes (the queries Pyrra itself writes):

- `ratio` (`errors` and `total`, each a series selector): a bad/total form that keeps event
  counts: valid = sum(increase(total[w])), good = valid - sum(increase(errors[w])).
- `latency` (`success`: the histogram buckets at the threshold, `total`: its `_count`): good =
  the buckets, valid = the count, as slo-generator's good_bad_ratio over the same selectors.
- `bool_gauge` (a 0/1 gauge): good = sum(sum_over_time(m[w])), valid = sum(count_over_time(m[w])),
  a share of samples: no event counts, so no minimum-traffic guard.
- `grouping` (any of them): one SLI per group of those labels, by design: every query is summed
  `by` them, the report has one row per group (`name{label="value"}`) and the rules record one
  series per group.
- `latencyNative` (native histograms) is refused, naming the feature.
- Recognised by its shape as Pyrra's file loader reads it, whatever its apiVersion
  (`pyrra.dev/v1alpha1`, or `v1alpha1`: opsctl.slo.loading.recognise).
- `alerting.disabled: true` or `burnrates: false`: no burn-rate alerts (page, ticket, fast tier);
  `absent: false`: no absent alert; recording rules kept (`SloDefinition.silenced`).
- `target` (a percentage) is the goal as written; `window` is the SLO's own period (1d to 400d,
  any beside `slos.period`), which its windows, factors and `for:` follow as Pyrra's do
  (opsctl.slo.conventions.window_scale); Pyrra's alert names and severities are its own (opsctl's
  alerts come from the config's `alerting:`); `metadata.labels.backend` ties a traffic guard.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from opsctl.errors import ConfigError

if TYPE_CHECKING:  # the SLO model loads when a file is Pyrra's
    from opsctl.slo.model import Bad, SloDefinition

API_VERSION = "pyrra.dev/v1alpha1"
KIND = "ServiceLevelObjective"


def is_pyrra(doc: Any) -> bool:
    return isinstance(doc, dict) and doc.get("apiVersion") == API_VERSION


@dataclass(frozen=True)
class Query:
    metric: str


@dataclass(frozen=True)
class Ratio:
    errors: Query
    total: Query
    grouping: list[str] | None = None


@dataclass(frozen=True)
class Latency:
    success: Query
    total: Query
    grouping: list[str] | None = None


@dataclass(frozen=True)
class LatencyNative:
    total: Query
    latency: str
    grouping: list[str] | None = None


@dataclass(frozen=True)
class BoolGauge:
    metric: str
    grouping: list[str] | None = None


@dataclass(frozen=True)
class Indicator:
    ratio: Ratio | None = None
    latency: Latency | None = None
    latencyNative: LatencyNative | None = None
    bool_gauge: BoolGauge | None = None

    def __post_init__(self) -> None:
        if sum(x is not None for x in (self.ratio, self.latency, self.latencyNative, self.bool_gauge)) != 1:
            raise ValueError("give exactly one of ratio, latency, latencyNative or bool_gauge")


@dataclass(frozen=True)
class Alerting:
    """Pyrra's alerting switches, honoured (`disabled` and `burnrates: false`: no burn-rate alerts;
    `absent: false`: no absent alert; recording rules kept); names and severities are Pyrra's own
    (opsctl's alerts carry the config's)."""

    disabled: bool | None = None
    burnrates: bool | None = None
    absent: bool | None = None
    name: str = ""
    absentName: str = ""
    severities: dict[str, Any] = field(default_factory=dict)

    @property
    def silenced(self) -> tuple[str, ...]:
        burn = self.disabled is True or self.burnrates is False
        return (("page", "ticket") if burn else ()) + (("absent",) if self.absent is False else ())


@dataclass(frozen=True)
class Spec:
    target: Any
    window: str
    indicator: Indicator
    description: str = ""
    alerting: Alerting = field(default_factory=Alerting)
    # Pyrra's performance_over_accuracy and the like are not read: refused as unknown keys.


@dataclass(frozen=True)
class Document:
    apiVersion: str  # pyrra.dev/v1alpha1, or any other: Pyrra's file loader reads the shape (loading.py)
    kind: Literal["ServiceLevelObjective"]
    metadata: dict[str, Any]
    spec: Spec
    status: Any = None


def load(docs: list[tuple[str, str, Any]], known: set[str], period_seconds: int | None,
         problems: list[str]) -> list[SloDefinition]:
    """(file, where, raw document) -> SloDefinitions; every problem is added to `problems`."""
    from opsctl.config import build

    out = []
    for path, where, doc in docs:
        try:
            parsed = build(Document, doc, where)
        except ConfigError as exc:
            problems.extend(exc.problems)
            continue
        one = _definition(parsed, path, where, known, period_seconds, problems)
        if one is not None:
            out.append(one)
    return out


def _definition(doc: Document, path: str, where: str, known: set[str], period_seconds: int | None,
                problems: list[str]) -> SloDefinition | None:
    from opsctl.metrics.promql import parse_selector
    from opsctl.slo.model import DEFAULT_OPERATORS, SloDefinition, _classify, check_backend, check_name, percent_goal

    before = len(problems)

    def bad(key: str, what: str) -> None:
        problems.append(f"{where}: {key}: {what}")

    name = doc.metadata.get("name")
    if (why := check_name(name)) is not None:
        bad("metadata.name", why)
    labels = doc.metadata.get("labels") or {}
    labels = labels if isinstance(labels, dict) else {}
    backend = labels.get("backend")
    if (why := check_backend(backend, known)) is not None:
        bad("metadata.labels.backend", why)
    service = labels.get("service_name")
    try:
        goal = percent_goal(doc.spec.target)
    except ValueError as exc:
        bad("spec.target", str(exc))
        goal = None
    own_period = _check_window(doc.spec.window, bad)
    ind = doc.spec.indicator
    if ind.latencyNative is not None:
        bad("spec.indicator.latencyNative", "native histograms have no `le` buckets opsctl can count events in"
            " (nor the embedded store): write a latency indicator over classic buckets")
        return None
    part = ind.ratio or ind.latency or ind.bool_gauge
    if part is None:  # Indicator holds exactly one kind
        return None
    key = "spec.indicator." + ("ratio" if ind.ratio else "latency" if ind.latency else "bool_gauge")
    grouping = tuple(part.grouping or ())
    for label in grouping:
        if not isinstance(label, str) or not label.replace("_", "a").isalnum() or label[:1].isdigit():
            bad(f"{key}.grouping", f"must be label names, got {label!r}")
    selectors = {}
    if isinstance(part, Ratio):
        metrics = {"errors": part.errors.metric, "total": part.total.metric}
    elif isinstance(part, Latency):
        metrics = {"success": part.success.metric, "total": part.total.metric}
    else:
        metrics = {"metric": part.metric}
    for role, text in metrics.items():
        try:
            parse_selector(text)
            selectors[role] = " ".join(text.split())
        except Exception as exc:  # UsageError: Pyrra takes series selectors only
            bad(f"{key}.{role}.metric" if role != "metric" else f"{key}.metric", f"a series selector, as Pyrra takes: {exc}")
    if len(problems) > before or not isinstance(name, str) or goal is None:
        return None  # a name that is not text and a goal that is not one were each a problem above
    by = f" by ({', '.join(grouping)})" if grouping else ""
    slo_name, slo_goal = name, goal

    def define(*, filter_good: str, filter_valid: str, kind: str, threshold_seconds: float | None,
               keys: tuple[tuple[str, str], ...], document: dict[str, Any], filter_bad: str | None = None,
               operators: tuple[str, ...] = DEFAULT_OPERATORS, counts: str = "") -> SloDefinition:
        return SloDefinition(name=slo_name, backend=backend, goal=slo_goal, description=doc.spec.description,
                             file=path, service_name=service if isinstance(service, str) and service.strip() else None,
                             source_format="pyrra", grouping=grouping, method="good_bad_ratio",
                             period_seconds=own_period, filter_good=filter_good, filter_valid=filter_valid,
                             kind=kind, threshold_seconds=threshold_seconds, keys=keys, document=document,
                             filter_bad=filter_bad, operators=operators, counts=counts,
                             silenced=doc.spec.alerting.silenced)
    if ind.ratio is not None:
        valid = f"sum{by} (increase({selectors['total']}[window]))"
        errors = f"sum{by} (increase({selectors['errors']}[window]))"
        good = f"{valid} - ({errors} or {valid} * 0)"
        return define(filter_good=good, filter_valid=valid, filter_bad=errors, operators=(),
                             counts="increase", kind="availability", threshold_seconds=None,
                             document=_document(name, backend, service, doc.spec.description, goal,
                                                {"filter_good": good, "filter_valid": valid, "operators": []}),
                             keys=(("good", f"{key}.errors.metric"), ("bad", f"{key}.errors.metric"),
                                   ("valid", f"{key}.total.metric")))
    if ind.latency is not None:
        kind, threshold = _classify(selectors["success"])
        if kind != "latency" or threshold is None:
            bad(f"{key}.success.metric", "must select a histogram's `_bucket` series at one `le` bound,"
                f" got {selectors['success']!r}")
            return None
        keys = (("good", f"{key}.success.metric"), ("valid", f"{key}.total.metric"))
        if not grouping:  # slo-generator's own good_bad_ratio over the same selectors
            return define(filter_good=selectors["success"], filter_valid=selectors["total"],
                                 kind="latency", threshold_seconds=threshold, keys=keys,
                                 document=_document(name, backend, service, doc.spec.description, goal,
                                                    {"filter_good": selectors["success"],
                                                     "filter_valid": selectors["total"]}))
        good = f"sum{by} (increase({selectors['success']}[window]))"
        valid = f"sum{by} (increase({selectors['total']}[window]))"
        return define(filter_good=good, filter_valid=valid, operators=(), counts="increase",
                             kind="latency", threshold_seconds=threshold, keys=keys,
                             document=_document(name, backend, service, doc.spec.description, goal,
                                                {"filter_good": good, "filter_valid": valid, "operators": []}))
    good = f"sum{by} (sum_over_time({selectors['metric']}[window]))"
    valid = f"sum{by} (count_over_time({selectors['metric']}[window]))"
    return define(filter_good=good, filter_valid=valid, operators=(), counts="samples",
                         kind="availability", threshold_seconds=None,
                         keys=(("good", f"{key}.metric"), ("valid", f"{key}.metric")),
                         document=_document(name, backend, service, doc.spec.description, goal,
                                            {"filter_good": good, "filter_valid": valid, "operators": []}))


def _check_window(window: str, bad: Bad) -> int | None:
    """The SLO's own period in seconds (slos.period's bounds), or None with the reason added."""
    from opsctl.clock import parse_duration

    try:
        seconds = parse_duration(window)
    except ValueError as exc:
        bad("spec.window", str(exc))
        return None
    if not 86400 <= seconds <= 400 * 86400:
        bad("spec.window", f"{window}: a period must be between 1d and 400d")
        return None
    return seconds


def _document(name: str, backend: str | None, service: object, description: str, goal: float,
              sli: dict[str, Any]) -> dict[str, Any]:
    """The slo-generator document of the same SLI (what `slo convert --to slo-generator` writes)."""
    labels = {**({"service_name": service} if isinstance(service, str) else {}),
              **({"backend": backend} if backend else {})}
    return {"apiVersion": "sre.google.com/v2", "kind": "ServiceLevelObjective",
            "metadata": {"name": name, "labels": labels},
            "spec": {"description": description, "backend": "prometheus", "method": "good_bad_ratio",
                     "service_level_indicator": sli, "goal": goal}}
