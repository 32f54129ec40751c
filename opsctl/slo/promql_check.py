"""Whether a query would load into Prometheus: parsed as PromQL before an SLO file is accepted.

The parser is `promql-parser` (GreptimeDB's Rust parser, maintained, imported only here and only
when a file is checked). It follows Prometheus 3's grammar, and opsctl's rules must load into
the Prometheus 2.42 the project tests against (`promtool check rules`), so three differences are
checked on top of it, each found by running both over the same queries
(tests/slo/test_promql_check.py holds them equal on a corpus):

- functions and aggregations: only Prometheus 2.42's (`holt_winters` is one, renamed in 3.0;
  `limitk`, `sort_by_label`, `info`, `mad_over_time`, ... are 3.x's);
- durations need their unit (`[300]` and `offset 300` are 3.x's);
- quoted (UTF-8) metric and label names (`{"a.b"="c"}`) are 3.x's.

A query also must answer an instant vector or a scalar: a range vector (`x[5m]`) parses, and
`promtool check rules` accepts it, but no rule can evaluate it.
"""

from __future__ import annotations

import re
from typing import Any

# Prometheus 2.42's functions (promql/parser/functions.go), as `promtool check rules` knows them.
FUNCTIONS = frozenset("""
abs absent absent_over_time acos acosh asin asinh atan atanh avg_over_time ceil changes clamp clamp_max
clamp_min cos cosh count_over_time day_of_month day_of_week day_of_year days_in_month deg delta deriv exp
floor histogram_count histogram_fraction histogram_quantile histogram_sum holt_winters hour idelta increase
irate label_join label_replace last_over_time ln log10 log2 max_over_time min_over_time minute month pi
predict_linear present_over_time quantile_over_time rad rate resets round scalar sgn sin sinh sort sort_desc
sqrt stddev_over_time stdvar_over_time sum_over_time tan tanh time timestamp vector year""".split())
AGGREGATIONS = frozenset("sum avg count min max group stddev stdvar topk bottomk count_values quantile".split())
VERSION = "Prometheus 2.42"

_TOKEN = re.compile(r"""
    (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)
  | (?P<comment>\#[^\n]*)
  | (?P<duration>[0-9]+(?:ms|[smhdwy])(?:[0-9]+(?:ms|[smhdwy]))*(?![A-Za-z0-9_.]))
  | (?P<number>0[xX][0-9a-fA-F]+|[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)
  | (?P<word>[A-Za-z_:][A-Za-z0-9_:]*)
  | (?P<space>\s+)
  | (?P<other>.)
""", re.X | re.S)
_registered = False


def _parser() -> Any:
    """promql_parser, with Prometheus 2.42's `holt_winters` known to it (once per process)."""
    global _registered
    try:
        import promql_parser
    except ImportError as exc:  # a dependency of opsctl (pyproject.toml): an install that lacks it is broken
        from opsctl.errors import OpsctlError

        raise OpsctlError("promql-parser is not installed: opsctl parses every SLO query with it",
                          hint="pip install 'promql-parser>=0.11,<0.12' (or reinstall opsctl)") from exc

    if not _registered:
        try:
            promql_parser.register_extra_functions([promql_parser.Function(
                "holt_winters", [promql_parser.ValueType.Matrix, promql_parser.ValueType.Scalar,
                                 promql_parser.ValueType.Scalar], promql_parser.ValueType.Vector)])
        except ValueError:  # a parser version that knows it already
            pass
        _registered = True
    return promql_parser


_MODIFIERS = frozenset("by without on ignoring group_left group_right bool and or unless atan2 offset start end".split())


def _lexical(query: str) -> str | None:
    """What Prometheus 3 writes that 2.42 does not read, in a query that parsed: unitless
    durations, quoted names, and functions or aggregations 2.42 lacks (a word before `(` that is no
    modifier is a call; a scan, about 6x faster than walking the parser's tree from Python)."""
    tokens = [(m.lastgroup, m.group()) for m in _TOKEN.finditer(query)]
    tokens = [t for t in tokens if t[0] not in ("space", "comment")]
    brackets = braces = 0
    unknown = [text for (kind, text), after in zip(tokens, tokens[1:]) if kind == "word" and after == ("other", "(")
               and text not in _MODIFIERS and text not in FUNCTIONS and text not in AGGREGATIONS]
    if unknown:
        return f"{', '.join(dict.fromkeys(unknown))}: not in {VERSION}'s PromQL (newer Prometheus only)"
    for i, (kind, text) in enumerate(tokens):
        before = tokens[i - 1] if i else ("", "")
        if kind == "other":
            brackets += {"[": 1, "]": -1}.get(text, 0)
            braces += {"{": 1, "}": -1}.get(text, 0)
        elif kind == "number" and (brackets > 0 or before == ("word", "offset")
                                   or (before == ("other", "-") and i > 1 and tokens[i - 2] == ("word", "offset"))):
            return f"duration {text!r} needs its unit (e.g. {text}s): unitless durations are Prometheus 3's"
        elif kind == "string" and braces > 0 and before[1] in ("{", ","):
            return f"quoted name {text} in a selector: quoted (UTF-8) names are Prometheus 3's"
    return None


def problem(query: str) -> str | None:
    """What is wrong with `query` as an SLI's query: what Prometheus refuses to load
    (`load_problem`), or an answer no rule evaluates; None when it is fine."""
    why, expr = _load(query)
    if why is not None:
        return why
    pq = _parser()
    while isinstance(expr, pq.ParenExpr):
        expr = expr.expr
    if isinstance(expr, (pq.MatrixSelector, pq.SubqueryExpr)):
        return "answers a range vector, which no rule can evaluate: aggregate it (e.g. sum(rate(...)))"
    if isinstance(expr, pq.StringLiteral):
        return "answers a string, not a number"
    return None


def load_problem(query: str) -> str | None:
    """What Prometheus (2.42's `promtool check rules`) refuses in `query`, in its parser's words; None: it loads."""
    return _load(query)[0]


def _load(query: str) -> tuple[str | None, Any]:
    pq = _parser()
    try:
        expr = pq.parse(query)
    except Exception as exc:  # the parser's ValueError (its message is Prometheus' own)
        return str(exc).strip() or "not PromQL", None
    if (why := _lexical(query)) is not None:
        return why, None
    return None, expr
