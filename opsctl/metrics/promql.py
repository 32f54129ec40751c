"""The small part of PromQL opsctl itself writes: selectors and `sum(increase(sel[Ns]))`.

The embedded store answers only these forms; anything else is a clear error, not a guess.
Regex matchers use RE2 (the `google-re2` package), the engine and syntax Prometheus uses, fully
anchored as Prometheus anchors them: `[[:digit:]]` and `\\p{L}` mean what they mean there, and a
backreference, which RE2 has not, is refused as Prometheus refuses it.
"""

from __future__ import annotations

import functools
import re

from opsctl.errors import UsageError
from opsctl.model import Model

_MATCHER = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*(,|$)')
_SELECTOR = re.compile(r"^\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(?:\{(.*)\})?\s*$", re.S)
_RANGE_CALL = re.compile(r"^\s*(sum\s*\(\s*)?(increase|rate)\s*\(\s*(.+?)\s*\[(\d+)s\]\s*\)\s*(\))?\s*$", re.S)


class Matcher(Model):
    label: str
    op: str
    value: str

    def matches(self, actual: str) -> bool:
        if self.op == "=":
            return actual == self.value
        if self.op == "!=":
            return actual != self.value
        full = _re2(self.value).fullmatch(actual) is not None
        return full if self.op == "=~" else not full


@functools.lru_cache(maxsize=1024)
def _re2(pattern: str):
    """The pattern compiled by RE2 with Go's defaults (Perl classes, no dot-newline)."""
    import re2

    options = re2.Options()
    options.log_errors = False
    return re2.compile(pattern, options)


class Selector(Model):
    metric: str
    matchers: tuple[Matcher, ...]

    def label_matches(self, labels: dict[str, str]) -> bool:
        """Prometheus semantics: a label the series lacks has the empty value."""
        return all(m.matches(labels.get(m.label, "")) for m in self.matchers)


class RangeQuery(Model):
    function: str  # increase | rate
    selector: Selector
    window: int
    summed: bool


def _unescape(value: str) -> str:
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), value)


def parse_selector(text: str) -> Selector:
    match = _SELECTOR.match(text)
    if not match:
        raise UsageError(f"not a PromQL series selector: {text!r}")
    metric, body = match.group(1), (match.group(2) or "").strip()
    matchers = []
    pos = 0
    while pos < len(body):
        m = _MATCHER.match(body, pos)
        if not m:
            raise UsageError(f"cannot parse label matchers in {text!r} near {body[pos:pos + 20]!r}")
        label, op, value = m.group(1), m.group(2), _unescape(m.group(3))
        if op in ("=~", "!~"):
            try:
                _re2(value)
            except Exception as exc:  # re2.error
                reason = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else exc
                raise UsageError(f"invalid regular expression {value!r} in {text!r} (RE2 syntax): {reason}") from exc
        matchers.append(Matcher(label, op, value))
        pos = m.end()
    return Selector(metric, tuple(matchers))


def parse_range_query(expr: str) -> RangeQuery:
    match = _RANGE_CALL.match(expr)
    if not match or bool(match.group(1)) != bool(match.group(5)):
        raise UsageError(
            f"the embedded store answers only sum(increase(SELECTOR[Ns])) and sum(rate(...)), not {expr!r}",
            hint="use a Prometheus source for other PromQL",
        )
    return RangeQuery(match.group(2), parse_selector(match.group(3)), int(match.group(4)), bool(match.group(1)))


def increase_query(selector: str, window_seconds: int) -> str:
    """The exact string slo-generator's Prometheus backend builds for good_bad_ratio."""
    query = selector.strip()
    query = query.replace("[window", f"[{window_seconds}s") if "[window" in query else f"{query}[{window_seconds}s]"
    return f"sum(increase({query}))"


def le_regex(bound: float) -> str:
    """A regex matching every spelling exporters use for a bucket bound: 1 -> '1(\\.0*)?', 0.5 -> '0\\.50*'."""
    text = f"{bound:.9f}".rstrip("0").rstrip(".")
    return re.escape(text) + "0*" if "." in text else text + r"(\.0*)?"


def format_selector(selector: Selector) -> str:
    def quote(value: str) -> str:
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'

    body = ",".join(f"{m.label}{m.op}{quote(m.value)}" for m in selector.matchers)
    return f"{selector.metric}{{{body}}}" if body else selector.metric


# Words that are not metric names where an identifier may stand in PromQL.
_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset", "and", "or",
             "unless", "inf", "nan", "start", "end",
             # aggregations, which may take `by (...)` before their parentheses
             "sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values", "bottomk", "topk",
             "quantile", "limitk", "limit_ratio"}
_LABEL_LISTS = {"by", "without", "on", "ignoring", "group_left", "group_right"}


def selectors_in(expr: str) -> list[Selector]:
    """Every vector selector of a PromQL expression (`rate(a{x="1"}[5m]) / b` -> a{x="1"}, b), in
    order; a selector without a metric name (`{__name__="a"}`) has metric "". Strings, range and
    subquery brackets, label lists (`by (...)`, `on (...)`), function names, keywords and numbers
    are skipped. A lexer, not a full parser: it finds what a selector check must look at."""
    out: list[Selector] = []
    i, n = 0, len(expr)

    def skip_string(j: int) -> int:
        quote = expr[j]
        j += 1
        while j < n and expr[j] != quote:
            j += 2 if expr[j] == "\\" and quote != "`" else 1
        return j + 1

    def braces_end(j: int) -> int:  # expr[j] == "{": the index after its "}"
        while j < n and expr[j] != "}":
            j = skip_string(j) if expr[j] in "\"'`" else j + 1
        return j + 1

    while i < n:
        c = expr[i]
        if c in "\"'`":
            i = skip_string(i)
        elif c == "[":
            i = expr.find("]", i) + 1 or n
        elif c == "#":
            i = expr.find("\n", i) + 1 or n
        elif c == "{":
            end = braces_end(i)
            selector = parse_selector("x" + expr[i:end])
            out.append(Selector("", selector.matchers))
            i = end
        elif c.isdigit() or (c == "." and i + 1 < n and expr[i + 1].isdigit()):
            while i < n and (expr[i].isalnum() or expr[i] in "._"):
                i += 1  # 5m, 1e3, 0x1f, 1.5
        elif c.isalpha() or c in "_:":
            start = i
            while i < n and (expr[i].isalnum() or expr[i] in "_:"):
                i += 1
            word = expr[start:i]
            j = i
            while j < n and expr[j].isspace():
                j += 1
            if word.lower() in _LABEL_LISTS:
                if j < n and expr[j] == "(":
                    i = expr.find(")", j) + 1 or n
                continue
            if word.lower() in _KEYWORDS or (j < n and expr[j] == "("):
                continue  # a keyword or a function name
            if j < n and expr[j] == "{":
                end = braces_end(j)
                out.append(parse_selector(word + expr[j:end]))
                i = end
            else:
                out.append(Selector(word, ()))
        else:
            i += 1
    return out
