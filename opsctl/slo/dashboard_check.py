"""Checks of a generated Grafana board: Grafana's schema, and the series every query reads.

`schema_problems` round-trips the board through grafana-foundation-sdk (Grafana's own generated
dashboard models, with the panel and Prometheus query plugins registered): every key the board
carries must come back with its value, so a misspelt or misplaced field, which the models drop, is
found. The only keys allowed to drop are those of `PLUGIN_KEYS`: options of the Prometheus data
source (annotation title/text formats, a variable's definition) that Grafana stores but the
dashboard schema leaves to the data source plugin.

`query_problems` finds every selector of every query (with opsctl's PromQL selector parser) and
checks that it names a series the generated rules record, a raw proxy metric, `ALERTS` or the drill
series opsctl exports (`dashboard_events`), and that
it carries a `service` matcher.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from opsctl.errors import UsageError
from opsctl.metrics import schema
from opsctl.metrics.promql import Selector, parse_selector
from opsctl.slo import conventions as cv
from opsctl.slo.dashboard_events import DRILL_SERIES

if TYPE_CHECKING:
    from opsctl.slo.dashboard import ServiceSlos

# Key paths (list indices dropped) the dashboard schema does not describe: Prometheus' own.
PLUGIN_KEYS = frozenset({
    "annotations/list/titleFormat", "annotations/list/textFormat", "annotations/list/step",
    "templating/list/definition",
})

RAW_METRICS = frozenset({schema.REQUESTS, schema.DURATION_BUCKET, schema.DURATION_COUNT, schema.DURATION_SUM,
                         schema.PROMPT_TOKENS, schema.COMPLETION_TOKENS, schema.SUGGESTIONS})
ALERTS = "ALERTS"
EXPORTED = frozenset({DRILL_SERIES})  # opsctl.slo.dashboard_events writes it


def _diff(ours: Any, theirs: Any, path: str, key: str, out: list[str]) -> None:
    if isinstance(ours, dict):
        if not isinstance(theirs, dict):
            out.append(f"{path}: not an object in Grafana's schema")
            return
        for k, v in ours.items():
            sub, subkey = f"{path}/{k}", f"{key}/{k}" if key else k
            if k not in theirs:
                if subkey not in PLUGIN_KEYS:
                    out.append(f"{sub}: not in Grafana's schema (dropped by the round-trip)")
            else:
                _diff(v, theirs[k], sub, subkey, out)
    elif isinstance(ours, list):
        if not isinstance(theirs, list) or len(ours) != len(theirs):
            out.append(f"{path}: list changed by the round-trip")
            return
        for i, (a, b) in enumerate(zip(ours, theirs)):
            _diff(a, b, f"{path}[{i}]", key, out)
    elif ours != theirs:
        out.append(f"{path}: {ours!r} came back as {theirs!r}")


def round_trip(doc: dict[str, Any]) -> dict[str, Any]:
    """The board read into grafana-foundation-sdk's Dashboard model and written back as JSON."""
    from grafana_foundation_sdk.cog.encoder import JSONEncoder
    from grafana_foundation_sdk.cog.plugins import register_default_plugins
    from grafana_foundation_sdk.models.dashboard import Dashboard

    register_default_plugins()
    board: dict[str, Any] = json.loads(JSONEncoder().encode(Dashboard.from_json(doc)))
    return board


def schema_problems(doc: dict[str, Any]) -> list[str]:
    out: list[str] = []
    _diff(doc, round_trip(doc), "", "", out)
    return out


# ---------------------------------------------------------------------------------------------
# Selectors inside PromQL

_KEYWORDS = frozenset({"by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool",
                       "and", "or", "unless", "inf", "nan"})
_AGGREGATIONS = frozenset({"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
                           "bottomk", "topk", "quantile", "limitk", "limit_ratio"})
_LABEL_LISTS = frozenset({"by", "without", "on", "ignoring", "group_left", "group_right"})
_TOKEN = re.compile(
    r'"(?:[^"\\]|\\.)*"'  # a string
    r"|\[[^\]]*\]"  # a range or subquery
    r"|\d+(?:\.\d+)?(?:[eE][+-]?\d+|(?:ms|[smhdwy])(?:\d+(?:ms|[smhdwy]))*)?"  # a number or duration
    r"|[A-Za-z_:][A-Za-z0-9_:]*|\S")


