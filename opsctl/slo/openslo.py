"""OpenSLO v1 files -> the slo-generator document opsctl computes from, so an SLO gives the same
numbers and rules whichever format it came in. `openslo/v1alpha` (Sloth's OpenSLO form: ratio
SLOs) and `openslo.com/v2alpha` are read as the v1 documents they mean (`as_v1`); a query's
`{{.Window}}` (or Sloth's `{{.window}}`) template is the `[window]` placeholder, and a good/total
pair of such expressions is counted as written (no operators wrapped around them).

What maps, and how (anything else is refused with its file and key path):

- `SLO` with `budgetingMethod: Occurrences` and one objective (`target` or `targetPercent`).
  Timeslices and RatioTimeslices count good time slices, not good events; opsctl's budget and
  burn-rate math is over events, so they are refused.
- `timeWindow`: one rolling window (1d to 400d), the SLO's own period: its windows, factors and
  alert policies follow it (opsctl.slo.conventions.window_scale); none means `slos.period`.
- SLI `ratioMetric` with `counter: true`: good/total -> good_bad_ratio (filter_good,
  filter_valid; each query a selector, or an expression with slo-generator's `[window]`
  placeholder). bad/total and raw (`rawType` success or failure) -> query_sli: the same SLI,
  budget and burn rates, but no event counts (so no minimum-traffic guard on its alerts).
- SLI `thresholdMetric` over a Prometheus histogram's buckets (`<name>_bucket{...}`) with the
  objective's `op: lte` and `value` a bucket bound -> distribution_cut: the share of requests at
  or under `value` seconds. A threshold on any other query compares samples, not events: refused.
- Metric sources: `type: Prometheus` inline, or `metricSourceRef` to a `DataSource` of that type;
  both together, as the spec's examples write them, read the DataSource when the files hold it and
  the inline type when not (said in a note). A Prometheus source's `dimensions` are read and
  ignored with a note; a DataSource's `connectionDetails` may be any YAML (opsctl connects through
  its own config).
- As the spec's examples write YAML: unquoted timestamps are read as the text they were, and a
  key with no value (`alertPolicies:`) as absent, so an empty list is empty.
- `indicatorRef`, `metricSourceRef`, `alertPolicyRef` and `conditionRef` resolve across every
  file read together (the SLO dirs), in any order.
- `alertPolicies`: opsctl generates its multi-window burn-rate alerts from the config's
  `alerting:`. A burnrate condition is accepted when it is one of them (severity page or ticket,
  op gt or gte, lookbackWindow a long window of that severity, threshold its factor for the
  period, alertAfter its `for:`); anything else is refused, never silently ignored.
- `metadata.labels.backend` (optional) ties a traffic guard as in slo-generator files;
  `spec.service` (slo-generator's `labels.service_name`) must be the config's service, which
  names the service in rules (`slo validate` refuses another).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from opsctl.errors import ConfigError

if TYPE_CHECKING:  # the models load only when a file is OpenSLO: load_slos reads every SLO through here
    from types import ModuleType

    from opsctl.config import Config
    from opsctl.slo import openslo_model as om
    from opsctl.slo.model import Bad, SloDefinition

PROMETHEUS = "prometheus"


@dataclass(frozen=True)
class Loaded:
    """One built OpenSLO object and where it came from (`file` already names the document)."""

    kind: str
    name: str
    obj: Any
    file: str  # the file, and the document in it when it holds several (for messages)
    path: str  # the file alone


def is_openslo(doc: Any) -> bool:
    api = str(doc.get("apiVersion", "")) if isinstance(doc, dict) else ""
    return api.startswith("openslo/") or api == V2ALPHA


V1ALPHA, V2ALPHA = "openslo/v1alpha", "openslo.com/v2alpha"
TEMPLATE = ("{{.Window}}", "{{ .Window }}", "{{.window}}", "{{ .window }}")  # the range, as `[window]`


def as_v1(doc: dict[str, Any], where: str, problems: list[str]) -> list[dict[str, Any]]:
    """An `openslo/v1alpha` or `openslo.com/v2alpha` document as the openslo/v1 documents it means
    (a v1 document as it is); a problem added, and nothing, for what has no v1 meaning.

    v1alpha (Sloth's OpenSLO form): an SLO's objectives each with `ratioMetrics` good/total
    (`source: prometheus`, `queryType: promql`) and `target`, its `timeWindows` a count of days;
    each objective is one SLO named as Sloth names it (`<service>-<name>-<index>`), its SLI
    good / total as Sloth computes it (no event counts). v2alpha: `sli`/`sliRef` for
    `indicator`/`indicatorRef`, a metric's `dataSourceRef`/`dataSourceSpec` and `spec` for v1's
    `metricSource`."""
    api = doc.get("apiVersion")
    if api == V1ALPHA:  # (openslo_model loads with the first OpenSLO file)
        return _v1alpha(doc, where, problems)
    if api == V2ALPHA:
        return [_v2alpha(doc)]
    return [doc]


def _v1alpha(doc: dict[str, Any], where: str, problems: list[str]) -> list[dict[str, Any]]:
    from opsctl.slo import openslo_model as om

    if doc.get("kind") != "SLO":
        problems.append(f"{where}: kind: opsctl reads {V1ALPHA}'s SLO (Sloth's form), got {doc.get('kind')!r}")
        return []
    meta, spec = _mapping(doc.get("metadata")), _mapping(doc.get("spec"))
    out: list[dict[str, Any]] = []
    for key in sorted(set(spec) - {"service", "description", "budgetingMethod", "objectives", "timeWindows"}, key=str):
        problems.append(f"{where}: spec.{key}: not read in {V1ALPHA} (opsctl reads service, description,"
                        " budgetingMethod, objectives with ratioMetrics, timeWindows)")
    windows = spec.get("timeWindows") or []
    time_window = []
    if isinstance(windows, list) and windows:
        w = _mapping(windows[0])
        if len(windows) > 1 or str(w.get("unit", "")).lower() != "day" or not isinstance(w.get("count"), int) \
                or isinstance(w.get("count"), bool):
            problems.append(f"{where}: spec.timeWindows: one window of a count of days (unit: Day), as Sloth reads it,"
                            f" got {windows!r}")
            return []
        time_window = [{"duration": f"{w['count']}d", "isRolling": True}]
    objectives = spec.get("objectives")
    if not isinstance(objectives, list) or not objectives:
        problems.append(f"{where}: spec.objectives: at least one objective with ratioMetrics and target")
        return []
    for i, objective in enumerate(objectives):
        key = f"spec.objectives[{i}]"
        ratio = objective.get("ratioMetrics") if isinstance(objective, dict) else None
        if not isinstance(ratio, dict) or not all(isinstance(ratio.get(r), dict) for r in ("good", "total")):
            problems.append(f"{where}: {key}.ratioMetrics: opsctl reads {V1ALPHA} ratio SLOs: good and total queries")
            continue
        queries = {}
        for role in ("good", "total"):
            metric = ratio[role]
            if metric.get("source") not in ("prometheus", "sloth") or metric.get("queryType") != "promql":
                problems.append(f"{where}: {key}.ratioMetrics.{role}: must be source: prometheus and queryType: promql,"
                                f" got {metric.get('source')!r} and {metric.get('queryType')!r}")
            queries[role] = str(metric.get("query") or "").strip()
        if len(queries) != 2 or not all(queries.values()):
            continue
        extra = sorted(set(objective) - {"ratioMetrics", "target", "displayName"}, key=str)
        if extra:
            problems.append(f"{where}: {key}.{extra[0]}: not read in {V1ALPHA} (an objective is ratioMetrics and target)")
            continue
        name = f"{spec.get('service')}-{meta.get('name')}-{i}"  # Sloth's id of the objective's SLO
        query = f"({queries['good']}) / ({queries['total']})"  # Sloth's SLI: good / total
        out.append({"apiVersion": om.API_VERSION, "kind": "SLO",
                    "metadata": {"name": name, **({"labels": meta["labels"]} if "labels" in meta else {})},
                    "spec": {"description": spec.get("description", ""), "service": spec.get("service"),
                             "budgetingMethod": spec.get("budgetingMethod", "Occurrences"),
                             "timeWindow": time_window,
                             "objectives": [{"target": objective.get("target")}],
                             "indicator": {"metadata": {"name": f"{name}-sli"}, "spec": {"ratioMetric": {
                                 "rawType": "success",
                                 "raw": {"metricSource": {"type": "Prometheus", "spec": {"query": query}}}}}}}})
    return out


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _v2alpha(doc: dict[str, Any]) -> dict[str, Any]:
    """v2alpha's renames back to v1 (what is not renamed is the same; unknown keys are refused as in v1)."""
    from opsctl.slo import openslo_model as om

    def metric(value: Any) -> Any:
        if not isinstance(value, dict) or "metricSource" in value:
            return value
        source: dict[str, Any] = {}
        if "dataSourceRef" in value:
            source["metricSourceRef"] = value["dataSourceRef"]
        if isinstance(value.get("dataSourceSpec"), dict) and "type" in value["dataSourceSpec"]:
            source["type"] = value["dataSourceSpec"]["type"]
        if "spec" in value:
            source["spec"] = value["spec"]
        rest = {k: v for k, v in value.items() if k not in ("dataSourceRef", "dataSourceSpec", "spec")}
        return {"metricSource": source, **rest}

    def sli(spec: Any) -> Any:
        if not isinstance(spec, dict):
            return spec
        out = dict(spec)
        if "thresholdMetric" in out:
            out["thresholdMetric"] = metric(out["thresholdMetric"])
        if isinstance(out.get("ratioMetric"), dict):
            out["ratioMetric"] = {k: metric(v) if k in ("good", "bad", "total", "raw") else v
                                  for k, v in out["ratioMetric"].items()}
        return out

    out = {**doc, "apiVersion": om.API_VERSION}
    spec = doc.get("spec")
    if doc.get("kind") == "SLI":
        out["spec"] = sli(spec)
    elif doc.get("kind") == "SLO" and isinstance(spec, dict):
        renamed = {{"sli": "indicator", "sliRef": "indicatorRef"}.get(k, k): v for k, v in spec.items()}
        if isinstance(renamed.get("indicator"), dict):
            renamed["indicator"] = {**renamed["indicator"], "spec": sli(renamed["indicator"].get("spec"))}
        out["spec"] = renamed
    return out


def read_documents(path: Path) -> list[Any]:
    """Every YAML document of a file (`---` separated; a top-level list counts as its items)."""
    from opsctl.config.cache import cached_parse
    from opsctl.config.loading import parse_yaml, read_text

    out: list[Any] = []
    for doc in cached_parse(path, "slo", lambda: read_text(path, "SLO file"),
                            lambda text: parse_yaml(text, path, all_documents=True)):
        out.extend(doc if isinstance(doc, list) and doc and all(is_openslo(d) for d in doc) else [doc])
    return out


def build_objects(docs: list[tuple[str, str, Any]], problems: list[str]) -> dict[str, dict[str, Loaded]]:
    """(file, where, raw document) -> kind -> name -> object; every problem of every document is listed."""
    from opsctl.slo import openslo_model as om

    index: dict[str, dict[str, Loaded]] = {k: {} for k in om.KINDS}
    for path, where, raw in docs:
        if not isinstance(raw, dict):
            problems.append(f"{where}: (top level): an OpenSLO object must be a mapping")
            continue
        if raw.get("apiVersion") not in (om.API_VERSION, V1ALPHA, V2ALPHA):
            problems.append(f"{where}: apiVersion: opsctl reads {om.API_VERSION!r}, {V1ALPHA!r} and {V2ALPHA!r},"
                            f" got {raw.get('apiVersion')!r}")
            continue
        for doc in as_v1(raw, where, problems):
            _build_one(doc, path, where, index, problems)
    return index


def _build_one(doc: dict[str, Any], path: str, where: str, index: dict[str, dict[str, Loaded]],
               problems: list[str]) -> None:
    from opsctl.config import build
    from opsctl.slo import openslo_model as om

    kind = doc.get("kind")
    if not isinstance(kind, str) or kind not in om.DOCUMENTS:
        problems.append(f"{where}: kind: must be one of {', '.join(om.KINDS)}, got {kind!r}")
        return
    try:
        obj: Any = build(om.DOCUMENTS[kind], plain(doc), where)  # DOCUMENTS' models are made at import
    except ConfigError as exc:
        problems.extend(exc.problems)
        return
    name = obj.metadata.name
    if name in index[kind]:
        problems.append(f"{where}: metadata.name: {kind} {name!r} is also defined in {index[kind][name].file}")
        return
    index[kind][name] = Loaded(kind, name, obj, where, path)


def plain(value: Any) -> Any:
    """A document as the spec's own examples write it, in the types its models take: YAML
    timestamps (an unquoted `startTime: 2022-01-01 12:00:00`) as the text they were, and keys with
    no value (`alertPolicies:`) as absent, so an empty list is empty."""
    import datetime

    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, datetime.datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, datetime.date):
        return value.isoformat()
    return value


