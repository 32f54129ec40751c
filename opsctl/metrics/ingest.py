"""Load the proxy's client-side metrics from a file into the embedded store.

Two formats:

- OpenMetrics text (or the Prometheus text format with timestamps in seconds): cumulative counters
  of the schema's metric names, with timestamps. Each series' first sample is its baseline (as in
  Prometheus' `increase()`); each later sample adds its increase (the new value after a counter
  reset) to the step whose end is at or after the sample time. Series that differ only in other
  labels (instance, pod, ...) add up into one backend. Samples of other metrics are skipped.
- A JSONL request log of the proxy: one request a line with ts (RFC 3339 or UNIX seconds),
  backend, status (HTTP code or "timeout"), latency_ms, prompt_tokens, completion_tokens,
  suggestions (the last three optional, 0 when absent).

Loading validates the whole file first (`load_file`), and writing is a separate step
(`write_ingested`), so a file with any error writes nothing. Every problem of every line is
reported, not only the first one of a line.

Ingesting is idempotent by default (`merge`): a step the store does not hold is written, a step it
holds with exactly the file's counts is left alone, and a step it holds with other counts is a
conflict that writes nothing (exit 5) unless the caller chooses `replace` (the file's counts win)
or `add` (add to what is stored: a request log split inside a 10-second step). So a cron job that
retries, or a file ingested twice, never double-counts.
"""

from __future__ import annotations

import json
import math
import re
from bisect import bisect_left
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Iterator

from opsctl.errors import ConflictError, NoDataError, UsageError
from opsctl.metrics import schema

if TYPE_CHECKING:
    from opsctl.metrics.embedded import EmbeddedStore

FORMATS = ("openmetrics", "jsonl")
MODES = ("merge", "add", "replace")
MAX_PROBLEMS = 20  # problems listed in one error; the rest are counted
STEP = schema.STEP_SECONDS
_COLUMN_INDEX = {c: i for i, c in enumerate(schema.VALUE_COLUMNS)}
_MAX_SECONDS = 1e11  # later than year 5000: a timestamp in milliseconds, not seconds
_NUMBER = re.compile(r"\d+(\.\d*)?")


@dataclass
class BackendSteps:
    """One backend's per-step increments, in the store's column layout."""

    backend: str
    timestamps: list[int]
    columns: dict[str, list[float]]

    def requests(self) -> int:
        return int(round(sum(sum(self.columns[c]) for c in schema.REQUEST_COLUMNS)))


@dataclass
class Ingested:
    path: str
    format: str
    lines: int
    steps: dict[str, BackendSteps] = field(default_factory=dict)
    skipped_samples: int = 0  # samples of metrics outside the schema (OpenMetrics only)

    def summary(self, *, written: bool, mode: str, merge: "MergePlan | None" = None) -> dict:
        starts = [s.timestamps[0] for s in self.steps.values() if s.timestamps]
        ends = [s.timestamps[-1] for s in self.steps.values() if s.timestamps]
        from opsctl.clock import format_rfc3339

        return {
            "file": self.path,
            "format": self.format,
            "lines": self.lines,
            "written": written,
            "mode": mode,
            "start": format_rfc3339(min(starts) - STEP) if starts else None,
            "end": format_rfc3339(max(ends)) if ends else None,
            "skipped_samples": self.skipped_samples,
            "new_steps": None if merge is None else merge.new,
            "unchanged_steps": None if merge is None else merge.unchanged,
            "backends": [
                {
                    "backend": name,
                    "steps": len(s.timestamps),
                    "requests": s.requests(),
                    "start": format_rfc3339(s.timestamps[0] - STEP),
                    "end": format_rfc3339(s.timestamps[-1]),
                }
                for name, s in sorted(self.steps.items())
            ],
        }


class _Problems:
    """Collects 'FILE:LINE: problem' messages; raises them all at once."""

    def __init__(self, path: str):
        self.path = path
        self.items: list[str] = []
        self.count = 0

    def add(self, line: int | None, message: str) -> None:
        self.count += 1
        if len(self.items) < MAX_PROBLEMS:
            self.items.append(f"{self.path}:{line}: {message}" if line else f"{self.path}: {message}")

    def raise_if_any(self) -> None:
        if not self.count:
            return
        more = f"\n  ... and {self.count - len(self.items)} more" if self.count > len(self.items) else ""
        raise UsageError(
            f"{self.path}: {self.count} problem(s), nothing was written:\n"
            + "\n".join(f"  - {p}" for p in self.items) + more
        )