def selectors(expr: str) -> list[Selector]:
    """Every vector selector of a PromQL expression, each parsed by opsctl's selector parser.

    A name followed by `(` is a function or aggregation; a name after by/on/... opens a label list;
    a bare `{...}` selector (no metric name) is refused: the check could not say what it reads.
    """
    tokens = _TOKEN.findall(expr)
    found: list[Selector] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        low = tok.lower()
        if low in _LABEL_LISTS:
            i += 1
            if i < len(tokens) and tokens[i] == "(":
                while i < len(tokens) and tokens[i] != ")":
                    i += 1
            i += 1
            continue
        if low == "offset":
            i += 2  # the duration
            continue
        if tok == "{":
            raise UsageError(f"a selector with no metric name in {expr!r}")
        if re.fullmatch(r"[A-Za-z_:][A-Za-z0-9_:]*", tok) and low not in _KEYWORDS:
            following = tokens[i + 1].lower() if i + 1 < len(tokens) else ""
            if following == "(" or (low in _AGGREGATIONS and following in ("by", "without")):
                i += 1
                continue
            text = tok
            i += 1
            if i < len(tokens) and tokens[i] == "{":
                while i < len(tokens) and tokens[i] != "}":
                    text += tokens[i]
                    i += 1
                text += "}"
                i += 1
            found.append(parse_selector(text))
            continue
        i += 1
    return found


def query_problems(queries: Iterable[tuple[str, str]], recorded: set[str]) -> list[str]:
    """Each query's selectors must read a recorded series, a raw proxy metric or ALERTS, with a
    `service` matcher. `label_values(SELECTOR, label)` (a Grafana variable) is checked by its selector."""
    known = set(recorded) | RAW_METRICS | EXPORTED | {ALERTS}
    out: list[str] = []
    for where, expr in queries:
        m = re.fullmatch(r"\s*label_values\((.*),\s*[A-Za-z_][A-Za-z0-9_]*\s*\)\s*", expr, re.S)
        promql = m.group(1) if m else expr
        try:
            found = selectors(promql)
        except (UsageError, ValueError) as exc:
            out.append(f"{where}: {exc}")
            continue
        if not found and not re.fullmatch(r"\s*vector\([0-9.eE+-]+\)\s*", promql):  # a threshold line
            out.append(f"{where}: reads no series: {expr}")
        for s in found:
            if s.metric not in known:
                out.append(f"{where}: {s.metric} is neither recorded by the generated rules nor a proxy metric")
            if not any(mt.label == cv.LABEL_SERVICE for mt in s.matchers):
                out.append(f"{where}: {s.metric} is selected without a {cv.LABEL_SERVICE} matcher")
    return out


# ---------------------------------------------------------------------------------------------
# Boards for a list of services, checked


def recorded_series(entries: Sequence[ServiceSlos]) -> set[str]:
    """The series names the generated rules of these services record."""
    from opsctl.slo.rules import rule_groups

    return {r["record"] for e in entries for g in rule_groups(e.plans, e.settings) for r in g["rules"] if "record" in r}


def board_problems(doc: dict[str, Any], recorded: set[str]) -> list[str]:
    from opsctl.slo.dashboard import panel_queries

    return schema_problems(doc) + query_problems(panel_queries(doc), recorded)


def checked_boards(entries: Sequence[ServiceSlos], *, fleet: bool, uid: str | None = None) -> dict[str, dict[str, Any]]:
    """File name -> board: each service's board and, with `fleet`, the overview first; every board
    round-tripped through Grafana's schema and its queries checked (exit 1 naming the first problem)."""
    from opsctl.errors import OpsctlError
    from opsctl.slo.dashboard import dashboard, fleet_dashboard

    names = [e.service for e in entries]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise UsageError(f"service {', '.join(twice)} given twice", hint="give each service's config once")
    docs = [fleet_dashboard(entries, **({"uid": uid} if uid else {}))] if fleet else []
    docs += [dashboard(e.plans, e.settings, uid=None if fleet else uid) for e in entries]
    boards: dict[str, dict[str, Any]] = {}
    for doc in docs:
        if f"{doc['uid']}.json" in boards:
            raise UsageError(f"two dashboards would have the uid {doc['uid']!r}",
                             hint="the overview takes --uid; a service's board is opsctl-slo-<service>")
        boards[f"{doc['uid']}.json"] = doc
    recorded = recorded_series(entries)
    for name, doc in boards.items():
        problems = board_problems(doc, recorded)
        if problems:
            raise OpsctlError(f"dashboard {doc['uid']!r} fails its check ({len(problems)} problem(s)): {problems[0]}")
    return boards
