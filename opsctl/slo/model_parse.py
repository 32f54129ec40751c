"""slo-generator v2 documents -> SloDefinition (opsctl.slo.model): the document's keys checked, and
each SLI method's parser (`good_bad_ratio`, `distribution_cut`, `query_sli`) with the forms the
module doc of opsctl.slo.model describes.

`metadata.labels.backend` (a configured backend, or `all` for the whole service) is optional:
an SLO without it is reported and alerted on and ties no traffic guard. `metadata.labels.
service_name` is optional: the service in generated rules is the config's `service:`, and a file
naming another is refused by `slo validate` (opsctl.slo.service_matcher). Unknown keys and wrong types are refused with
their path by the typed models in opsctl.slo.model_schema (the toolkit's one engine); what PromQL
and slo-generator need of each value is checked here.
"""

from __future__ import annotations

import re
from typing import Any

from opsctl.metrics.promql import parse_selector
from opsctl.slo.conventions import ALL_BACKENDS
from opsctl.slo.model import (
    API_VERSION,
    DEFAULT_OPERATORS,
    KIND,
    PLACEHOLDER,
    _SELECTORISH,
    Bad,
    SloDefinition,
    _classify,
    classify_expression,
    has_placeholder,
)
from opsctl.slo.model_schema import SLI_MODELS, Metadata, Spec, typed


METHODS = ("good_bad_ratio", "distribution_cut", "query_sli")
_OPERATOR = re.compile(r"^[a-z_][a-z0-9_]*$")


def _validate(doc: Any, file: str, known: set[str], problems: list[str]) -> SloDefinition | None:
    before = len(problems)

    def bad(where: str, what: str) -> None:
        problems.append(f"{file}: {where}: {what}")

    if not isinstance(doc, dict):
        bad("(top level)", "an SLO file must be a mapping")
        return None
    if doc.get("apiVersion") != API_VERSION:
        bad("apiVersion", f"must be {API_VERSION!r}, got {doc.get('apiVersion')!r}")
    if doc.get("kind") != KIND:
        bad("kind", f"must be {KIND!r}, got {doc.get('kind')!r}")
    for key in sorted(set(doc) - {"apiVersion", "kind", "metadata", "spec"}, key=str):
        bad(str(key), "unknown key (an SLO file holds apiVersion, kind, metadata and spec)")
    raw_meta = doc.get("metadata")
    meta: dict[Any, Any] = raw_meta if isinstance(raw_meta, dict) else {}
    if not isinstance(raw_meta, dict):
        bad("metadata", "missing or not a mapping")
    else:
        typed(Metadata, meta, "metadata", file, problems)
    name = meta.get("name")
    if not isinstance(name, str) or not name or not all(c.isalnum() or c in "-_" for c in name):
        bad("metadata.name", f"must be a name of letters, digits, - and _, got {name!r}")
    raw_labels = meta.get("labels")
    labels: dict[Any, Any] = raw_labels if isinstance(raw_labels, dict) else {}
    backend = labels.get("backend")
    if backend is not None and (not isinstance(backend, str) or (backend != ALL_BACKENDS and backend not in known)):
        bad("metadata.labels.backend", f"unknown backend {backend!r} (known: {', '.join(sorted(known))}, {ALL_BACKENDS})")
    service_name = labels.get("service_name")
    if service_name is not None and (not isinstance(service_name, str) or not service_name.strip()):
        bad("metadata.labels.service_name", f"must be a non-empty string, got {service_name!r}")
        service_name = None
    spec = doc.get("spec") if isinstance(doc.get("spec"), dict) else None
    if spec is None:
        bad("spec", "missing or not a mapping")
        return None
    typed(Spec, spec, "spec", file, problems)
    if spec.get("backend") != "prometheus":
        bad("spec.backend", f"opsctl evaluates SLOs over PromQL: must be 'prometheus', got {spec.get('backend')!r}")
    method = spec.get("method")
    if method not in METHODS:
        bad("spec.method", f"must be one of {', '.join(METHODS)}, got {method!r}")
    goal = spec.get("goal")
    if isinstance(goal, bool) or not isinstance(goal, (int, float)) or not 0 < goal < 1:
        bad("spec.goal", f"must be a number strictly between 0 and 1 (e.g. 0.9999), got {goal!r}")
        goal = None
    sli = spec.get("service_level_indicator") if isinstance(spec.get("service_level_indicator"), dict) else None
    parsed: dict[str, Any] | None = None
    if sli is None:
        bad("spec.service_level_indicator", "missing or not a mapping")
    elif method in METHODS:
        typed(SLI_MODELS[method], sli, "spec.service_level_indicator", file, problems)
        parsed = _PARSERS[method](sli, lambda key, what: bad(f"spec.service_level_indicator.{key}", what))
    if len(problems) > before or parsed is None or not isinstance(name, str) or goal is None:
        return None  # each of these added a problem above
    return SloDefinition(
        name=name,
        backend=backend,
        goal=float(goal),
        filter_good=parsed.get("good"),
        filter_valid=parsed.get("valid"),
        description=str(spec.get("description", "")),
        file=file,
        kind=parsed["kind"],
        threshold_seconds=parsed.get("threshold"),
        document=doc,
        method=method,
        filter_bad=parsed.get("bad"),
        operators=parsed.get("operators", DEFAULT_OPERATORS),
        expression=parsed.get("expression"),
        service_name=service_name,
    )