@dataclass(frozen=True)
class Context:
    """What the checks against the configuration need; None fields skip those checks."""

    period_seconds: int | None = None
    alerting: Any = None  # opsctl.config.AlertingConfig


def to_slo_generator(slo: Loaded, index: dict[str, dict[str, Loaded]], ctx: Context,
                     problems: list[str], notes: list[str] | None = None) -> tuple[dict[str, Any] | None, dict[str, str]]:
    """An SLO object -> (slo-generator document, its key paths -> the OpenSLO key paths they came from)."""
    spec: om.SloSpec = slo.obj.spec
    before = len(problems)
    notes = notes if notes is not None else []

    def bad(path: str, what: str) -> None:
        problems.append(f"{slo.file}: {path}: {what}")

    if spec.budgetingMethod != "Occurrences":
        bad("spec.budgetingMethod", f"{spec.budgetingMethod} counts good time slices, not good events; opsctl's"
            " budget and burn rates are over events: only Occurrences is supported")
    own = _check_window(spec, ctx, bad)
    if own is not None:  # its alert policies follow its own period
        ctx = Context(own, ctx.alerting)
    if len(spec.objectives) != 1:
        bad("spec.objectives", f"opsctl holds one objective per SLO, got {len(spec.objectives)}: write one SLO per objective")
    objective = spec.objectives[0]
    for key in ("timeSliceTarget", "timeSliceWindow"):
        if getattr(objective, key) is not None:
            bad(f"spec.objectives[0].{key}", "only for Timeslices budgeting, which opsctl does not support")
    sli_path, sli = "spec.indicator.spec", spec.indicator.spec if spec.indicator else None
    if spec.indicatorRef is not None:
        found = index["SLI"].get(spec.indicatorRef)
        if found is None:
            known = ", ".join(sorted(index["SLI"])) or "none"
            bad("spec.indicatorRef", f"no SLI named {spec.indicatorRef!r} in the files read (SLIs: {known})")
        else:
            sli, sli_path = found.obj.spec, f"spec.indicatorRef -> {found.file}: spec"
    _check_alert_policies(slo, index, ctx, bad)
    labels = {k: v for k, v in slo.obj.metadata.labels.items() if isinstance(v, str)}
    for key in ("backend", "service_name", "slo_name"):  # labels that carry meaning in opsctl: one value
        if key in slo.obj.metadata.labels and key not in labels:
            bad(f"metadata.labels.{key}", f"must be one string, got {slo.obj.metadata.labels[key]!r}")
    mapped = _map_sli(sli, objective, sli_path, index, bad, notes) if sli is not None else None
    if len(problems) > before or mapped is None:
        return None, {}
    method, indicator, paths = mapped
    if spec.service is not None:
        labels["service_name"] = spec.service
        paths["metadata.labels.service_name"] = "spec.service"
    document = {
        "apiVersion": "sre.google.com/v2",
        "kind": "ServiceLevelObjective",
        "metadata": {"name": slo.name, "labels": labels},
        "spec": {"description": spec.description, "backend": PROMETHEUS, "method": method,
                 "service_level_indicator": indicator, "goal": objective.goal},
    }
    paths.update({"spec.goal": "spec.objectives[0].target", "metadata.name": "metadata.name",
                  "metadata.labels.backend": "metadata.labels.backend"})
    return document, paths


