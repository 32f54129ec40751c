"""One drill lifecycle for every world: phases, outcome and exit code, rollback order, report.

    preflight     the world is made ready (embedded: its store seeded; chain: the binaries started)
                  and the checks that refuse a drill run (a real incident open, an alert firing)
    steady state  the hypothesis' probes hold; else refused (exit 4)
    method        faults injected and removed on the world's clock while it advances and is observed
                  (alerts -> the policy engine serve runs, pages, tickets), until every expectation
                  or hop is decided or the deadline passes
    rollbacks     always, in ROLLBACK order: after success, an abort, a signal or a crash
    report        Markdown, JSON and HTML under <state_dir>/drills/<run-id>/

A world is what the drill runs against: the embedded one (simulated time, the drill's own store,
engine.py), live (the user's Prometheus and actuator, same engine) and chain (real binaries on
loopback, chain/runner.py). Each implements `World`; this module runs the phases in order, hands
each phase's typed result (phases.py: Facts, Steady, Signals, Judgement, Rollback) to the next and
all of them (`Results`) to the report, turns what each raised into a `PhaseResult`, decides the
`Outcome` from the judgement and the rollbacks (one rule for every world) and writes the report the
world built from the results. A world never decides its own exit code.
"""

from __future__ import annotations

import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Protocol, TypeVar

from opsctl.drills.phases import (Facts, Judgement, PhaseResult, ProbeResult, Results, Rollback, Signals,  # noqa: F401
                                  Steady)
from opsctl.drills.report_model import DrillReport, Phase
from opsctl.model import Model

R = TypeVar("R")

EXIT_PASSED, EXIT_FAILED, EXIT_REFUSED = 0, 1, 4
PHASES = ("preflight", "steady-state", "method", "rollbacks", "report")
# Faults first (the harm stops), then the traffic (users back where they were), then the pages.
ROLLBACK = ("remove-faults", "restore-traffic", "resolve-pages")


class Refused(Exception):
    """The drill does not start: a preflight check or the steady state failed (exit 4, by `decide`).

    A phase's signal to the lifecycle, like `Aborted`, not an OpsctlError: a world turns a failing
    component's OpsctlError into `Aborted` (chain/runner.py), and a refusal must pass that by. The
    only `Refused`; `opsctl serve`'s answer to a bad request is `automation.request_body.Rejected`."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class Aborted(Exception):
    """The drill stops early: a stop condition, a signal, a failed step or max-duration."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class Evidence(Model):
    """What the world observed that decides the outcome."""

    failed: tuple[str, ...] = ()  # expectations or required hops not met (evaluated)
    leftovers: tuple[str, ...] = ()  # what the rollbacks could not undo
    rollback_failed: bool = False

    @classmethod
    def of(cls, results: Results) -> "Evidence":
        rb = results.rollback or Rollback()
        return cls(failed=results.judgement.failed if results.judgement else (), leftovers=rb.leftovers,
                   rollback_failed=rb.failed)


class Outcome(Model):
    outcome: str  # passed | failed | aborted | refused
    exit_code: int
    reason: str | None = None


def decide(phases: list[PhaseResult] | tuple[PhaseResult, ...], evidence: Evidence) -> Outcome:
    """One rule for every world: refused (4) > aborted or crashed (1) > anything failed or left
    behind (1) > passed (0)."""
    for p in phases:
        if p.status == "refused":
            return Outcome("refused", EXIT_REFUSED, p.detail)
    for p in phases:
        if p.status in ("aborted", "crashed"):
            return Outcome("aborted", EXIT_FAILED, p.detail)
    if evidence.failed or evidence.leftovers or evidence.rollback_failed:
        first = (evidence.failed + evidence.leftovers)[:1]
        return Outcome("failed", EXIT_FAILED, first[0] if first else "a rollback failed")
    return Outcome("passed", EXIT_PASSED)


def rollback_order(declared: tuple[str, ...] | list[str]) -> list[str]:
    """The scenario's rollbacks plus every required one, in ROLLBACK order: nothing is left behind."""
    wanted = set(declared) | set(ROLLBACK)
    return [a for a in ROLLBACK if a in wanted] + [a for a in declared if a not in ROLLBACK]