def step_end(ts: float) -> int:
    """The end of the 10-second step holding instant ts (a step ends at or after ts)."""
    return int(math.ceil(ts / STEP)) * STEP


# ---------------------------------------------------------------------------------------------
# Entry points


def detect_format(path: Path) -> str:
    """'jsonl' when the first non-blank line is a JSON object, 'openmetrics' when it is a comment or
    a metric sample; otherwise a UsageError asking for --format."""
    for _, line in _lines(path):
        text = line.strip()
        if not text:
            continue
        if text.startswith("{"):
            return "jsonl"
        if text.startswith("#") or re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*(\{|\s)", text):
            return "openmetrics"
        break
    raise UsageError(f"{path}: cannot tell whether this is OpenMetrics text or a JSONL request log",
                     hint="pass --format openmetrics or --format jsonl")


def load_file(path: str | Path, backends: Iterable[str], fmt: str | None = None) -> Ingested:
    """Parse and validate the whole file; every problem is reported (exit 2) before anything is written."""
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"{path}: no such file")
    fmt = fmt or detect_format(path)
    if fmt not in FORMATS:
        raise UsageError(f"unknown format {fmt!r} (known: {', '.join(FORMATS)})")
    known = set(backends)
    ingested = _load_jsonl(path, known) if fmt == "jsonl" else _load_openmetrics(path, known)
    if not any(s.timestamps for s in ingested.steps.values()):
        what = "requests" if fmt == "jsonl" else f"increases of {', '.join(_METRICS)}"
        raise UsageError(f"{path}: holds no {what}; nothing to ingest",
                         hint=None if fmt == "jsonl" else "a series needs two samples or more: the first is its baseline")
    return ingested


@dataclass
class MergePlan:
    """What a merge would do: the steps the store lacks, per backend, and how many it already holds."""

    steps: dict[str, BackendSteps]
    new: int
    unchanged: int


def plan_merge(store: "EmbeddedStore", ingested: Ingested) -> MergePlan:
    """Split the file's steps into new and already stored; a stored step with other counts is a
    ConflictError listing where (nothing is written)."""
    cols = schema.VALUE_COLUMNS
    fresh: dict[str, BackendSteps] = {}
    unchanged = 0
    conflicts: list[str] = []
    count = 0
    for name, s in sorted(ingested.steps.items()):
        if not s.timestamps:
            continue
        stored = {int(r[0]): r[1:] for r in store.conn.execute(
            f"SELECT ts, {', '.join(cols)} FROM steps WHERE backend = ? AND ts >= ? AND ts <= ?",
            (name, s.timestamps[0], s.timestamps[-1]))}
        keep = []
        for i, ts in enumerate(s.timestamps):
            row = stored.get(int(ts))
            if row is None:
                keep.append(i)
            elif all(float(row[j]) == float(s.columns[c][i]) for j, c in enumerate(cols)):
                unchanged += 1
            else:
                count += 1
                if len(conflicts) < 5:
                    from opsctl.clock import format_rfc3339

                    differ = [c for j, c in enumerate(cols) if float(row[j]) != float(s.columns[c][i])]
                    conflicts.append(f"{name} at {format_rfc3339(ts)}: {', '.join(differ[:4])}"
                                     + (" ..." if len(differ) > 4 else ""))
        if keep:
            fresh[name] = BackendSteps(name, [s.timestamps[i] for i in keep],
                                       {c: [s.columns[c][i] for i in keep] for c in cols})
    if count:
        raise ConflictError(
            f"{ingested.path}: {count} step(s) already stored with other counts, nothing was written: "
            + "; ".join(conflicts) + (" ..." if count > len(conflicts) else ""),
            hint="--replace overwrites those steps with the file's counts; --add adds to them "
                 "(a request log split inside a 10-second step)",
        )
    return MergePlan(fresh, sum(len(b.timestamps) for b in fresh.values()), unchanged)