def _check_window(spec: om.SloSpec, ctx: Context, bad: Bad) -> int | None:
    """The SLO's own rolling period in seconds (None: none given, the config's slos.period)."""
    from opsctl.slo import openslo_model as om

    if len(spec.timeWindow) > 1:
        bad("spec.timeWindow", "exactly one time window, per the spec")
    for i, window in enumerate(spec.timeWindow[:1]):
        where = f"spec.timeWindow[{i}]"
        if window.calendar is not None or window.isRolling is False:
            bad(where, "calendar-aligned windows are not supported: opsctl computes every SLO over a rolling period")
            continue
        try:
            seconds = om.shorthand_seconds(window.duration)
        except ValueError as exc:
            bad(f"{where}.duration", str(exc))
            continue
        if not 86400 <= seconds <= 400 * 86400:
            bad(f"{where}.duration", f"{window.duration}: a period must be between 1d and 400d")
            continue
        return seconds
    return None


def _source(metric: om.Metric, path: str, index: dict[str, dict[str, Loaded]], bad: Bad,
            notes: list[str] | None = None) -> str | None:
    """The PromQL of a Prometheus metric source, its DataSource reference resolved. An inline
    `type` beside a reference to no DataSource in the files read is the source (the spec's own
    examples write `metricSourceRef: thanos` with `type: Prometheus` and no DataSource)."""
    source = metric.metricSource
    spec = source.spec
    if spec is None:  # MetricSource refuses a source without its spec
        return None
    kind = source.type
    notes = notes if notes is not None else []
    if spec.dimensions:
        notes.append(f"{path}.metricSource.spec.dimensions ({', '.join(spec.dimensions)}) ignored:"
                     " the SLI is what the query answers (one series; sum by nothing)")
    if source.metricSourceRef is not None and kind is not None and source.metricSourceRef not in index["DataSource"]:
        notes.append(f"{path}.metricSource: no DataSource {source.metricSourceRef!r} in the files read;"
                     f" its inline type {kind} is used")
    elif source.metricSourceRef is not None:
        found = index["DataSource"].get(source.metricSourceRef)
        if found is None:
            known = ", ".join(sorted(index["DataSource"])) or "none"
            bad(f"{path}.metricSource.metricSourceRef",
                f"no DataSource named {source.metricSourceRef!r} in the files read (DataSources: {known})")
            return None
        if kind is not None and kind.lower() != found.obj.spec.type.lower():
            bad(f"{path}.metricSource.type", f"{kind!r} but DataSource {found.name!r} is of type {found.obj.spec.type!r}")
            return None
        kind = found.obj.spec.type
    if str(kind).lower() != PROMETHEUS:
        bad(f"{path}.metricSource.type", f"opsctl evaluates SLOs over PromQL: must be Prometheus, got {kind!r}")
        return None
    query = spec.query.strip()
    for template in TEMPLATE:  # OpenSLO's (and Sloth's) window template, as opsctl's `[window]` placeholder
        query = query.replace(f"[{template}", "[window")
    return query


