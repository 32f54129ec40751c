"""What each phase of a drill returns, typed: the lifecycle (lifecycle.py) hands each result to the
next phase and all of them to the report, instead of the world's parts filling a shared blackboard.

    prepare       Facts         the preflight checks that ran and what the world is
    steady state  Steady        each probe's result (embedded and live: Instrumented, with the
                                burn-rate rule plans and the burn meter the method measures with)
    method        Signals       what the world observed (embedded and live: Observed, the
                                observations and burn samples; chain: HopSignals, the hops)
    judge         Judgement     the verdicts and what failed
    rollbacks     Rollback      each action's result, what was left behind

`Results` holds them all with the phases' statuses. A phase that ended early (refused, aborted,
crashed) gives what it had gathered (`World.partial`); one that never ran gives None.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from opsctl.drills.expectations import Observations
from opsctl.model import Model, field

if TYPE_CHECKING:
    from opsctl.drills.report_burn import Budget, Prediction

__all__ = ["Facts", "HopSignals", "Instrumented", "Judgement", "Observations", "Observed", "PhaseResult",
           "ProbeResult", "Results", "Rollback", "Signals", "Steady"]


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


class Facts(Model):
    """prepare -> the preflight checks that ran and what the world is (embedded: the seeded store;
    chain: the binaries, URLs, the drill's config and what it shortened)."""

    checks: tuple[Any, ...] = ()  # safety.Check: name, status, message, to_dict()
    facts: dict = field(default_factory=dict)


class ProbeResult(Model):
    """One steady-state probe: what it asked, what it saw, whether that is within tolerance."""

    name: str
    probe: str
    tolerance: Any
    observed: str
    ok: bool

    def to_dict(self) -> dict:
        return {"name": self.name, "probe": self.probe, "tolerance": self.tolerance, "observed": self.observed,
                "ok": self.ok}


class Steady(Model):
    """steady state -> each probe's result (a world adds the instruments its method measures with)."""

    probes: tuple[ProbeResult, ...] = ()


class Signals(Model):
    """method -> what the world observed while the faults ran: the onset t0 and the world's own record
    (embedded: `observe.Observed`, the observations, burn samples and alert plans; chain:
    `phases.HopSignals`, the hops, the prediction, the attribution and the budget)."""

    t0: float | None = None


class Judgement(Model):
    """judge -> the verdicts (embedded: one per expectation; chain: the hops, judged in its report)
    and the names of what failed, which decide the outcome."""

    verdicts: tuple[Any, ...] = ()  # expectations.Verdict
    failed: tuple[str, ...] = ()


class Rollback(Model):
    """roll_back -> each rollback action's result, in the order run, and what could not be undone."""

    actions: tuple[dict, ...] = ()  # {"action", "status", "message"}
    leftovers: tuple[str, ...] = ()

    @property
    def failed(self) -> bool:
        return any(a.get("status") == "failed" for a in self.actions)


class Results(Model):
    """Every phase's result, as the lifecycle passes them to the report: a phase that ended early
    gave what it had gathered (`World.partial`), one that never ran gave None."""

    phases: tuple[PhaseResult, ...] = ()
    prepared: Facts | None = None
    steady: Steady | None = None
    signals: Signals | None = None
    judgement: Judgement | None = None
    rollback: Rollback | None = None
    crash: str | None = None  # the traceback of a crashed phase

    def _first(self, *statuses: str) -> str | None:
        return next((p.detail for p in self.phases if p.status in statuses), None)

    @property
    def refusal(self) -> str | None:
        return self._first("refused")

    @property
    def abort_reason(self) -> str | None:
        return self._first("aborted", "crashed")

    @property
    def stopped(self) -> str | None:
        """Why the drill stopped before its method was done (a refusal, an abort or a crash)."""
        return self.refusal or self.abort_reason


class Instrumented(Steady):
    """The embedded and live steady state's result: the probes, and the instruments the method
    measures with (the burn-rate rule plans, the burn meter of the tracked SLOs)."""

    plans: tuple[Any, ...] = ()  # slo.rules.SloRulePlan
    meter: Any = None  # measure.BurnMeter


class Observed(Signals):
    """The embedded and live method's result: what was observed (first firings, the page, the
    failovers, tickets, the automation's actions), the burn samples every tick, and the plans and
    meter they were measured with."""

    obs: Observations = field(default_factory=Observations)
    samples: tuple[dict, ...] = ()
    plans: tuple[Any, ...] = ()
    meter: Any = None
    t_method: float | None = None


class HopSignals(Signals):
    """The chain's method result: each hop as the components showed it (hops.Hop, in chain order),
    what the burn-rate maths predicted from the fault, what the faults did to the exporter's
    outcomes, and the budget the run spent."""

    hops: dict = field(default_factory=dict)  # key -> hops.Hop
    obs: Observations | None = None  # the same observations the embedded drill judges (chain/observed.py)
    prediction: Prediction | None = None
    attribution: tuple[dict, ...] = ()
    budget: Budget | None = None