def write_ingested(store: "EmbeddedStore", ingested: Ingested, *, mode: str = "merge",
                   merge: MergePlan | None = None) -> int:
    """'merge' writes the steps the store lacks and leaves identical ones alone (see `plan_merge`);
    'add' adds each step's counts to what the store holds; 'replace' overwrites those steps."""
    if mode not in MODES:
        raise UsageError(f"unknown write mode {mode!r} (known: {', '.join(MODES)})")
    if mode == "merge":
        merge = merge or plan_merge(store, ingested)
        return sum(store.write_steps(name, s.timestamps, s.columns, mode="add") for name, s in merge.steps.items())
    return sum(store.write_steps(name, s.timestamps, s.columns, mode=mode) for name, s in ingested.steps.items())


def describe_store(store: "EmbeddedStore") -> dict:
    """What the embedded store holds: per backend its steps, time range and total requests."""
    from opsctl.clock import format_rfc3339

    rows = store.conn.execute(
        "SELECT backend, COUNT(*), MIN(ts), MAX(ts) FROM steps GROUP BY backend ORDER BY backend"
    ).fetchall()
    if not rows:
        raise NoDataError(f"the embedded store {store.path} is empty",
                          hint="load some with `opsctl sim generate` or `opsctl metrics ingest FILE`")
    backends = []
    for backend, steps, first, last in rows:
        totals = store.totals(backend, int(last))
        backends.append({
            "backend": backend,
            "steps": int(steps),
            "start": format_rfc3339(int(first) - STEP),
            "end": format_rfc3339(int(last)),
            "requests": int(round(sum(totals[c] for c in schema.REQUEST_COLUMNS))),
            "outcomes": {o: int(round(totals[f"req_{o}"])) for o in schema.OUTCOMES},
        })
    return {
        "store": str(store.path),
        "start": min(b["start"] for b in backends),
        "end": max(b["end"] for b in backends),
        "backends": backends,
    }


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    try:
        with path.open("r", encoding="utf-8") as handle:
            yield from enumerate(handle, 1)
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror}") from exc


def _check_time(value: float, what: str) -> str | None:
    if not math.isfinite(value) or value <= 0:
        return f"{what} {value!r} is not a positive UNIX time"
    if value > _MAX_SECONDS:
        return f"{what} {value!r} looks like milliseconds; use seconds"
    return None


# ---------------------------------------------------------------------------------------------
# JSONL request log