def _map_sli(sli: om.SliSpec, objective: om.Objective, path: str, index: dict[str, dict[str, Loaded]], bad: Bad,
             notes: list[str]) -> tuple[str, dict[str, Any], dict[str, str]] | None:
    """-> (slo-generator method, its service_level_indicator, sg key path -> OpenSLO key path)."""
    sg = "spec.service_level_indicator"
    if sli.thresholdMetric is not None:
        query = _source(sli.thresholdMetric, f"{path}.thresholdMetric", index, bad, notes)
        if objective.op != "lte" or objective.value is None:
            bad("spec.objectives[0].op", "a thresholdMetric maps onto a histogram as `op: lte` with `value` the"
                f" bucket bound (good events are those at or under it), got op {objective.op!r}")
            return None
        if query is None:
            return None
        return "distribution_cut", {"expression": query, "threshold_bucket": objective.value}, {
            f"{sg}.expression": f"{path}.thresholdMetric.metricSource.spec.query",
            f"{sg}.threshold_bucket": "spec.objectives[0].value"}
    for key in ("op", "value"):
        if getattr(objective, key) is not None:
            bad(f"spec.objectives[0].{key}", "only with a thresholdMetric")
    ratio = sli.ratioMetric
    if ratio is None:  # SliSpec holds exactly one of thresholdMetric and ratioMetric
        return None
    rpath = f"{path}.ratioMetric"
    if ratio.raw is not None:
        query = _source(ratio.raw, f"{rpath}.raw", index, bad, notes)
        if query is None:
            return None
        expression = query if ratio.rawType == "success" else f"1 - ({query})"
        return "query_sli", {"expression": expression}, {f"{sg}.expression": f"{rpath}.raw.metricSource.spec.query"}
    counter = ratio.counter is True
    if not counter:
        bad(f"{rpath}.counter", "must be true: opsctl counts events as increases of counters"
            f" (got {ratio.counter!r}; a gauge sampled at instants has no event counts)")
    if ratio.total is None:  # RatioMetric holds raw, or total with good or bad
        return None
    total = _source(ratio.total, f"{rpath}.total", index, bad, notes)
    if ratio.good is not None:
        good = _source(ratio.good, f"{rpath}.good", index, bad, notes)
        if good is None or total is None or not counter:
            return None
        from opsctl.slo.model import PLACEHOLDER, _SELECTORISH, has_placeholder

        expressions = all(has_placeholder(q) and not _SELECTORISH.match(PLACEHOLDER.sub("", q)) for q in (good, total))
        operators: dict[str, Any] = {"operators": []} if expressions else {}  # each answers its window's number
        return "good_bad_ratio", {"filter_good": good, "filter_valid": total, **operators}, {
            f"{sg}.filter_good": f"{rpath}.good.metricSource.spec.query",
            f"{sg}.filter_valid": f"{rpath}.total.metricSource.spec.query"}
    if ratio.bad is None:
        return None
    bad_query = _source(ratio.bad, f"{rpath}.bad", index, bad, notes)
    if bad_query is None or total is None or not counter:
        return None
    from opsctl.slo.model import DEFAULT_OPERATORS, fmt_query

    # (total - bad) / total, each counted as slo-generator counts a filter: sum(increase(...)).
    b, t = fmt_query(bad_query, "window", DEFAULT_OPERATORS), fmt_query(total, "window", DEFAULT_OPERATORS)
    return "query_sli", {"expression": f"1 - (({b} or vector(0)) / {t})"}, {
        f"{sg}.expression": f"{rpath}.bad.metricSource.spec.query"}


