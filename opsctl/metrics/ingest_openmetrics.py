"""Parse OpenMetrics text (or the Prometheus text format with timestamps in seconds) into per-step
increments: each series' first sample is its baseline (as in Prometheus' `increase()`), each later
sample adds its increase (the new value after a counter reset) to the step ending at or after it;
series that differ only in other labels add up into one backend. Every problem of every line is
reported (`ingest.Problems`), not only the first.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Iterable

from opsctl.metrics import schema
from opsctl.metrics.ingested import (
    COLUMN_INDEX, MAX_SECONDS, METRICS, STEP, BackendSteps, Ingested, Problems, check_time, read_lines,
)

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\\n]|\\.)*)"\s*(,|\})')
_LE_BY_VALUE = {float(le): i for i, le in enumerate(schema.LE_LABELS)}


def _unescape(value: str) -> str:
    if "\\" not in value:
        return value
    return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), value)


def _parse_sample(line: str) -> tuple[str, dict[str, str], str] | str:
    """'name{labels} value ts' -> (name, labels, rest) or an error message."""
    match = _NAME.match(line)
    if not match:
        return "not a metric sample"
    name, pos = match.group(0), match.end()
    labels: dict[str, str] = {}
    if pos < len(line) and line[pos] == "{":
        pos += 1
        if line[pos:pos + 1] == "}":
            pos += 1
        else:
            while True:
                m = _LABEL.match(line, pos)
                if not m:
                    return f"cannot parse the labels near {line[pos:pos + 30]!r}"
                if m.group(1) in labels:
                    return f"label {m.group(1)!r} given twice"
                labels[m.group(1)] = _unescape(m.group(2))
                pos = m.end()
                if m.group(3) == "}":
                    break
                if line[pos:pos + 1] == "}":  # trailing comma
                    pos += 1
                    break
    return name, labels, line[pos:]


class _Series:
    """One OpenMetrics series' samples, and where they go in the store."""

    __slots__ = ("backend", "column", "times", "values", "lines")

    def __init__(self, backend: str, column: int):
        self.backend, self.column = backend, column
        self.times: list[float] = []
        self.values: list[float] = []
        self.lines: list[int] = []


def _resolve(name: str, labels: dict[str, str], backends: set[str]) -> tuple[str, int] | str | None:
    """(backend, column index) for a schema series, None for another metric, or the problem."""
    columns = schema.series_columns(name) if name in METRICS else None
    if columns is None:
        return None
    backend = labels.get("backend")
    if backend is None:
        return f"{name} sample without a backend label"
    if backend not in backends:
        return f"unknown backend {backend!r} (known: {', '.join(sorted(backends))})"
    if name in (schema.REQUESTS, schema.PROBES):
        column = columns.get((("outcome", labels.get("outcome", "")),))
        if column is None:
            known = schema.OUTCOMES if name == schema.REQUESTS else schema.PROBE_OUTCOMES
            return f"{name}: outcome={labels.get('outcome')!r} is not one of {', '.join(known)}"
    elif name == schema.DURATION_BUCKET:
        try:
            index = _LE_BY_VALUE.get(float(labels["le"]))
        except (KeyError, ValueError):
            index = None
        if index is None:
            return f"le={labels.get('le')!r} is not one of the store's buckets ({', '.join(schema.LE_LABELS)})"
        column = schema.BUCKET_COLUMNS[index]
    else:
        column = columns[()]
    return backend, COLUMN_INDEX[column]