class World(Protocol):
    """What a drill runs against. Each call is one phase's work and returns that phase's typed
    result; a phase raises Refused or Aborted to end the drill early (the rollbacks and the report
    still happen), and `partial` then says what it had gathered."""

    @property
    def mode(self) -> str: ...

    @property
    def run_dir(self) -> Path: ...

    def say(self, kind: str, message: str) -> None: ...

    def set_phase(self, phase: str) -> None: ...

    def prepare(self) -> Facts:
        """Make the world ready and run the preflight checks (raises Refused)."""
        ...

    def steady_state(self, prepared: Facts) -> Steady:
        """The hypothesis' probes (raises Refused)."""
        ...

    def method(self, steady: Steady) -> Signals:
        """Inject and remove the faults while the world advances and is observed (raises Aborted)."""
        ...

    def partial(self, phase: str) -> Facts | Steady | Signals | None:
        """What `phase` had gathered when it ended early (refused, aborted, crashed)."""
        ...

    def judge(self, signals: Signals | None, stopped: str | None) -> Judgement:
        """Decide what is still open once the method ended (not after a refusal); `stopped`: why the
        drill stopped early, if it did (what was not decided by then is not evaluated)."""
        ...

    def roll_back(self, order: list[str]) -> Rollback: ...

    def report(self, outcome: Outcome, results: Results, wall_seconds: float) -> DrillReport:
        """The report, from the phases' results; the lifecycle writes it."""
        ...

    def finish(self, outcome: Outcome, data: DrillReport, paths: dict) -> None:
        """Record the outcome in the run's state (after the report is written)."""
        ...


@dataclass
class Lifecycle:
    world: World
    declared_rollbacks: tuple[str, ...] = ()
    phases: list[PhaseResult] = field(default_factory=list)
    crash: str | None = None
    results: Results | None = None  # set once the rollbacks ran

    def _phase(self, name: str, call: Callable[[], R]) -> R | None:
        """Run one phase; its result, else (it ended the drill early) what it had gathered, or None."""
        self.world.set_phase(name)
        started = time.time()
        status, detail = "ok", ""
        result: R | None = None
        try:
            result = call()
        except Refused as exc:
            status, detail = "refused", exc.reason
            self.world.say("refused", exc.reason)
        except Aborted as exc:
            status, detail = "aborted", exc.reason
            self.world.say("abort", exc.reason)
        except Exception as exc:  # a crash still rolls back and reports
            self.crash = traceback.format_exc()
            status = "crashed"
            detail = f"crashed: {getattr(exc, 'message', None) or f'{type(exc).__name__}: {exc}'}"
            self.world.say("abort", detail)
        self.phases.append(PhaseResult(name, status, started, time.time(), detail))
        if status != "ok" and name in ("preflight", "steady-state", "method"):
            result = self.world.partial(name)  # type: ignore[assignment]
        return result

    def _ok(self) -> bool:
        return all(p.status == "ok" for p in self.phases)

    def run(self, wall_start: float) -> tuple[Outcome, DrillReport, dict]:
        """Every phase in order, each handed the one before's result; rollbacks always; then the
        report from every result. Returns the outcome, the report's data and the paths written."""
        from opsctl.drills.render import write_reports

        w = self.world
        prepared = self._phase("preflight", w.prepare)
        steady = signals = None
        if self._ok() and prepared is not None:
            steady = self._phase("steady-state", lambda: w.steady_state(prepared))
        if self._ok() and steady is not None:
            signals = self._phase("method", lambda: w.method(steady))
        partial = Results(phases=tuple(self.phases), crash=self.crash)
        judgement = None
        if partial.refusal is None:
            judgement = w.judge(signals, partial.stopped)
        rollback = self._phase("rollbacks", lambda: w.roll_back(rollback_order(self.declared_rollbacks)))
        w.set_phase("report")
        self.results = results = Results(phases=tuple(self.phases), prepared=prepared, steady=steady,
                                         signals=signals, judgement=judgement, rollback=rollback, crash=self.crash)
        outcome = decide(self.phases, Evidence.of(results))
        data = w.report(outcome, results, time.monotonic() - wall_start)
        data = data.replace(phases=tuple(Phase.parse(p.to_dict()) for p in self.phases))
        paths = write_reports(w.run_dir, data)
        w.finish(outcome, data, paths)
        return outcome, data, paths


__all__ = ["Aborted", "EXIT_FAILED", "EXIT_PASSED", "EXIT_REFUSED", "Evidence", "Facts", "Judgement", "Lifecycle",
           "Outcome", "PHASES", "PhaseResult", "ProbeResult", "ROLLBACK", "Refused", "Results", "Rollback", "Signals",
           "Steady", "World", "decide", "rollback_order"]