def _load_jsonl(path: Path, backends: set[str]) -> Ingested:
    from opsctl.clock import parse_rfc3339

    problems = _Problems(str(path))
    rows: dict[str, dict[int, list[float]]] = {}
    width = len(schema.VALUE_COLUMNS)
    le0 = _COLUMN_INDEX[schema.BUCKET_COLUMNS[0]]
    last_le = len(schema.BUCKET_COLUMNS)
    lines = 0
    for lineno, raw in _lines(path):
        lines = lineno
        text = raw.strip()
        if not text:
            continue
        try:
            record = json.loads(text)
        except json.JSONDecodeError as exc:
            problems.add(lineno, f"not valid JSON: {exc.msg} (column {exc.colno})")
            continue
        if not isinstance(record, dict):
            problems.add(lineno, f"expected a JSON object, got {type(record).__name__}")
            continue
        found = problems.count  # every problem of this line is reported, then the line is skipped
        missing = [k for k in ("ts", "backend", "status", "latency_ms") if k not in record]
        if missing:
            problems.add(lineno, f"missing {', '.join(missing)}")

        ts = None
        if "ts" in record:
            ts_raw = record["ts"]
            if isinstance(ts_raw, str):
                try:
                    ts = float(ts_raw) if _NUMBER.fullmatch(ts_raw.strip()) else parse_rfc3339(ts_raw)
                except ValueError:
                    problems.add(lineno, f"ts {ts_raw!r} is not an RFC 3339 time")
            elif isinstance(ts_raw, (int, float)) and not isinstance(ts_raw, bool):
                ts = float(ts_raw)
            else:
                problems.add(lineno, f"ts must be an RFC 3339 string or UNIX seconds, got {ts_raw!r}")
            bad_time = _check_time(ts, "ts") if ts is not None else None
            if bad_time:
                problems.add(lineno, bad_time)

        backend = record.get("backend")
        if "backend" in record and (not isinstance(backend, str) or backend not in backends):
            problems.add(lineno, f"unknown backend {backend!r} (known: {', '.join(sorted(backends))})")

        outcome = None
        if "status" in record:
            status = record["status"]
            if isinstance(status, bool):
                pass
            elif isinstance(status, int) and 100 <= status <= 599:
                outcome = schema.outcome_for_status(status)
            elif isinstance(status, str) and (status.lower() == "timeout" or (status.isdigit() and 100 <= int(status) <= 599)):
                outcome = schema.outcome_for_status(status)
            if outcome is None:
                problems.add(lineno, f"status must be an HTTP code (100-599) or \"timeout\", got {status!r}")

        latency_ms = record.get("latency_ms")
        if "latency_ms" in record and (isinstance(latency_ms, bool) or not isinstance(latency_ms, (int, float)) or not (
                math.isfinite(latency_ms) and latency_ms >= 0)):
            problems.add(lineno, f"latency_ms must be a non-negative number, got {latency_ms!r}")

        tokens = []
        for key in ("prompt_tokens", "completion_tokens", "suggestions"):
            value = record.get(key)
            if value is None:
                value = 0
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                problems.add(lineno, f"{key} must be a non-negative integer, got {value!r}")
            tokens.append(value)

        if problems.count > found:
            continue
        if problems.count:
            continue  # keep validating, but stop aggregating
        if ts is None or not isinstance(backend, str) or not isinstance(latency_ms, (int, float)):
            continue  # never: each of these was reported as a problem of the line above
        row = rows.setdefault(backend, {}).setdefault(step_end(ts), [0.0] * width)
        row[_COLUMN_INDEX[f"req_{outcome}"]] += 1
        seconds = latency_ms / 1000.0
        first = bisect_left(schema.BUCKETS, seconds)  # le is "less than or equal"
        for i in range(first, last_le):
            row[le0 + i] += 1
        row[_COLUMN_INDEX["lat_count"]] += 1
        row[_COLUMN_INDEX["lat_sum"]] += seconds
        row[_COLUMN_INDEX["prompt_tokens"]] += tokens[0]
        row[_COLUMN_INDEX["completion_tokens"]] += tokens[1]
        row[_COLUMN_INDEX["suggestions"]] += tokens[2]
    problems.raise_if_any()
    return Ingested(str(path), "jsonl", lines, {b: _to_steps(b, r) for b, r in rows.items()})


def _to_steps(backend: str, rows: dict[int, list[float]]) -> BackendSteps:
    timestamps = sorted(rows)
    columns = {c: [rows[ts][i] for ts in timestamps] for i, c in enumerate(schema.VALUE_COLUMNS)}
    return BackendSteps(backend, timestamps, columns)


# ---------------------------------------------------------------------------------------------
# OpenMetrics text


_METRICS = (schema.REQUESTS, schema.DURATION_BUCKET, schema.DURATION_COUNT, schema.DURATION_SUM,
            schema.PROMPT_TOKENS, schema.COMPLETION_TOKENS, schema.SUGGESTIONS)
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
    columns = schema.series_columns(name) if name in _METRICS else None
    if columns is None:
        return None
    backend = labels.get("backend")
    if backend is None:
        return f"{name} sample without a backend label"
    if backend not in backends:
        return f"unknown backend {backend!r} (known: {', '.join(sorted(backends))})"
    if name == schema.REQUESTS:
        column = columns.get((("outcome", labels.get("outcome", "")),))
        if column is None:
            return f"outcome={labels.get('outcome')!r} is not one of {', '.join(schema.OUTCOMES)}"
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
    return backend, _COLUMN_INDEX[column]


def _load_openmetrics(path: Path, backends: set[str]) -> Ingested:
    problems = _Problems(str(path))
    # The text before a sample's value (name and labels) -> its series, None (another metric) or a
    # problem. Long files repeat a few series many times, so each is parsed once.
    by_head: dict[str, _Series | str | None] = {}
    by_identity: dict[tuple, _Series] = {}
    skipped = 0
    lines = 0
    eof_line = None
    for lineno, raw in _lines(path):
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
        if ts is not None and not 0 < ts <= _MAX_SECONDS:
            problems.add(lineno, _check_time(ts, "timestamp") or f"bad timestamp {ts_text}")
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
