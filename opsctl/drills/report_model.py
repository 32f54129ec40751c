"""A drill report as typed records: `DrillReport` and its parts (docs/decisions/0010-records-are-typed-and-versioned.md).

A report is built once (`drills.report` for embedded and live runs and an interrupted run's state;
`drills.chain.report` for a chain drill, written with CHAIN_KEYS), rendered
from its fields (`drills.render`) and read back from a stored report.json by the same model
(`drill report`, `drill history`).

Version 1 is the document every opsctl so far wrote, and is written without a `version` key (a
later format writes its number). Each part writes its keys in the order they were read or, built
in code, in its fields' order (`shape`), and keeps what it holds beyond its fields (`extra`), so a
stored report reads back and re-encodes to the same bytes (tests/drills/test_report_pins.py).
Numbers are `int | float`: an integer stays an integer, as JSON had it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from opsctl.drills.report_burn import (
    Budget,
    BudgetRow,
    Chart,
    ChartPoint,
    Marker,
    PredictedHop,
    PredictedSlo,
    Prediction,
    Response,
    Stop,
    Threshold,
    Tier,
)
from opsctl.drills.report_part import Number, Part, ReportUnreadable, _fields
from opsctl.model import field

VERSION = 1


# ---------------------------------------------------------------------------------------------
# The parts


class ScenarioRef(Part):
    title: str = ""
    name: str = ""
    path: str = ""
    digest: str | None = None
    description: str = ""
    tags: tuple[str, ...] = ()


class Check(Part):
    """A preflight check as reported (`status` missing in reports older than "skipped")."""

    OPTIONAL = frozenset({"status"})
    name: str = ""
    ok: bool = False
    status: str | None = None
    message: str = ""

    @property
    def shown(self) -> str:
        """ok | skipped | REFUSED."""
        return self.status or ("ok" if self.ok else "REFUSED")


class Probe(Part):
    name: str = ""
    probe: str = ""
    tolerance: Any = None
    observed: Any = None
    ok: bool = False


class Hypothesis(Part):
    title: str = ""
    probes: tuple[Probe, ...] = ()


class Event(Part):
    """A timeline row: when (RFC 3339 and seconds from the fault), the phase, its kind, the message."""

    at: str | None = None
    offset: Number | None = None
    phase: str = ""
    kind: str = ""
    message: str = ""


class Measurements(Part):
    """Seconds from the fault to each response step (None: it never happened)."""

    time_to_detect: Number | None = None
    time_to_page: Number | None = None
    time_to_acknowledge: Number | None = None
    time_to_mitigate: Number | None = None
    time_to_vendor_routing: Number | None = None
    time_to_vendor_response: Number | None = None
    time_to_recover: Number | None = None
    acknowledged_by: str | None = None
    escalated_after: Number | None = None

    def seconds(self, key: str) -> Number | None:
        """One of the `time_to_*` measures by name (report.MEASURES, TARGETS)."""
        value = getattr(self, key) if key in _fields(Measurements) else self.extra.get(key)
        return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


class AutomationAction(Part):
    at: str | None = None
    policy: str = ""
    action: str = ""
    status: str = ""
    detail: str = ""
    dry_run: bool = False
    offset: Number | None = None


class Unmatched(Part):
    at: str | None = None
    alert: str = ""


class Automation(Part):
    """What serve's policy engine did in the drill, and the engine's shape (engine_factory.shape)."""

    actions: tuple[AutomationAction, ...] = ()
    unmatched: tuple[Unmatched, ...] = ()
    engine: dict[str, Any] | None = None


class Verdict(Part):
    """An expectation's verdict (`result` missing in reports older than "not evaluated", and in a
    chain drill's hop verdicts)."""

    OPTIONAL = frozenset({"result"})
    name: str = ""
    expect: str = ""
    passed: bool = False
    result: str | None = None
    within_seconds: Number | None = None
    at: str | None = None
    seconds: Number | None = None
    detail: str = ""
    reason: str = ""

    @property
    def mark(self) -> str:
        """PASS | FAIL | not evaluated | not judged here."""
        result = self.result or ("pass" if self.passed else "fail")
        return {"pass": "PASS", "fail": "FAIL", "not judged here": "not judged here"}.get(result, "not evaluated")


class Hop(Part):
    """A chain drill's hop as its component showed it."""

    hop: str = ""
    component: str = ""
    title: str = ""
    required: bool = False
    passed: bool = False
    at: Number | None = None
    seconds: Number | None = None
    evidence: str = ""
    last_evidence: str = ""
    failed: str | None = None


class Attribution(Part):
    fault: str = ""
    kind: str = ""
    backend: str = ""
    hop: str = ""
    seen: str = ""


class Shortened(Part):
    where: str = ""
    was: Any = None
    now: Any = None
    why: str = ""


class RollbackResult(Part):
    action: str = ""
    status: str = ""
    message: str = ""


class Sim(Part):
    start: str | None = None
    end: str | None = None
    simulated_seconds: Number = 0
    resimulations: int | None = None


class Phase(Part):
    phase: str = ""
    status: str = ""
    seconds: Number = 0
    detail: str = ""


# ---------------------------------------------------------------------------------------------
# The report


# The keys each kind of report holds, in the order written (a stored report keeps its own).
RUN_KEYS = ("run_id", "mode", "outcome", "exit_code", "scenario", "started_at", "finished_at", "wall_seconds", "t0",
            "refusal", "abort_reason", "crash", "late_signals", "preflight", "hypothesis", "environment", "timeline",
            "measurements", "automation", "expectations", "rollbacks", "leftovers", "clean", "budget", "chart",
            "runbook")
