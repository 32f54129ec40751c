"""`opsctl slo convert`: an SLO as a slo-generator v2 file or an OpenSLO v1 file, same meaning.

Both directions start from the loaded `SloDefinition`, whose `document` is the slo-generator form
opsctl computes from (an OpenSLO file is translated to it on load, see opsctl.slo.openslo), so
what is written reads back to the same SLO: same selectors, goal, backend, service and method.

What has no counterpart is refused, never approximated: slo-generator's `filter_bad` (valid is
good + bad, while OpenSLO counts bad against a total) and `operators` other than the default
[increase, sum] have no OpenSLO v1 form with the same counts.
"""

from __future__ import annotations

import copy
from typing import Iterable

from opsctl.errors import ConfigError
from opsctl.slo.model import DEFAULT_OPERATORS, SloDefinition

FORMATS = ("openslo", "slo-generator")
# OpenSLO objects and fields that do not survive a trip through slo-generator's format.
OPENSLO_DROPPED = ("alertPolicies (opsctl's alerts come from the config's alerting:, and a loaded SLO's"
                   " conditions are among them)", "DataSource objects (the query is inlined)",
                   "displayName and annotations", "list-valued labels")


def convert(slos: Iterable[SloDefinition], to: str, period_seconds: int) -> list[tuple[SloDefinition, dict]]:
    """(SLO, document in format `to`) for each SLO; every SLO that cannot be converted is listed."""
    if to not in FORMATS:
        raise ConfigError(f"unknown SLO format {to!r} (known: {', '.join(FORMATS)})")
    problems: list[str] = []
    out = []
    for slo in slos:
        doc = to_openslo(slo, period_seconds, problems) if to == "openslo" else to_slo_generator(slo)
        if doc is not None:
            out.append((slo, doc))
    if problems:
        raise ConfigError(f"{len(problems)} SLO(s) cannot be written as {to}", problems=problems)
    return out


def to_slo_generator(slo: SloDefinition) -> dict:
    return copy.deepcopy(slo.document)


def _source(query: str) -> dict:
    return {"metricSource": {"type": "Prometheus", "spec": {"query": query}}}


def to_openslo(slo: SloDefinition, period_seconds: int, problems: list[str]) -> dict | None:
    from opsctl.slo.conventions import window_label

    spec = slo.document["spec"]
    sli = spec["service_level_indicator"]
    where = f"{slo.file}: spec.service_level_indicator"
    objective: dict = {}
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
    document: dict = {"apiVersion": "openslo/v1", "kind": "SLO",
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


def render(documents: Iterable[dict]) -> str:
    """YAML documents separated by `---`, keys in the order written."""
    import yaml

    return "---\n".join(yaml.safe_dump(d, sort_keys=False, allow_unicode=True, width=120) for d in documents)
