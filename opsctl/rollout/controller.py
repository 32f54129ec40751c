"""The rollout controller: advances a plan step by step, its state in the shared store.

The state is one document of the StateStore (`rollout`: a local file, or the ConfigMap
`opsctl-<service>-rollout` the automation shares), holding the plan itself (any replica can drive
it without the file), the current step and phase, the analyses' counts and the intents people wrote.
Every write of the controller is a compare-and-swap carrying the leader's Term (opsctl/fencing.py):
refused (FencedError, exit 5) once a newer term is recorded, so a leader that was killed or paused
cannot advance what its successor drives. People's writes (`rollout start|pause|resume|promote|abort`
from any laptop) carry no term and are only compare-and-swapped: pause, resume, promote and abort
are intents the controller applies at its next tick.

One tick does at most one thing, in this order:

    intents   each not yet handled: pause, resume, promote (skip the rest of the step's analyses),
              abort (back to the split the rollout started from, recorded)
    incident  an open failover in the change record holds the rollout; once it is restored the
              current step is applied again (not the start) and its soak begins afresh
    apply     the step's split, a recorded traffic change (action `ramp`) under the operation id
              `<rollout>-s<N>` chosen before the write: a successor re-applying a step its
              predecessor wrote finds the split already there (unchanged: no second change);
              a step whose soak would start in or run into a freeze waits for the freeze's end
    soak      each analysis measured every `interval` (A/B and cost once, at the step's end: a
              fixed horizon, no peeking) and judged with Argo's outcomes: abort at once when
              Failed exceeds its limit; at the step's end continue, or pause when Inconclusive
"""

from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING, Any, Callable

from opsctl.errors import ConflictError, GuardRefused, NoDataError, UsageError
from opsctl.model import Model, field

if TYPE_CHECKING:
    from opsctl.fencing import Term
    from opsctl.rollout.plan import Analysis, RolloutPlan
    from opsctl.traffic.service import TrafficService
    from opsctl.traffic.split import Split

DOCUMENT = "rollout"
VERSION = 1
MAX_HISTORY = 200
MAX_INTENTS = 50
ONCE_AT_END = ("ab-equivalence", "cost")  # measured once, at the step's end (fixed horizon, a window)
INTENTS = ("pause", "resume", "promote", "abort")
FINISHED = ("completed", "aborted")


class PlanStep(Model):
    index: int  # 0-based, over every stage's steps
    stage: int  # index of its stage in the plan
    kind: str  # shadow | ab | ramp | cost
    label: str
    weight: int  # the new backend's share of requests (or users, A/B) during the step
    mirror: int  # the share mirrored to it (shadow)
    seconds: int


def plan_steps(plan: "RolloutPlan", start_weight: int = 0) -> list[PlanStep]:
    steps: list[PlanStep] = []
    weight = start_weight
    for i, stage in enumerate(plan.stages):
        body = stage.body
        if stage.kind == "shadow":
            for s in body.steps:
                steps.append(PlanStep(len(steps), i, "shadow", f"mirror {s.mirror}%", weight, s.mirror, s.hold.seconds))
        elif stage.kind == "ramp":
            for s in body.steps:
                weight = max(weight, s.weight)
                steps.append(PlanStep(len(steps), i, "ramp", f"weight {s.weight}%", weight, 0, s.soak.seconds))
        else:
            weight = max(weight, body.share)
            seconds = (body.min_duration if stage.kind == "ab" else body.window).seconds
            label = f"A/B {body.share}% of users" if stage.kind == "ab" else f"cost at {body.share}%"
            steps.append(PlanStep(len(steps), i, stage.kind, label, weight, 0, seconds))
    return steps


class AnalysisCount(Model):
    """What the controller keeps of one analysis during a step: counts, and the last measurement."""

    measured: int = 0
    failed: int = 0
    inconclusive: int = 0
    last_at: float | None = None
    last: dict[str, Any] = field(default_factory=dict)


class Intent(Model):
    id: str
    action: str  # pause | resume | promote | abort
    by: str
    at: float
    reason: str = ""


