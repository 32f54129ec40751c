"""SLO files in slo-generator's v2 format -> validated SloDefinition objects.

The files slo-generator 2.6's Prometheus backend runs, run here: `good_bad_ratio` with
`filter_good` and `filter_valid` or `filter_bad`, each a selector or an expression with the
window placeholder, with optional `operators` (default [increase, sum]); `distribution_cut`
(`expression` selecting a histogram's buckets plus `threshold_bucket`); and `query_sli` (an
expression giving the SLI itself). Each window's PromQL is built exactly as slo-generator builds
it (`generator_queries`), except that opsctl adds `le` as a matcher every exporter spelling
matches (slo-generator appends `le="X"` textually: lost on a bare metric name, and `le="1"`
misses `"1.0"` buckets).

The window placeholder takes every form slo-generator's `_fmt_query` formats: it replaces the text
`[window` by `[<seconds>s`, so `[window]` is a range, `[window:]` and `[window:1m]` are
subqueries; a filter without it has the range appended, which only a selector survives.

Sloth and Pyrra files (opsctl.slo.sloth, opsctl.slo.pyrra) give SloDefinitions directly, in the
forms below: `counts` says what their expressions answer, `grouping` that an SLO is one SLI per
group of those labels (Pyrra's `grouping`), by design.

`metadata.labels.backend` (a configured backend, or `all` for the whole service) is optional:
an SLO without it is reported and alerted on and ties no traffic guard. `metadata.labels.
service_name` names the service in generated rules. Unknown keys and wrong types are refused with
their path by the typed models in opsctl.slo.model_schema (the toolkit's one engine); what PromQL
and slo-generator need of each value is checked here.

OpenSLO v1 files in the same dirs (`apiVersion: openslo/v1`) are translated to this document form
on load (opsctl.slo.openslo), so both formats give one `SloDefinition` and the same numbers.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, TypeVar

from opsctl.metrics.promql import parse_selector
from opsctl.slo.conventions import ALL_BACKENDS
from opsctl.slo.model_schema import SLI_MODELS, Metadata, Spec, typed

API_VERSION = "sre.google.com/v2"
KIND = "ServiceLevelObjective"

T = TypeVar("T")
Bad = Callable[[str, str], None]  # adds a problem: (the key it is at, what is wrong)


def given(value: T | None, what: str) -> T:
    """`value`, which the SLO's method guarantees (validated on load); a ValueError naming `what` if not."""
    if value is None:
        raise ValueError(f"{what} is not set")
    return value


@dataclass(frozen=True)
class SloDefinition:
    name: str
    backend: str | None  # a configured backend, "all", or None (ties no traffic guard)
    goal: float
    filter_good: str | None  # selector (or [window] expression) of good events; None for query_sli
    filter_valid: str | None  # of valid events; None with filter_bad or query_sli
    description: str
    file: str
    kind: str  # availability | latency
    threshold_seconds: float | None  # for latency SLOs: the `le` bound it selects
    document: dict[str, Any] = field(repr=False, compare=False, hash=False, default_factory=dict)
    method: str = "good_bad_ratio"
    filter_bad: str | None = None
    operators: tuple[str, ...] = ("increase", "sum")
    expression: str | None = None  # query_sli's expression (distribution_cut's is in filter_good)
    service_name: str | None = None
    source_format: str = "slo-generator"  # or openslo, sloth, pyrra: the format of `file`
    # What expression filters answer, where `operators` do not say (Sloth, Pyrra): "" as the
    # operators say; "increase": event counts over the window; "rate": events per second (times
    # the window's seconds, they are its events); "samples": a share of samples, no event counts.
    counts: str = ""
    grouping: tuple[str, ...] = ()  # one SLI per group of these labels (Pyrra's grouping)
    keys: tuple[tuple[str, str], ...] = ()  # role -> the key of `file` it came from, for messages
    notes: tuple[str, ...] = ()  # what a reader of the file must know (keys read and ignored)
    # The SLO's own period (OpenSLO timeWindow, Pyrra window), seconds; None: the config's slos.period.
    period_seconds: int | None = None

    def period_or(self, default: int) -> int:
        """Its own period, else `default` (slos.period): what its windows and factors follow."""
        return self.period_seconds or default

    @property
    def error_budget(self) -> float:
        return 1.0 - self.goal

    @property
    def counts_events(self) -> bool:
        """False for query_sli, which measures a ratio and no event counts."""
        return self.method != "query_sli"

    @property
    def counts_increases(self) -> bool:
        """Its queries answer event counts (increase, then sum), so count / seconds is a rate."""
        if self.counts:
            return self.counts_events and self.counts in ("increase", "rate")
        return self.counts_events and tuple(self.operators) == ("increase", "sum")

    def key_of(self, role: str) -> str:
        """The key of the SLO's file a role's query comes from."""
        default = {"sli": "expression", "good": "filter_good", "valid": "filter_valid", "bad": "filter_bad"}
        return dict(self.keys).get(role, f"spec.service_level_indicator.{default.get(role, role)}")

    def queries(self, window: str) -> dict[str, str]:
        """Role (good, valid, bad or sli) -> PromQL over `window` ('300s' or '5m'), as opsctl asks."""
        if self.method == "query_sli":
            return {"sli": fmt_query(given(self.expression, f"{self.name}: expression"), window, ())}
        operators = () if self.counts else self.operators
        out = {"good": fmt_query(given(self.filter_good, f"{self.name}: filter_good"), window, operators)}
        if self.filter_valid is not None:
            out["valid"] = fmt_query(self.filter_valid, window, operators)
        else:
            out["bad"] = fmt_query(given(self.filter_bad, f"{self.name}: filter_bad"), window, operators)
        if self.counts == "rate":  # events per second over the window, times its seconds: its events
            from opsctl.clock import parse_duration

            seconds = parse_duration(window)
            out = {role: f"(({q}) * {seconds})" for role, q in out.items()}
        return out

    def generator_queries(self, seconds: int) -> dict[str, str]:
        """Role -> the PromQL slo-generator itself builds for this window (see the module doc)."""
        if self.method != "distribution_cut":
            return self.queries(f"{seconds}s")
        sli = self.document["spec"]["service_level_indicator"]
        expression, bucket = str(sli["expression"]), sli["threshold_bucket"]
        good = fmt_query(expression, f"{seconds}s", DEFAULT_OPERATORS).replace("}", f', le="{bucket}"}}')
        valid = fmt_query(expression.replace("_bucket", "_count"), f"{seconds}s", DEFAULT_OPERATORS)
        return {"good": good, "valid": valid}

    def slo_generator_config(self) -> dict[str, Any]:
        """A private copy of the document for slo-generator, which mutates nothing but deserves no trust."""
        document = copy.deepcopy(self.document)
        document["spec"].setdefault("description", "")  # slo-generator's report needs one
        return document