def _check_alert_policies(slo: Loaded, index: dict[str, dict[str, Loaded]], ctx: Context, bad: Bad) -> None:
    from opsctl.slo import conventions as cv

    for i, entry in enumerate(slo.obj.spec.alertPolicies):
        where = f"spec.alertPolicies[{i}].spec"  # the policy's spec, inline or referenced
        policy = entry.spec
        if entry.alertPolicyRef is not None:
            found = index["AlertPolicy"].get(entry.alertPolicyRef)
            if found is None:
                bad(f"spec.alertPolicies[{i}].alertPolicyRef", f"no AlertPolicy named {entry.alertPolicyRef!r} in the files read")
                continue
            policy, where = found.obj.spec, f"spec.alertPolicies[{i}].alertPolicyRef -> {found.file}: spec"
        if policy.alertWhenNoData or policy.alertWhenResolved or not policy.alertWhenBreaching:
            bad(where, "opsctl's burn-rate alerts fire when breaching (alertWhenBreaching: true) and"
                " nothing else; alertWhenNoData and alertWhenResolved are not supported")
        condition_entry = policy.conditions[0]
        cpath = f"{where}.conditions[0].spec"  # the condition's spec, inline or referenced
        spec = condition_entry.spec
        if condition_entry.conditionRef is not None:
            found = index["AlertCondition"].get(condition_entry.conditionRef)
            if found is None:
                bad(f"{where}.conditions[0].conditionRef", f"no AlertCondition named {condition_entry.conditionRef!r} in the files read")
                continue
            spec, cpath = found.obj.spec, f"{where}.conditions[0].conditionRef -> {found.file}: spec"
        _check_condition(spec, cpath, ctx, bad, cv)