def _filter(value: Any, key: str, bad: Bad, *, required: bool = True) -> str | None:
    """A filter as slo-generator takes it: a selector, optionally with a `[window]` placeholder."""
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        bad(key, "missing: a PromQL series selector" if value is None else f"must be a PromQL string, got {value!r}")
        return None
    text = value.strip()
    if text.count("[window") != len(PLACEHOLDER.findall(text)):
        bad(key, "the window placeholder is written `[window]` (a range) or `[window:]` / `[window:1m]` (a subquery)")
        return None
    bare = PLACEHOLDER.sub("", text)
    if _SELECTORISH.match(bare) and "[window:" not in text:
        try:
            parse_selector(bare)
        except Exception as exc:  # UsageError from the parser
            bad(key, str(exc))
            return None
    elif not has_placeholder(text):
        bad(key, "an expression other than a selector needs the `[window]` placeholder where the range goes")
        return None
    return text


def _parse_ratio(sli: dict[str, Any], bad: Bad) -> dict[str, Any] | None:
    good = _filter(sli.get("filter_good"), "filter_good", bad)
    valid = _filter(sli.get("filter_valid"), "filter_valid", bad, required=False)
    bad_filter = _filter(sli.get("filter_bad"), "filter_bad", bad, required=False)
    if "filter_valid" in sli and "filter_bad" in sli:
        bad("filter_bad", "give filter_valid or filter_bad, not both")
        return None
    if "filter_valid" not in sli and "filter_bad" not in sli:
        bad("filter_valid", "missing: give filter_valid (all valid events) or filter_bad (the bad ones)")
        return None
    operators = sli.get("operators", list(DEFAULT_OPERATORS))
    expressions = all(has_placeholder(f) and not _SELECTORISH.match(PLACEHOLDER.sub("", f))
                      for f in (good, valid, bad_filter) if f is not None)
    if operators == [] and not expressions:
        bad("operators", "an empty list leaves a selector's range vector unaggregated: only for expressions"
            " that hold the `[window]` placeholder and answer one number")
        return None
    if (not isinstance(operators, list) or (not operators and not expressions)
            or not all(isinstance(o, str) and _OPERATOR.match(o) for o in operators)):
        bad("operators", f"must be a list of PromQL function names, e.g. [increase, sum], got {operators!r}")
        return None
    if good is None or (valid is None and bad_filter is None):
        return None
    kind, threshold = _classify(good) if _SELECTORISH.match(PLACEHOLDER.sub("", good)) else classify_expression(good)
    return {"good": good, "valid": valid, "bad": bad_filter, "operators": tuple(operators), "kind": kind,
            "threshold": threshold}


def _parse_distribution(sli: dict[str, Any], bad: Bad) -> dict[str, Any] | None:
    expression = sli.get("expression")
    threshold = sli.get("threshold_bucket")
    ok = True
    if not isinstance(expression, str) or not _SELECTORISH.match(expression or ""):
        bad("expression", f"must be a histogram bucket selector (e.g. my_latency_seconds_bucket{{job=\"x\"}}), got {expression!r}")
        ok = False
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float, str)):
        bad("threshold_bucket", f"must be a bucket bound such as 0.5, got {threshold!r}")
        return None
    if sli.get("good_below_threshold", True) is not True:
        bad("good_below_threshold", "only good_below_threshold: true (the default) is supported")
        ok = False
    if not ok or not isinstance(expression, str):
        return None
    try:
        selector = parse_selector(expression)
        bound = float(threshold)
    except Exception as exc:
        bad("expression" if not isinstance(exc, ValueError) else "threshold_bucket", str(exc))
        return None
    if not selector.metric.endswith("_bucket"):
        bad("expression", f"must select a histogram's `_bucket` series, got {selector.metric!r}")
        return None
    if any(m.label == "le" for m in selector.matchers):
        bad("expression", "must not match `le`: threshold_bucket names the bucket")
        return None
    if not (bound > 0 and bound != float("inf")):
        bad("threshold_bucket", f"must be a finite positive bucket bound, got {threshold!r}")
        return None
    from opsctl.metrics.promql import Matcher, Selector, format_selector, le_regex

    good = format_selector(Selector(selector.metric, selector.matchers + (Matcher("le", "=~", le_regex(bound)),)))
    valid = format_selector(Selector(selector.metric[: -len("_bucket")] + "_count", selector.matchers))
    return {"good": good, "valid": valid, "kind": "latency", "threshold": bound}


def _parse_query_sli(sli: dict[str, Any], bad: Bad) -> dict[str, Any] | None:
    expression = sli.get("expression")
    if not isinstance(expression, str) or not expression.strip():
        bad("expression", "missing: a PromQL expression giving the SLI (0-1), with `[window]` where the range goes")
        return None
    if expression.count("[window") != len(PLACEHOLDER.findall(expression)):
        bad("expression", "the window placeholder is written `[window]` (a range) or `[window:]` / `[window:1m]` (a subquery)")
        return None
    if not has_placeholder(expression):
        bad("expression", "needs the `[window]` (or `[window:]`) placeholder so each window measures its own span")
        return None
    kind, threshold = classify_expression(expression)
    return {"expression": expression.strip(), "kind": kind, "threshold": threshold}


_PARSERS = {"good_bad_ratio": _parse_ratio, "distribution_cut": _parse_distribution, "query_sli": _parse_query_sli}