PLACEHOLDER = re.compile(r"\[window(?::[0-9a-zA-Z]*)?\]")


def has_placeholder(text: str | None) -> bool:
    """Whether a filter or expression holds a window placeholder: `[window]`, `[window:]`, `[window:1m]`."""
    return text is not None and PLACEHOLDER.search(text) is not None


def fmt_query(query: str, window: str, operators: Iterable[str]) -> str:
    """slo-generator's `_fmt_query`: the window into its `[window]` placeholder (or appended),
    then each operator wrapped around the result in order."""
    query = query.strip()
    query = query.replace("[window", f"[{window}") if "[window" in query else f"{query}[{window}]"
    for operator in operators:
        query = f"{operator}({query})"
    return query


def percent_goal(value: Any) -> float:
    """An objective written as a percentage (Sloth's 99.9, Pyrra's "99.9") -> the goal as written:
    99.99 / 100 is 0.9998999999999999 in floats, 0.9999 in decimal."""
    from decimal import Decimal, InvalidOperation

    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"must be a percentage such as 99.9, got {value!r}")
    try:
        number = Decimal(str(value).strip())
    except InvalidOperation:
        raise ValueError(f"must be a percentage such as 99.9, got {value!r}") from None
    if not 0 < number < 100:
        raise ValueError(f"must be a percentage strictly between 0 and 100, got {value!r}")
    return float(number / 100)


def check_name(name: Any) -> str | None:
    """What is wrong with an SLO name opsctl puts in series labels and file names, or None."""
    if not isinstance(name, str) or not name or not all(c.isalnum() or c in "-_" for c in name):
        return f"must be a name of letters, digits, - and _, got {name!r}"
    return None


def check_backend(backend: Any, known: set[str]) -> str | None:
    """What is wrong with a `backend` label (a configured backend, or `all`), or None."""
    if backend is not None and (not isinstance(backend, str) or (backend != ALL_BACKENDS and backend not in known)):
        return f"unknown backend {backend!r} (known: {', '.join(sorted(known))}, {ALL_BACKENDS})"
    return None


def counts_from(slo: SloDefinition, answers: dict[str, float | None]) -> tuple[float | None, float | None]:
    """(good, valid) for the budget math from one window's answers by role.

    filter_bad: valid = good + bad, a missing bad series counting as none (as the rules'
    `or vector(0)` does). query_sli: the SLI as good out of 1 valid.
    """
    if "sli" in answers:
        sli = answers["sli"]
        return (None, None) if sli is None else (sli, 1.0)
    good = answers["good"]
    if "bad" in answers:
        if good is None:
            return None, None
        return good, good + (answers["bad"] or 0.0)
    return good, answers["valid"]



METHODS = ("good_bad_ratio", "distribution_cut", "query_sli")
DEFAULT_OPERATORS = ("increase", "sum")
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


_SELECTORISH = re.compile(r"^\s*[a-zA-Z_:][a-zA-Z0-9_:]*\s*(\{.*\})?\s*$", re.S)


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


_BUCKET_SELECTOR = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*_bucket)\s*(\{[^{}]*\})?")


def classify_expression(expression: str) -> tuple[str, float | None]:
    """An SLI expression's meaning: latency when it reads a histogram (its buckets, or a quantile
    of them), with the `le` bound its buckets select as threshold; availability otherwise."""
    latency = None
    for match in _BUCKET_SELECTOR.finditer(expression):
        kind, threshold = _classify(match.group(0))
        if kind == "latency":
            latency = latency if latency and latency[1] is not None else (kind, threshold)
    if latency:
        return latency
    if "histogram_quantile" in expression:
        return "latency", None
    return "availability", None


def _classify(filter_good: str) -> tuple[str, float | None]:
    """A latency SLO counts histogram buckets; its threshold is the `le` bound it selects."""
    bare = PLACEHOLDER.sub("", filter_good)
    if not _SELECTORISH.match(bare):
        return "availability", None
    try:
        selector = parse_selector(bare)
    except Exception:  # UsageError: an expression, not a selector
        return "availability", None
    if not selector.metric.endswith("_bucket"):
        return "availability", None
    for m in selector.matchers:
        if m.label == "le":
            number = re.match(r"[0-9]+(\.[0-9]*)?", m.value.replace("\\", ""))
            return "latency", float(number.group(0)) if number else None
    return "latency", None
