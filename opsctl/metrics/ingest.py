"""Load the proxy's client-side metrics from a file into the embedded store.

Two formats, each parsed in its own module (`ingest_openmetrics`, `ingest_jsonl`) into the records
here (`Ingested`, `BackendSteps`):

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

import re
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

from opsctl.errors import ConflictError, NoDataError, UsageError
from opsctl.metrics import schema
from opsctl.metrics.ingested import METRICS, STEP, BackendSteps, Ingested, MergePlan, read_lines

if TYPE_CHECKING:
    from opsctl.metrics.embedded import EmbeddedStore

FORMATS = ("openmetrics", "jsonl")
MODES = ("merge", "add", "replace")


# ---------------------------------------------------------------------------------------------
# Entry points


def detect_format(path: Path) -> str:
    """'jsonl' when the first non-blank line is a JSON object, 'openmetrics' when it is a comment or
    a metric sample; otherwise a UsageError asking for --format."""
    for _, line in read_lines(path):
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
    if fmt == "jsonl":
        from opsctl.metrics.ingest_jsonl import load_jsonl

        ingested = load_jsonl(path, known)
    else:
        from opsctl.metrics.ingest_openmetrics import load_openmetrics

        ingested = load_openmetrics(path, known)
    if not any(s.timestamps for s in ingested.steps.values()):
        what = "requests" if fmt == "jsonl" else f"increases of {', '.join(METRICS)}"
        raise UsageError(f"{path}: holds no {what}; nothing to ingest",
                         hint=None if fmt == "jsonl" else "a series needs two samples or more: the first is its baseline")
    return ingested


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
