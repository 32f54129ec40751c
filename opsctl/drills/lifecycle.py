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
loopback, chain/runner.py). Each implements `World`; this module runs the phases in order, turns
what each raised into a typed `PhaseResult`, decides the `Outcome` (one rule for every world) and
writes the report the world built. A world never decides its own exit code.
"""

from __future__ import annotations

import time
import traceback
from dataclasses import dataclass, field
from typing import Callable, Protocol

from opsctl.model import Model

EXIT_PASSED, EXIT_FAILED, EXIT_REFUSED = 0, 1, 4
PHASES = ("preflight", "steady-state", "method", "rollbacks", "report")
# Faults first (the harm stops), then the traffic (users back where they were), then the pages.
ROLLBACK = ("remove-faults", "restore-traffic", "resolve-pages")


class Refused(Exception):
    """The drill does not start: a preflight check or the steady state failed (exit 4, by `decide`).

    A phase's signal to the lifecycle, like `Aborted`, not an OpsctlError: a world turns a failing
    component's OpsctlError into `Aborted` (chain/runner.py), and a refusal must pass that by. The
    only `Refused`; `opsctl serve`'s answer to a bad request is `automation.server.Rejected`."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class Aborted(Exception):
    """The drill stops early: a stop condition, a signal, a failed step or max-duration."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class PhaseResult(Model):
    """What one phase came to: ok, refused, aborted or crashed, when, and why."""

    phase: str
    status: str  # ok | refused | aborted | crashed | skipped
    started: float
    ended: float
    detail: str = ""

    def to_dict(self) -> dict:
        return {"phase": self.phase, "status": self.status, "seconds": round(self.ended - self.started, 3),
                "detail": self.detail}


class Evidence(Model):
    """What the world observed that decides the outcome."""

    failed: tuple[str, ...] = ()  # expectations or required hops not met (evaluated)
    leftovers: tuple[str, ...] = ()  # what the rollbacks could not undo
    rollback_failed: bool = False


class Outcome(Model):
    outcome: str  # passed | failed | aborted | refused
    exit_code: int
    reason: str | None = None


def decide(phases: list[PhaseResult], evidence: Evidence) -> Outcome:
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
    """What a drill runs against. Each call is one phase's work; a phase raises Refused or Aborted
    to end the drill early (the rollbacks and the report still happen)."""

    @property
    def mode(self) -> str: ...

    def say(self, kind: str, message: str) -> None: ...

    def set_phase(self, phase: str) -> None: ...

    def prepare(self) -> None:
        """Make the world ready and run the preflight checks (raises Refused)."""
        ...

    def steady_state(self) -> None:
        """The hypothesis' probes (raises Refused)."""
        ...

    def method(self) -> None:
        """Inject and remove the faults while the world advances and is observed (raises Aborted)."""
        ...

    def judge(self, phases: list[PhaseResult]) -> None:
        """Decide what is still open once the method ended (not after a refusal)."""
        ...

    def roll_back(self, order: list[str]) -> None: ...

    def evidence(self) -> Evidence: ...

    def report(self, outcome: Outcome, phases: list[PhaseResult], wall_seconds: float) -> dict:
        """The report's data; the lifecycle writes it."""
        ...

    def finish(self, outcome: Outcome, data: dict, paths: dict) -> None:
        """Record the outcome in the run's state (after the report is written)."""
        ...


@dataclass
class Lifecycle:
    world: World
    declared_rollbacks: tuple[str, ...] = ()
    phases: list[PhaseResult] = field(default_factory=list)
    crash: str | None = None

    def _phase(self, name: str, call: Callable[[], None]) -> bool:
        """Run one phase; False when it ended the drill early."""
        self.world.set_phase(name)
        started = time.time()
        status, detail = "ok", ""
        try:
            call()
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
        return status == "ok"

    def run(self, wall_start: float) -> tuple[Outcome, dict, dict]:
        """Every phase in order; rollbacks always; then the report. Returns the outcome, the report's
        data and the paths written."""
        from opsctl.drills.report import write_reports

        w = self.world
        _ = (self._phase("preflight", w.prepare) and self._phase("steady-state", w.steady_state)
             and self._phase("method", w.method))
        if not any(p.status == "refused" for p in self.phases):
            w.judge(self.phases)
        self._phase("rollbacks", lambda: w.roll_back(rollback_order(self.declared_rollbacks)))
        w.set_phase("report")
        outcome = decide(self.phases, w.evidence())
        data = w.report(outcome, self.phases, time.monotonic() - wall_start)
        data["phases"] = [p.to_dict() for p in self.phases]
        paths = write_reports(_run_dir(w), data)
        w.finish(outcome, data, paths)
        return outcome, data, paths


def _run_dir(world):
    return world.run_dir


__all__ = ["Aborted", "EXIT_FAILED", "EXIT_PASSED", "EXIT_REFUSED", "Evidence", "Lifecycle", "Outcome", "PHASES",
           "PhaseResult", "ROLLBACK", "Refused", "World", "decide", "rollback_order"]
