"""`opsctl slo convert`: an SLO as a slo-generator v2, OpenSLO v1, Sloth or Pyrra file, same meaning.

Both directions start from the loaded `SloDefinition`, whose `document` is the slo-generator form
opsctl computes from (an OpenSLO file is translated to it on load, see opsctl.slo.openslo), so
what is written reads back to the same SLO: same selectors, goal, backend, service and method.

What has no counterpart is refused, never approximated: slo-generator's `filter_bad` (valid is
good + bad, while OpenSLO counts bad against a total) and `operators` other than the default
[increase, sum] have no OpenSLO v1 form with the same counts.

Sloth (`version: prometheus/v1` service files, one per SLO): every ungrouped form maps exactly,
as `sli.events` (error = total - good, each query as opsctl asks it, the window as Sloth's
`{{.window}}`) or, for query_sli, `sli.raw` (error ratio = 1 - SLI). Sloth names an SLO
`<service>-<name>`: an SLO named with its service's prefix keeps its name on the way back.
Pyrra (`pyrra.dev/v1alpha1`): only a latency SLO over plain selectors (the buckets at one `le`
and their `_count`) maps exactly; Pyrra takes series selectors, not expressions, and its ratio
counts errors with a selector, which a good/valid SLO does not have. A grouped SLO has no
slo-generator, OpenSLO or Sloth form (each would sum the groups into one SLI). The file's own alert
switches (`SloDefinition.silenced`) are written as Sloth's `disable` and Pyrra's `burnrates`/`absent`;
slo-generator and OpenSLO have none, so a silenced SLO is refused for them (it would alert).
"""

from __future__ import annotations

import copy
from typing import Any, Iterable

from opsctl.errors import ConfigError
from opsctl.slo.model import DEFAULT_OPERATORS, SloDefinition

FORMATS = ("openslo", "slo-generator", "sloth", "pyrra")
# OpenSLO objects and fields that do not survive a trip through slo-generator's format.
OPENSLO_DROPPED = ("alertPolicies (opsctl's alerts come from the config's alerting:, and a loaded SLO's"
                   " conditions are among them)", "DataSource objects (the query is inlined)",
                   "displayName and annotations", "list-valued labels")


def convert(slos: Iterable[SloDefinition], to: str, period_seconds: int) -> list[tuple[SloDefinition, dict[str, Any]]]:
    """(SLO, document in format `to`) for each SLO; every SLO that cannot be converted is listed."""
    if to not in FORMATS:
        raise ConfigError(f"unknown SLO format {to!r} (known: {', '.join(FORMATS)})")
    problems: list[str] = []
    out = []
    for slo in slos:
        if slo.grouping and to != "pyrra":
            problems.append(f"{slo.file}: {slo.name}: one SLI per {', '.join(slo.grouping)} (a grouping) has no {to}"
                            " form: each would sum the groups into one SLI")
            continue
        if slo.silenced and to in ("openslo", "slo-generator"):
            problems.append(f"{slo.file}: {slo.name}: its file turns off its {', '.join(slo.silenced)} alerts, which"
                            f" {to} has no switch for: the converted SLO would alert (write it as sloth or pyrra)")
            continue
        if to == "openslo":
            doc = to_openslo(slo, slo.period_or(period_seconds), problems)
        elif to == "sloth":
            doc = to_sloth(slo, problems)
        elif to == "pyrra":
            doc = to_pyrra(slo, slo.period_or(period_seconds), problems)
        else:
            doc = to_slo_generator(slo)
        if doc is not None:
            out.append((slo, doc))
    if problems:
        raise ConfigError(f"{len(problems)} SLO(s) cannot be written as {to}", problems=problems)
    return out


def to_slo_generator(slo: SloDefinition) -> dict[str, Any]:
    return copy.deepcopy(slo.document)


def _source(query: str) -> dict[str, Any]:
    return {"metricSource": {"type": "Prometheus", "spec": {"query": query}}}


def to_openslo(slo: SloDefinition, period_seconds: int, problems: list[str]) -> dict[str, Any] | None:
    from opsctl.slo.conventions import window_label

    spec = slo.document["spec"]
    sli = spec["service_level_indicator"]
    where = f"{slo.file}: spec.service_level_indicator"
    objective: dict[str, Any] = {}
    if slo.method == "good_bad_ratio":
        if "filter_bad" in sli:
            problems.append(f"{where}.filter_bad: no OpenSLO v1 form has the same counts (here valid = good + bad;"
                            " OpenSLO counts bad against a total): write filter_valid to convert this SLO")
            return None
        if tuple(slo.operators) != DEFAULT_OPERATORS:
            problems.append(f"{where}.operators: {list(slo.operators)} has no OpenSLO v1 form (a counter's"
                            " events are counted as sum(increase(...))): only the default [increase, sum] converts")
            return None
        metric = {"ratioMetric": {"counter": True, "good": _source(sli["filter_good"]),
                                  "total": _source(sli["filter_valid"])}}
    elif slo.method == "distribution_cut":
        metric = {"thresholdMetric": _source(sli["expression"])}
        objective = {"op": "lte", "value": float(sli["threshold_bucket"])}
    else:  # query_sli: the SLI itself, a precomputed success ratio
        metric = {"ratioMetric": {"rawType": "success", "raw": _source(sli["expression"])}}
    meta = slo.document.get("metadata") or {}
    labels = {k: v for k, v in (meta.get("labels") or {}).items() if k != "service_name"}
    document: dict[str, Any] = {"apiVersion": "openslo/v1", "kind": "SLO",
                      "metadata": {"name": slo.name, **({"labels": labels} if labels else {})}, "spec": {}}
    body = document["spec"]
    if spec.get("description"):
        body["description"] = spec["description"]
    if slo.service_name:
        body["service"] = slo.service_name
    body["indicator"] = {"metadata": {"name": f"{slo.name}-sli"}, "spec": metric}
    body["budgetingMethod"] = "Occurrences"
    body["timeWindow"] = [{"duration": window_label(period_seconds), "isRolling": True}]
    body["objectives"] = [{**objective, "target": slo.goal}]
    return document