def _check_condition(spec: om.AlertConditionSpec, where: str, ctx: Context, bad: Bad, cv: ModuleType) -> None:
    from opsctl.slo import openslo_model as om

    cond = spec.condition
    pairs = [p for p in cv.ALERT_PAIRS if p.severity == spec.severity]
    if not pairs:
        bad(f"{where}.severity", f"opsctl's burn-rate alerts are page or ticket, got {spec.severity!r}")
        return
    if cond.op not in ("gt", "gte"):
        bad(f"{where}.condition.op", f"a burn-rate alert fires above its threshold: gt or gte, got {cond.op!r}")
    seconds = om.shorthand_seconds(cond.lookbackWindow)
    period = ctx.period_seconds
    long_of = {id(p): (p.windows(period)[:2] if period is not None else (p.long, cv.WINDOWS[p.long])) for p in pairs}
    pair = next((p for p in pairs if long_of[id(p)][1] == seconds), None)
    if pair is None:
        longs = ", ".join(long_of[id(p)][0] for p in pairs)
        bad(f"{where}.condition.lookbackWindow", f"{cond.lookbackWindow}: opsctl's {spec.severity} alerts look back"
            f" over {longs} (each paired with a short window); no other window is generated")
        return
    if ctx.period_seconds is None or ctx.alerting is None:
        return
    factor = pair.factor(ctx.period_seconds)
    if abs(cond.threshold - factor) > 5e-4 * factor:
        bad(f"{where}.condition.threshold", f"{cond.threshold:g}: opsctl's {spec.severity} alert over {long_of[id(pair)][0]}"
            f" fires at {cv.format_factor(factor)}x for this period (alerting is set in the config)")
    after = 0 if cond.alertAfter == "0m" else om.shorthand_seconds(cond.alertAfter)
    for_seconds = cv.scaled_for(ctx.alerting.severity(spec.severity).for_seconds, ctx.period_seconds)
    if after != for_seconds:
        bad(f"{where}.condition.alertAfter", f"{cond.alertAfter}: opsctl's {spec.severity} alerts wait"
            f" {for_seconds}s (alerting.{spec.severity}.for_duration in the config)")