INTERRUPTED_KEYS = ("run_id", "mode", "outcome", "exit_code", "scenario", "started_at", "finished_at",
                    "wall_seconds", "t0", "refusal", "abort_reason", "crash", "late_signals", "preflight",
                    "hypothesis", "environment", "timeline", "measurements", "expectations", "rollbacks",
                    "leftovers", "clean", "budget", "chart", "note")
CHAIN_KEYS = ("run_id", "mode", "outcome", "exit_code", "scenario", "started_at", "finished_at", "wall_seconds", "t0",
              "refusal", "abort_reason", "crash", "late_signals", "preflight", "hypothesis", "environment", "timeline",
              "measurements", "expectations", "hops", "broken_hop", "attribution", "shortened", "rollbacks",
              "leftovers", "clean", "budget", "chart", "runbook", "window", "note", "prediction")
# Written as {} when None (no measurement, budget, chart or prediction), as the dict was.
EMPTY_AS_NONE = frozenset({"measurements", "budget", "chart", "prediction"})


class DrillReport(Part):
    """One drill's report: what ran, what was measured and judged, what was rolled back."""

    version: int = VERSION
    run_id: str = ""
    mode: str = ""
    outcome: str = ""
    exit_code: int = 0
    scenario: ScenarioRef = field(default_factory=ScenarioRef)
    started_at: str | None = None
    finished_at: str | None = None
    wall_seconds: Number | None = None
    t0: str | None = None
    refusal: str | None = None
    abort_reason: str | None = None
    crash: str | None = None
    late_signals: tuple[str, ...] = ()
    preflight: tuple[Check, ...] = ()
    hypothesis: Hypothesis = field(default_factory=Hypothesis)
    environment: dict[str, Any] = field(default_factory=dict)  # the world's facts (the store, binaries, URLs)
    timeline: tuple[Event, ...] = ()
    measurements: Measurements | None = None
    automation: Automation | None = None
    expectations: tuple[Verdict, ...] = ()
    hops: tuple[Hop, ...] = ()
    broken_hop: str | None = None
    attribution: tuple[Attribution, ...] = ()
    shortened: tuple[Shortened, ...] = ()
    rollbacks: tuple[RollbackResult, ...] = ()
    leftovers: tuple[str, ...] = ()
    clean: bool = True
    budget: Budget | None = None
    chart: Chart | None = None
    runbook: str | None = None
    sim: Sim | None = None
    window: Any = None
    note: str | None = None
    prediction: Prediction | None = None
    action_items: tuple[str, ...] = ()
    phases: tuple[Phase, ...] = ()
    reports: dict[str, str] | None = None

    @classmethod
    def parse(cls, raw: Any, where: str = "") -> "DrillReport":
        if isinstance(raw, dict):
            version = raw.get("version", VERSION)
            if version != VERSION:
                raise ReportUnreadable(f"{where + ': ' if where else ''}report version {version!r} is not one this"
                                       " opsctl reads")
            raw = {k: ({} if v is None and k in EMPTY_AS_NONE else v) for k, v in raw.items()}
        report = super().parse(raw, "")
        return report.replace(**{k: None for k in EMPTY_AS_NONE if _empty(getattr(report, k))})

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        for key in EMPTY_AS_NONE:
            if key in out and out[key] is None:
                out[key] = {}
        return out

    def replace(self, **changes: Any) -> "DrillReport":
        """A copy with `changes`, each new key written after the ones it has (Part.update)."""
        return self.update(**changes)

    def with_keys(self, *keys: str) -> "DrillReport":
        import dataclasses

        return dataclasses.replace(self, shape=tuple(keys))

    def json_text(self) -> str:
        return json.dumps(self.to_dict(), indent=2, default=str) + "\n"

    @property
    def chain(self) -> bool:
        return bool(self.hops)


def _empty(part: Any) -> bool:
    return isinstance(part, Part) and part.keys() == ()


def read_report(path: Path) -> DrillReport:
    """A stored report.json, typed; one line naming the file and the problem when it is not a drill
    report (ReportUnreadable, exit 3)."""
    try:
        raw = json.loads(Path(path).read_text())
    except OSError as exc:
        raise ReportUnreadable(f"{path}: cannot read the report: {exc.strerror}") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        line = f" (line {exc.lineno})" if isinstance(exc, json.JSONDecodeError) else ""
        raise ReportUnreadable(f"{path}: not a drill report: not valid JSON{line}") from exc
    try:
        return DrillReport.parse(raw)
    except ReportUnreadable as exc:
        raise ReportUnreadable(f"{path}: not a drill report: {exc.message}") from exc


__all__ = ["Attribution", "Automation", "AutomationAction", "Budget", "BudgetRow", "CHAIN_KEYS", "Chart", "ChartPoint",
           "Check",
           "DrillReport", "EMPTY_AS_NONE", "Event", "Hop", "Hypothesis", "INTERRUPTED_KEYS", "Marker", "Measurements",
           "Number", "Part", "Phase", "PredictedHop", "PredictedSlo", "Prediction", "Probe", "RUN_KEYS", "ReportUnreadable",
           "Response", "RollbackResult", "ScenarioRef", "Shortened", "Sim", "Stop", "Threshold", "Tier", "Unmatched",
           "VERSION", "Verdict", "read_report"]