class Event(Model):
    at: float
    step: int  # 1-based
    what: str  # started | applied | measured | paused | resumed | promoted | held | waiting | aborted | completed
    detail: str = ""
    term: str | None = None
    change_id: str | None = None


class RolloutState(Model):
    version: int
    id: str
    plan: dict[str, Any]  # the plan as written (rebuilt with plan.build_plan on every read)
    status: str  # running | paused | aborted | completed
    step: int = 0
    phase: str = "apply"  # apply | soak
    step_started: float | None = None
    start_weights: dict[str, int] = field(default_factory=dict)  # the split the rollout started from
    start_shadow: dict[str, int] = field(default_factory=dict)
    analyses: list[AnalysisCount] = field(default_factory=list)
    reapply: int = 0  # times the current step was applied again (after an incident's restore)
    incident: str | None = None  # the open failover holding the rollout
    waiting_until: float | None = None  # a freeze's end the next step waits for
    paused_because: str = ""
    intents: list[Intent] = field(default_factory=list)
    handled: list[str] = field(default_factory=list)
    history: list[Event] = field(default_factory=list)
    started_by: str = ""
    started_at: float = 0.0
    updated_at: float = 0.0
    term: str | None = None

    def to_dict(self) -> dict:
        from opsctl.model.build import to_dict

        return to_dict(self)


def parse_state(data: dict | None, where: str = DOCUMENT) -> RolloutState | None:
    if not data:
        return None
    from opsctl.model import build_into

    problems: list[str] = []
    state = build_into(RolloutState, data, "", problems)
    if problems or state is None:
        raise NoDataError(f"{where}: not a rollout state ({'; '.join(problems[:3])})",
                          hint="`opsctl rollout abort` cannot read it either: move the document aside")
    return state


class RolloutStore:
    """The rollout's document, every write a compare-and-swap; fenced with the leader's term when
    `term` is given (None from it: this replica does not lead, FencedError)."""

    def __init__(self, store, *, term: "Callable[[], Term | None] | None" = None, name: str = DOCUMENT):
        self.store, self.term, self.name = store, term, name

    def read(self) -> RolloutState | None:
        doc = self.store.get(self.name)
        return parse_state(doc.data if doc else None, f"{self.store.where}: {self.name}")

    def write(self, change: Callable[[RolloutState | None], RolloutState | None], *, fenced: bool = True) -> RolloutState | None:
        from opsctl.fencing import FencedError, fence

        out: list[RolloutState | None] = [None]

        def apply(data):
            current = parse_state(data)
            stored_term = (data or {}).get("term")
            if fenced and self.term is not None:
                term = self.term()
                if term is None:
                    raise FencedError(f"{self.name}: this replica no longer leads; it does not write")
                kept = fence(term, stored_term, self.name)
            else:
                kept = fence(None, stored_term, self.name)
            new = change(current)
            if new is None:
                return None
            new = dataclasses.replace(new, term=kept, history=new.history[-MAX_HISTORY:],
                                      intents=new.intents[-MAX_INTENTS:], handled=new.handled[-MAX_INTENTS:])
            out[0] = new
            return new.to_dict()

        self.store.update(self.name, apply, attempts=10)
        return out[0]


def new_intent(store: RolloutStore, action: str, *, by: str, at: float, reason: str = "") -> Intent:
    """A person's intent (CAS only, no term): applied by the controller at its next tick."""
    if action not in INTENTS:
        raise UsageError(f"unknown rollout intent {action!r} (known: {', '.join(INTENTS)})")
    intent = Intent(f"{action}-{os.urandom(4).hex()}", action, by, at, reason)

    def change(state):
        if state is None:
            raise NoDataError("no rollout to steer", hint="start one with `opsctl rollout start PLAN`")
        if state.status in FINISHED:
            raise ConflictError(f"rollout {state.id} is {state.status}; nothing to {action}")
        return dataclasses.replace(state, intents=[*state.intents, intent])

    store.write(change, fenced=False)
    return intent