def remap(problems: list[str], file: str, paths: dict[str, str]) -> list[str]:
    """Problems found on the translated document, named by the OpenSLO key paths they came from."""
    out = []
    for problem in problems:
        rest = problem[len(file) + 2:] if problem.startswith(f"{file}: ") else problem
        key, sep, what = rest.partition(": ")
        out.append(f"{file}: {paths.get(key, key)}: {what}" if sep else problem)
    return out


def load(docs: list[tuple[str, str, Any]], known: set[str], config: Config | None,
         problems: list[str]) -> list[SloDefinition]:
    """Raw OpenSLO documents (file, where, doc) -> SloDefinitions, every problem added to `problems`."""
    import dataclasses

    from opsctl.slo.model_parse import _validate

    ctx = Context(config.slos.period_seconds, config.alerting) if config is not None else Context()
    index = build_objects(docs, problems)
    out = []
    for loaded in index["SLO"].values():
        notes: list[str] = []
        document, paths = to_slo_generator(loaded, index, ctx, problems, notes)
        if document is None:
            continue
        found: list[str] = []
        slo = _validate(document, loaded.file, known, found)
        problems.extend(remap(found, loaded.file, paths))
        if slo:
            roles = (("good", "filter_good"), ("valid", "filter_valid"), ("bad", "filter_bad"), ("sli", "expression"))
            keys = tuple((role, paths[f"spec.service_level_indicator.{k}"]) for role, k in roles
                         if f"spec.service_level_indicator.{k}" in paths)  # messages name the OpenSLO keys
            out.append(dataclasses.replace(slo, file=loaded.path, source_format="openslo", keys=keys,
                                           notes=tuple(dict.fromkeys(notes)),
                                           period_seconds=_check_window(loaded.obj.spec, ctx, lambda *_: None)))
    return out