def load_openmetrics(path: Path, backends: set[str]) -> Ingested:
    problems = Problems(str(path))
    # The text before a sample's value (name and labels) -> its series, None (another metric) or a
    # problem. Long files repeat a few series many times, so each is parsed once.
    by_head: dict[str, _Series | str | None] = {}
    by_identity: dict[tuple, _Series] = {}
    skipped = 0
    lines = 0
    eof_line = None
    for lineno, raw in read_lines(path):
        lines = lineno
        line = raw.rstrip("\r\n")
        if eof_line is not None:
            if line.strip():
                problems.add(lineno, f"content after '# EOF' (line {eof_line})")
                break
            continue
        if not line or line[0] == "#" or line.isspace():
            if line.strip() == "# EOF":
                eof_line = lineno
            continue  # TYPE, HELP, UNIT: the schema fixes what each metric means
        head, _, ts_text = line.rpartition(" ")
        head, _, value_text = head.rpartition(" ")
        target = by_head.get(head, by_head)
        if target is by_head:  # not seen: parse the line properly
            parsed = _parse_sample(line)
            if isinstance(parsed, str):
                problems.add(lineno, parsed)
                continue
            name, labels, rest = parsed
            head = line[: len(line) - len(rest)]
            parts = rest.split("#", 1)[0].split()  # drop an exemplar
            if len(parts) != 2:
                problems.add(lineno, "a sample needs a value and a timestamp in seconds" if len(parts) == 1
                             else f"expected 'VALUE TIMESTAMP', got {rest.strip()!r}")
                continue
            value_text, ts_text = parts
            target = by_head.get(head, by_head)
            if target is by_head:
                resolved = _resolve(name, labels, backends)
                if isinstance(resolved, tuple):
                    identity = (name, tuple(sorted(labels.items())))
                    target = by_identity.get(identity) or _Series(*resolved)
                    by_identity[identity] = target
                else:
                    target = resolved
                by_head[head] = target
        if target is None:
            skipped += 1
            continue
        # Every problem of the line: the series, the value and the timestamp.
        found = problems.count
        if isinstance(target, str):
            problems.add(lineno, target)
        value = ts = None
        try:
            value = float(value_text)
        except ValueError:
            problems.add(lineno, f"value {value_text!r} after {head!r} is not a number")
        try:
            ts = float(ts_text)
        except ValueError:
            problems.add(lineno, f"timestamp {ts_text!r} after {head!r} is not a number (seconds)")
        if value is not None and (not math.isfinite(value) or value < 0):
            problems.add(lineno, f"counter value {value_text} must be a finite non-negative number")
        if ts is not None and not 0 < ts <= MAX_SECONDS:
            problems.add(lineno, check_time(ts, "timestamp") or f"bad timestamp {ts_text}")
        if problems.count > found:
            continue
        if not isinstance(target, _Series) or value is None or ts is None:
            continue  # never: each of these was reported as a problem of the line above
        if target.times and ts <= target.times[-1]:
            problems.add(lineno, f"timestamp {ts_text} is not after the previous sample of this series "
                                 f"(line {target.lines[-1]})")
            continue
        target.times.append(ts)
        target.values.append(value)
        target.lines.append(lineno)
    problems.raise_if_any()
    return Ingested(str(path), "openmetrics", lines, _increments(by_identity.values()), skipped)


def _increments(series: Iterable[_Series]) -> dict[str, BackendSteps]:
    """Per series: increases between samples (after a drop, a counter reset, the new value), summed
    per backend into the step ending at or after each sample."""
    import numpy as np

    parts_by_backend: dict[str, list[tuple]] = {}
    for s in series:
        if len(s.times) < 2:
            continue
        t = np.asarray(s.times)
        v = np.asarray(s.values)
        increments = np.diff(v)
        reset = increments < 0
        increments[reset] = v[1:][reset]
        steps = (np.ceil(t[1:] / STEP) * STEP).astype(np.int64)
        parts_by_backend.setdefault(s.backend, []).append((steps, np.full(steps.size, s.column), increments))
    result: dict[str, BackendSteps] = {}
    for backend, parts in sorted(parts_by_backend.items()):
        steps = np.concatenate([p[0] for p in parts])
        cols = np.concatenate([p[1] for p in parts])
        incs = np.concatenate([p[2] for p in parts])
        unique, row = np.unique(steps, return_inverse=True)
        matrix = np.zeros((len(schema.VALUE_COLUMNS), unique.size))
        np.add.at(matrix, (cols, row), incs)
        result[backend] = BackendSteps(
            backend, unique.tolist(), {c: matrix[i].tolist() for i, c in enumerate(schema.VALUE_COLUMNS)}
        )
    return result