SLOTH_WINDOW = "{{.window}}"


def to_sloth(slo: SloDefinition, problems: list[str]) -> dict[str, Any] | None:
    """A Sloth service file holding the SLO; every ungrouped form maps exactly."""
    from decimal import Decimal

    from opsctl.slo.model import fmt_query, given

    service = slo.service_name or "opsctl"
    sli: dict[str, dict[str, str]]
    if slo.method == "query_sli":
        expression = given(slo.expression, f"{slo.name}: expression")
        sli = {"raw": {"error_ratio_query": f"1 - ({fmt_query(expression, SLOTH_WINDOW, ())})"}}
    else:
        if slo.counts == "rate":  # Sloth's own rates, as written (filter_good and filter_valid): no need to scale a ratio
            good = fmt_query(given(slo.filter_good, f"{slo.name}: filter_good"), SLOTH_WINDOW, ())
            valid = fmt_query(given(slo.filter_valid, f"{slo.name}: filter_valid"), SLOTH_WINDOW, ())
        else:
            q = slo.queries(SLOTH_WINDOW)
            good = q["good"]
            valid = q["valid"] if "valid" in q else f"{q['good']} + ({q['bad']} or {q['good']} * 0)"
        sli = {"events": {"error_query": f"({valid}) - (({good}) or ({valid}) * 0)", "total_query": valid}}
    name = slo.name[len(service) + 1:] if slo.name.startswith(f"{service}-") else slo.name
    entry: dict[str, Any] = {"name": name, "objective": float(Decimal(repr(slo.goal)) * 100)}
    if slo.description:
        entry["description"] = slo.description
    if slo.backend:
        entry["labels"] = {"backend": slo.backend}
    entry["sli"] = sli
    entry["alerting"] = {"name": "Slo" + "".join(p.capitalize() for p in slo.name.replace("_", "-").split("-") if p)}
    if "absent" in slo.silenced:
        problems.append(f"{slo.file}: {slo.name}: its absent alert is off, which Sloth has no switch for")
        return None
    for severity in ("page", "ticket"):  # the file's own switches, as Sloth writes them
        if not slo.alerts_on(severity):
            entry["alerting"][f"{severity}_alert"] = {"disable": True}
    return {"version": "prometheus/v1", "service": service, "slos": [entry]}


def to_pyrra(slo: SloDefinition, period_seconds: int, problems: list[str]) -> dict[str, Any] | None:
    """A Pyrra ServiceLevelObjective: a latency SLO over plain selectors (see the module doc)."""
    from decimal import Decimal

    from opsctl.metrics.promql import parse_selector
    from opsctl.slo.conventions import window_label
    from opsctl.slo.model import has_placeholder

    plain = (slo.kind == "latency" and slo.method != "query_sli" and slo.filter_valid is not None
             and not has_placeholder(slo.filter_good) and not has_placeholder(slo.filter_valid)
             and not slo.counts and tuple(slo.operators) == DEFAULT_OPERATORS)
    if not plain:
        problems.append(f"{slo.file}: {slo.name}: Pyrra takes series selectors: only a latency SLO over a histogram's"
                        " buckets and its _count maps exactly (its ratio counts errors with a selector, which this"
                        " SLO does not have)")
        return None
    try:
        parse_selector(slo.filter_good or ""), parse_selector(slo.filter_valid or "")
    except Exception as exc:  # UsageError (filter_valid is set: `plain` above)
        problems.append(f"{slo.file}: {slo.name}: {exc}")
        return None
    labels = {"backend": slo.backend} if slo.backend else {}
    if slo.service_name:
        labels["service_name"] = slo.service_name
    spec: dict[str, Any] = {"target": str(Decimal(repr(slo.goal)) * 100).rstrip("0").rstrip("."),
                            "window": window_label(period_seconds)}
    if slo.description:
        spec["description"] = slo.description
    spec["indicator"] = {"latency": {"success": {"metric": slo.filter_good}, "total": {"metric": slo.filter_valid}}}
    if slo.alerts_on("page") != slo.alerts_on("ticket"):
        problems.append(f"{slo.file}: {slo.name}: only its {'page' if slo.alerts_on('page') else 'ticket'} alerts"
                        " are on, which Pyrra has no switch for (burnrates turns both off)")
        return None
    switches = {**({"burnrates": False} if not slo.alerts_on("page") else {}),
                **({"absent": False} if not slo.alerts_on("absent") else {})}
    if switches:
        spec["alerting"] = switches
    return {"apiVersion": "pyrra.dev/v1alpha1", "kind": "ServiceLevelObjective",
            "metadata": {"name": slo.name, **({"labels": labels} if labels else {})}, "spec": spec}


def render(documents: Iterable[dict[str, Any]]) -> str:
    """YAML documents separated by `---`, keys in the order written."""
    import yaml

    return "---\n".join(yaml.safe_dump(d, sort_keys=False, allow_unicode=True, width=120) for d in documents)
