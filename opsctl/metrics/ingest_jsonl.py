"""Parse the proxy's JSONL request log (one request a line: ts, backend, status, latency_ms, and
optionally prompt_tokens, completion_tokens, suggestions) into per-step counts. Every problem of
every line is reported (`ingest.Problems`), not only the first.
"""

from __future__ import annotations

import json
import math
import re
from bisect import bisect_left
from pathlib import Path

from opsctl.metrics import schema
from opsctl.metrics.ingested import COLUMN_INDEX, Ingested, Problems, check_time, read_lines, step_end, to_steps

_NUMBER = re.compile(r"\d+(\.\d*)?")


def load_jsonl(path: Path, backends: set[str]) -> Ingested:
    from opsctl.clock import parse_rfc3339

    problems = Problems(str(path))
    rows: dict[str, dict[int, list[float]]] = {}
    width = len(schema.VALUE_COLUMNS)
    le0 = COLUMN_INDEX[schema.BUCKET_COLUMNS[0]]
    last_le = len(schema.BUCKET_COLUMNS)
    lines = 0
    for lineno, raw in read_lines(path):
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
            bad_time = check_time(ts, "ts") if ts is not None else None
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
        row[COLUMN_INDEX[f"req_{outcome}"]] += 1
        seconds = latency_ms / 1000.0
        first = bisect_left(schema.BUCKETS, seconds)  # le is "less than or equal"
        for i in range(first, last_le):
            row[le0 + i] += 1
        row[COLUMN_INDEX["lat_count"]] += 1
        row[COLUMN_INDEX["lat_sum"]] += seconds
        row[COLUMN_INDEX["prompt_tokens"]] += tokens[0]
        row[COLUMN_INDEX["completion_tokens"]] += tokens[1]
        row[COLUMN_INDEX["suggestions"]] += tokens[2]
    problems.raise_if_any()
    return Ingested(str(path), "jsonl", lines, {b: to_steps(b, r) for b, r in rows.items()})


