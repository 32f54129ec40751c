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

OpenSLO v1 files in the same dirs (`apiVersion: openslo/v1`) are translated to this document form
on load (opsctl.slo.openslo), so both formats give one `SloDefinition` and the same numbers. The
documents are read and checked by opsctl.slo.model_parse.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, TypeVar

from opsctl.metrics.promql import parse_selector
from opsctl.slo.conventions import ALL_BACKENDS

API_VERSION = "sre.google.com/v2"
KIND = "ServiceLevelObjective"
DEFAULT_OPERATORS = ("increase", "sum")

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
    # The alerts its own file turns off, recording rules kept: "page" (with the fast tier), "ticket"
    # (Sloth's page_alert/ticket_alert.disable, Pyrra's alerting.disabled or burnrates: false) and
    # "absent" (Pyrra's alerting.absent: false).
    silenced: tuple[str, ...] = ()

    def alerts_on(self, severity: str) -> bool:
        """Whether the SLO's file lets opsctl generate its alerts of `severity` (page, ticket, absent)."""
        return severity not in self.silenced

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

    def broken(self, good: float | None, valid: float | None) -> str | None:
        """Why (good, valid) over a window cannot be this SLI's counts, naming its queries (bad
        events above the total, good above valid: two queries counting different things), or None.
        Within 0.1% (and one event) is the extrapolation of increase() over two series, not broken."""
        if good is None or valid is None:
            return None
        if self.method == "query_sli":
            if -1e-3 <= good <= 1 + 1e-3:
                return None
            return (f"broken SLI: {self.key_of('sli')} answers {1 - good:g} as the error ratio, outside 0-1"
                    f" (the SLI {good:g}): its queries count different things")
        slack = 1e-3 * abs(valid) + 1.0
        if self.filter_bad is not None or good < -slack:
            if valid - good <= valid + slack:
                return None
            bad = self.filter_bad or "the bad events"
            return (f"broken SLI: bad events ({self.key_of('bad')}: {bad}) count {valid - good:.6g}, more than the"
                    f" total ({self.key_of('valid')}: {self.filter_valid}) {valid:.6g}: the two count different things")
        if good <= valid + slack:
            return None
        return (f"broken SLI: good events ({self.key_of('good')}: {self.filter_good}) count {good:.6g}, more than"
                f" the valid ({self.key_of('valid')}: {self.filter_valid}) {valid:.6g}: the two count different things")

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


_SELECTORISH = re.compile(r"^\s*[a-zA-Z_:][a-zA-Z0-9_:]*\s*(\{.*\})?\s*$", re.S)
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