def start_rollout(store: RolloutStore, plan_data: dict, plan: "RolloutPlan", *, by: str, at: float,
                  current: "Split", order: list[str]) -> RolloutState:
    """A new rollout from the current split (CAS: refused while another one runs)."""
    rid = f"{plan.name}-{os.urandom(3).hex()}"
    fresh = RolloutState(VERSION, rid, plan_data, "running", start_weights=dict(current.weights),
                         start_shadow=dict(current.shadow), started_by=by, started_at=at, updated_at=at,
                         history=[Event(at, 1, "started", f"by {by}, from {current.describe(order)}")])

    def change(state):
        if state is not None and state.status not in FINISHED:
            raise ConflictError(f"rollout {state.id} is {state.status}: abort it before starting another")
        return fresh

    return store.write(change, fenced=False) or fresh


class RolloutController:
    """Drives the rollout of one service. `term`: the leader's (serve) or None for one process
    driving it alone (`rollout run`, local mode: LOCAL_TERM). `evidence(at)` -> analyses.Evidence."""

    def __init__(self, cfg, store: RolloutStore, traffic: "TrafficService", *, clock, evidence,
                 term: "Callable[[], Term | None] | None" = None, progress: Callable[[str], None] | None = None):
        self.cfg, self.store, self.traffic, self.clock = cfg, store, traffic, clock
        self.evidence, self.term, self.progress = evidence, term, progress
        self.order = list(cfg.backends)
        self.nothing_to_drive = False  # the last tick found no rollout document, or a finished one

    def _say(self, text: str) -> None:
        if self.progress:
            self.progress(text)

    # -- the plan ----------------------------------------------------------------------------------

    def _plan(self, state: RolloutState):
        from opsctl.rollout.plan import build_plan

        return build_plan(state.plan, f"rollout {state.id}", backends=self.order)

    def _target(self, plan, step: PlanStep, state: RolloutState) -> "Split":
        from opsctl.traffic.split import Split

        weights = {b: 0 for b in state.start_weights}
        weights[plan.backend] = step.weight
        weights[plan.baseline] = 100 - step.weight - sum(v for b, v in state.start_weights.items()
                                                          if b not in (plan.backend, plan.baseline))
        for b, v in state.start_weights.items():
            if b not in (plan.backend, plan.baseline):
                weights[b] = v
        shadow = {b: v for b, v in state.start_shadow.items() if b != plan.backend}
        if step.mirror:
            shadow[plan.backend] = step.mirror
        return Split.of(weights, shadow)

    @staticmethod
    def _analyses(plan, step: PlanStep) -> list["Analysis"]:
        return list(plan.stages[step.stage].body.analysis)

    # -- one tick ----------------------------------------------------------------------------------

    def tick(self) -> str:
        """At most one action; returns what it did (idle, intent, held, waiting, applied, measured,
        paused, next, completed, aborted)."""
        state = self.store.read()
        self.nothing_to_drive = state is None or state.status in FINISHED
        if state is None or state.status in FINISHED:
            return "idle"
        now = self.clock.now()
        pending = [i for i in state.intents if i.id not in state.handled]
        if pending:
            return self._intent(state, pending[0], now)
        if state.status == "paused":
            return "idle"
        plan = self._plan(state)
        steps = plan_steps(plan, state.start_weights.get(plan.backend, 0))
        step = steps[state.step]
        held = self._incident()
        if held and state.incident != held:
            self._event(state, now, "held", f"incident {held}: a failover is open; the rollout waits for its restore",
                        incident=held)
            return "held"
        if held:
            return "held"
        if state.incident and not held:
            self._event(state, now, "resumed", f"incident {state.incident} restored: step {step.index + 1} again",
                        incident=None, phase="apply", reapply=state.reapply + 1, analyses=[])
            return "intent"
        if state.phase == "apply":
            return self._apply(state, plan, step, now)
        return self._soak(state, plan, steps, step, now)

    def _event(self, state: RolloutState, now: float, what: str, detail: str = "", change_id: str | None = None,
               **changes) -> RolloutState:
        term = self.term() if self.term else None
        event = Event(now, state.step + 1, what, detail, str(term) if term else None, change_id)
        self._say(f"rollout {state.id} step {state.step + 1}: {what}{': ' + detail if detail else ''}")
        expected = (state.step, state.phase, len(state.handled))

        def change(current):
            if current is None or current.id != state.id or (current.step, current.phase, len(current.handled)) != expected:
                raise ConflictError(f"rollout {state.id} moved while this tick ran; the next tick re-reads it")
            return dataclasses.replace(current, history=[*current.history, event], updated_at=now, **changes)

        written = self.store.write(change)
        assert written is not None, "change() always returns a state"
        return written

    def _incident(self) -> str | None:
        stored = self.traffic.read()
        failovers = (stored.record or {}).get("failovers") or {}
        return sorted(failovers)[0] if failovers else None

    def _intent(self, state: RolloutState, intent: Intent, now: float) -> str:
        handled = [*state.handled, intent.id]
        who = f"{intent.action} by {intent.by}" + (f": {intent.reason}" if intent.reason else "")
        if intent.action == "pause":
            self._event(state, now, "paused", who, status="paused", paused_because=who, handled=handled)
        elif intent.action == "resume":
            if state.status == "paused" and state.phase == "soak" and state.paused_because.startswith("inconclusive"):
                # an inconclusive step is measured again from now (Argo: a person decided to go on)
                self._event(state, now, "resumed", who, status="running", paused_because="", handled=handled,
                            step_started=now, analyses=[])
            else:
                self._event(state, now, "resumed", who, status="running", paused_because="", handled=handled)
        elif intent.action == "promote":
            plan = self._plan(state)
            last = len(plan_steps(plan)) - 1
            if state.step >= last:
                self._event(state, now, "completed", who, status="completed", handled=handled)
            else:
                self._event(state, now, "promoted", who, status="running", paused_because="", handled=handled,
                            step=state.step + 1, phase="apply", analyses=[], reapply=0, step_started=None)
        else:
            self._abort(state, now, who, handled=handled)
        return "intent"

    def _change(self, state: RolloutState, action: str, target: "Split", operation: str, reason: str):
        from opsctl.traffic.controller import ChangeRequest

        request = ChangeRequest(action, lambda before: target, reason=reason, operation_id=operation)
        with self.traffic.controller.acting_as(term=self.term, operation_id=operation):
            return self.traffic.controller.apply(request)

    def _abort(self, state: RolloutState, now: float, why: str, **changes) -> None:
        from opsctl.traffic.split import Split

        start = Split.of(state.start_weights, state.start_shadow)
        result = self._change(state, "rollback", start, f"{state.id}-abort",
                              f"rollout {state.id} aborted at step {state.step + 1}: {why}")
        self._event(state, now, "aborted", f"{why}; returned to {start.describe(self.order)}", result.change_id,
                    status="aborted", paused_because="", **changes)

    def _apply(self, state: RolloutState, plan, step: PlanStep, now: float) -> str:
        from opsctl.freeze import FreezeCalendar
        from opsctl.rollout.calendar import first_conflict

        span = first_conflict(FreezeCalendar(self.cfg.freezes), now, now + step.seconds)
        if span is not None:
            if state.waiting_until != span.end:
                self._event(state, now, "waiting", f"{step.label} would run into freeze {span.name}: waits until its end",
                            waiting_until=span.end)
            return "waiting"
        target = self._target(plan, step, state)
        operation = f"{state.id}-s{step.index + 1}" + (f"-r{state.reapply}" if state.reapply else "")
        try:
            result = self._change(state, "ramp", target, operation,
                                  f"rollout {state.id} step {step.index + 1}/{len(plan_steps(plan))}: {step.label}")
        except GuardRefused as exc:
            self._event(state, now, "paused", f"the traffic guards refused {step.label}: {exc.message}",
                        status="paused", paused_because=f"refused: {exc.message}")
            return "paused"
        count = len(self._analyses(plan, step))
        self._event(state, now, "applied", f"{step.label}: {target.describe(self.order)} ({result.outcome})",
                    result.change_id, phase="soak", step_started=now, analyses=[AnalysisCount()] * count,
                    waiting_until=None)
        return "applied"

    def _soak(self, state: RolloutState, plan, steps: list[PlanStep], step: PlanStep, now: float) -> str:
        from opsctl.rollout.analyses import measure
        from opsctl.rollout.plan import classify, outcome_of

        analyses = self._analyses(plan, step)
        counts = list(state.analyses) + [AnalysisCount()] * (len(analyses) - len(state.analyses))
        ends = (state.step_started or now) + step.seconds
        at_end = now >= ends
        due = []
        for i, a in enumerate(analyses):
            c = counts[i]
            if a.check in ONCE_AT_END:
                if at_end and c.measured == 0:
                    due.append(i)
            elif c.measured == 0 or (now - (c.last_at or 0) >= a.interval.seconds and (c.last_at or 0) < ends):
                due.append(i)  # every interval during the soak, and once at (or past) its end
        if due:
            evidence = self.evidence(min(now, ends), plan)
            evidence.mirror = step.mirror / 100 if step.mirror else None  # shadow readiness: the share asked
            stage = plan.stages[step.stage].body
            notes = []
            for i in due:
                a = analyses[i]
                result = measure(a, evidence, stage)
                kind = classify(a, result)
                c = counts[i]
                counts[i] = AnalysisCount(c.measured + 1, c.failed + (kind == "failed"),
                                          c.inconclusive + (kind == "inconclusive"), now,
                                          {k: v for k, v in result.items() if isinstance(v, (int, float, str, bool))
                                           or v is None})
                notes.append(f"{a.check} {kind}")
                if outcome_of(a, counts[i].failed, counts[i].inconclusive, counts[i].measured) == "abort":
                    self._abort(state, now, f"{a.check} failed {counts[i].failed} time(s) (limit {a.failure_limit}):"
                                            f" {_brief(result)}", analyses=counts)
                    return "aborted"
            self._event(state, now, "measured", ", ".join(notes), analyses=counts)
            return "measured"
        if not at_end:
            return "idle"
        outcomes = [outcome_of(a, c.failed, c.inconclusive, c.measured) for a, c in zip(analyses, counts)]
        if "pause" in outcomes:
            which = ", ".join(a.check for a, o in zip(analyses, outcomes) if o == "pause")
            self._event(state, now, "paused", f"inconclusive: {which}; waits for a person (resume, promote or abort)",
                        status="paused", paused_because=f"inconclusive: {which}")
            return "paused"
        if state.step + 1 >= len(steps):
            self._event(state, now, "completed", f"{step.label} held; the rollout is done", status="completed")
            return "completed"
        self._event(state, now, "next", f"{step.label} passed", step=state.step + 1, phase="apply", analyses=[],
                    reapply=0, step_started=None)
        return "next"


def _brief(result: dict) -> str:
    keep = {k: v for k, v in result.items() if isinstance(v, (int, float, str, bool)) and k != "reason"}
    return ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in list(keep.items())[:4])


def run_until(controller: RolloutController, clock, *, max_ticks: int, step_seconds: float,
              stop: Callable[[], bool] | None = None) -> str:
    """Tick until the rollout finishes (bounded): when a tick did nothing, the clock moves on by
    `step_seconds` (a SimClock jumps; the wall clock sleeps). Returns the last status."""
    for _ in range(max_ticks):
        if stop is not None and stop():
            break
        what = controller.tick()
        state = controller.store.read()
        if state is None or state.status in FINISHED or state.status == "paused":
            return state.status if state else "none"
        if what in ("idle", "waiting", "held"):
            wait = step_seconds
            if what == "waiting" and state.waiting_until:
                wait = max(step_seconds, state.waiting_until - clock.now())
            clock.sleep(wait)
    state = controller.store.read()
    return state.status if state else "none"
