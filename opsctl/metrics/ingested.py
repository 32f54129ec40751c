"""What a metrics file parses into (`Ingested`: per backend, per-step counts in the store's column
layout), and the helpers both parsers share: problems collected and raised all at once, line
reading, time checks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from opsctl.errors import UsageError
from opsctl.metrics import schema

MAX_PROBLEMS = 20  # problems listed in one error; the rest are counted
STEP = schema.STEP_SECONDS
COLUMN_INDEX = {c: i for i, c in enumerate(schema.VALUE_COLUMNS)}
MAX_SECONDS = 1e11  # later than year 5000: a timestamp in milliseconds, not seconds
# The schema's metric names an OpenMetrics file may hold; samples of other metrics are skipped.
METRICS = (schema.REQUESTS, schema.DURATION_BUCKET, schema.DURATION_COUNT, schema.DURATION_SUM,
           schema.PROMPT_TOKENS, schema.COMPLETION_TOKENS, schema.SUGGESTIONS, schema.PROBES)


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

    def summary(self, *, written: bool, mode: str, merge: MergePlan | None = None) -> dict:
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


@dataclass
class MergePlan:
    """What a merge would do: the steps the store lacks, per backend, and how many it already holds."""

    steps: dict[str, BackendSteps]
    new: int
    unchanged: int


class Problems:
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


def read_lines(path: Path) -> Iterator[tuple[int, str]]:
    try:
        with path.open("r", encoding="utf-8") as handle:
            yield from enumerate(handle, 1)
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror}") from exc


def check_time(value: float, what: str) -> str | None:
    if not math.isfinite(value) or value <= 0:
        return f"{what} {value!r} is not a positive UNIX time"
    if value > MAX_SECONDS:
        return f"{what} {value!r} looks like milliseconds; use seconds"
    return None


def to_steps(backend: str, rows: dict[int, list[float]]) -> BackendSteps:
    timestamps = sorted(rows)
    columns = {c: [rows[ts][i] for ts in timestamps] for i, c in enumerate(schema.VALUE_COLUMNS)}
    return BackendSteps(backend, timestamps, columns)
