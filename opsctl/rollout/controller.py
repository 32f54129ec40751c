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
    objects   with `traffic.shadow_actuator` a plan drives two objects: the assignment object
              (`traffic.actuator`, e.g. the flagd gate: weights, for A/B and ramp steps) and the shadow
              object (the mesh's mirror share, for shadow steps). A step writes each object whose
              content it changes, each one write with its record on that object under the same
              operation id; the state's `objects` says which step each holds and which step last wrote it
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


class ObjectStep(Model):
    """Where one object the rollout drives stands: the step whose content it holds (0: the start)
    and the step that last wrote it, with that change's id in the object's own change record."""

    role: str  # assignment (the split's weights; also the mirror when there is no shadow object) | shadow
    actuator: str  # its kind: flagd, istio, file...
    target: str  # where it lives
    step: int = 0  # 1-based; 0: as the rollout found it (at the start, and after an abort)
    split: str = ""  # what it holds, described
    written_step: int = 0  # the step during which it was last written (an abort's too; 0: not yet)
    change_id: str | None = None


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
    start_shadow: dict[str, int] = field(default_factory=dict)  # on the shadow object when there is one
    objects: list[ObjectStep] = field(default_factory=list)  # assignment first, then the shadow object
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
                  current: "Split", order: list[str], mirror: "Split | None" = None,
                  objects: "list[ObjectStep] | None" = None) -> RolloutState:
    """A new rollout from the current split (CAS: refused while another one runs). With a shadow
    object, `mirror` is its split: the mirror share starts (and an abort returns) from there."""
    rid = f"{plan.name}-{os.urandom(3).hex()}"
    shadow = dict((mirror if mirror is not None else current).shadow)
    began = current.describe(order) + (f"; mirror {mirror.describe(order)}" if mirror is not None else "")
    fresh = RolloutState(VERSION, rid, plan_data, "running", start_weights=dict(current.weights),
                         start_shadow=shadow, objects=list(objects or []), started_by=by, started_at=at,
                         updated_at=at, history=[Event(at, 1, "started", f"by {by}, from {began}")])

    def change(state):
        if state is not None and state.status not in FINISHED:
            raise ConflictError(f"rollout {state.id} is {state.status}: abort it before starting another")
        return fresh

    return store.write(change, fenced=False) or fresh


def shadow_service(cfg, traffic: "TrafficService") -> "TrafficService | None":
    """The shadow object's change path (`traffic.shadow_actuator`), acting like `traffic` (its clock,
    actor, hooks, audit fields); None when the assignment object carries the mirror too."""
    from opsctl.traffic.registry import open_shadow_actuator
    from opsctl.traffic.service import TrafficService

    actuator = open_shadow_actuator(cfg, dry_run=traffic.controller.dry_run)
    if actuator is None:
        return None
    c = traffic.controller
    return TrafficService(cfg, dry_run=c.dry_run, clock=c.clock, actor=c.actor, hooks=list(c.hooks),
                          progress=c.progress, audit_fields=c.audit_fields, actuator=actuator)


def object_steps(traffic: "TrafficService", shadow: "TrafficService | None", order: list[str]) -> list[ObjectStep]:
    """The objects a rollout drives, as found at its start (step 0)."""
    out = []
    for role, svc in (("assignment", traffic), ("shadow", shadow)):
        if svc is None:
            continue
        split = svc.read().split
        actuator = svc.controller.actuator
        out.append(ObjectStep(role, actuator.kind, actuator.target, 0, split.describe(order) if split else "unset"))
    return out


def starting_point(cfg, traffic: "TrafficService | None" = None) -> "tuple[Split | None, Split | None, list[ObjectStep]]":
    """What a rollout starts from (read only): the assignment object's split, the shadow object's
    (None without one) and both objects' standing at step 0. NoDataError: the shadow object holds none."""
    from opsctl.traffic.service import TrafficService

    traffic = traffic or TrafficService(cfg, hooks=[])
    shadow = shadow_service(cfg, traffic)
    mirror = None
    if shadow is not None:
        mirror = shadow.read().split
        if mirror is None:
            raise NoDataError(f"{shadow.controller.actuator.target}: holds no split to mirror from",
                              hint="the shadow object (traffic.shadow_actuator) must route the baseline first")
    return traffic.read().split, mirror, object_steps(traffic, shadow, list(cfg.backends))


class RolloutController:
    """Drives the rollout of one service. `term`: the leader's (serve) or None for one process
    driving it alone (`rollout run`, local mode: LOCAL_TERM). `evidence(at)` -> analyses.Evidence.
    `shadow`: the shadow object's TrafficService (default: built from `traffic.shadow_actuator`)."""

    def __init__(self, cfg, store: RolloutStore, traffic: "TrafficService", *, clock, evidence,
                 term: "Callable[[], Term | None] | None" = None, progress: Callable[[str], None] | None = None,
                 shadow: "TrafficService | None" = None):
        self.cfg, self.store, self.traffic, self.clock = cfg, store, traffic, clock
        self.evidence, self.term, self.progress = evidence, term, progress
        self.shadow = shadow if shadow is not None else shadow_service(cfg, traffic)
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

    def _objects(self, whole: "Split") -> "list[tuple[str, TrafficService, Callable[[Split | None], Split]]]":
        """(role, service, plan) per object for the rollout's wanted split `whole`: one object carries
        it all; with a shadow object the assignment object gets the weights (no mirror) and the shadow
        object the mirror share over its own weights, as it holds them."""
        from opsctl.traffic.split import Split

        shadow = self.shadow
        if shadow is None:
            return [("assignment", self.traffic, lambda before: whole)]

        def mirror(before: "Split | None") -> "Split":
            if before is None:
                raise UsageError(f"{shadow.controller.actuator.target}: holds no split to add a mirror share to")
            return Split.of(before.weights, whole.shadow)

        return [("assignment", self.traffic, lambda before: Split.of(whole.weights, {})),
                ("shadow", shadow, mirror)]

    def _drive(self, state: RolloutState, action: str, whole: "Split", operation: str, reason: str, step: int,
               done: list[ObjectStep], written: int | None = None) -> tuple[list[str], str]:
        """Each object to its part of `whole`: one change each through its own change path, under
        `operation` (the record on that object); an object already holding its part is not written
        (the change is `unchanged`). `done` receives each object's new standing as it is written, so
        after a refusal (GuardRefused, raised) it says what moved. `step`: what the objects then hold (0: the
        start), `written`: the step during which they are written (default `step`; an abort's is its own).
        Returns the change ids and outcomes."""
        known = {o.role: o for o in state.objects}
        ids: list[str] = []
        outcomes: list[str] = []
        for role, svc, plan in self._objects(whole):
            actuator = svc.controller.actuator
            kept = known.get(role) or ObjectStep(role, actuator.kind, actuator.target)
            result = self._change(state, action, plan, operation, reason, svc)
            after = result.after.describe(self.order) if result.after is not None else kept.split
            change_id = result.change_id
            if result.outcome == "unchanged" and not svc.controller.dry_run:
                # found as asked: written under this operation by a tick whose state write was lost?
                from opsctl.traffic.record import find_change

                found = find_change(svc.read().record, operation=operation, action=action)
                change_id = (found.id or None) if found else None
            if result.outcome == "applied" or change_id:
                kept = dataclasses.replace(kept, written_step=step if written is None else written,
                                           change_id=change_id)
                if change_id:
                    ids.append(change_id)
            done.append(dataclasses.replace(kept, step=step, split=after))
            outcomes.append(f"{role} {result.outcome}" if self.shadow is not None else result.outcome)
        return ids, ", ".join(outcomes)

    def _standing(self, state: RolloutState, done: list[ObjectStep]) -> list[ObjectStep]:
        roles = {o.role for o in done}
        return done + [o for o in state.objects if o.role not in roles]

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
        failovers = stored.record.failovers if stored.record is not None else {}
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

    def _change(self, state: RolloutState, action: str, plan: "Callable[[Split | None], Split]", operation: str,
                reason: str, service: "TrafficService | None" = None):
        from opsctl.traffic.controller import ChangeRequest

        controller = (service or self.traffic).controller
        request = ChangeRequest(action, plan, reason=reason, operation_id=operation)
        with controller.acting_as(term=self.term, operation_id=operation):
            return controller.apply(request)

    def _abort(self, state: RolloutState, now: float, why: str, **changes) -> None:
        from opsctl.traffic.split import Split

        start = Split.of(state.start_weights, state.start_shadow)
        done: list[ObjectStep] = []
        ids, _ = self._drive(state, "rollback", start, f"{state.id}-abort",
                             f"rollout {state.id} aborted at step {state.step + 1}: {why}", 0, done, state.step + 1)
        self._event(state, now, "aborted", f"{why}; returned to {start.describe(self.order)}",
                    ",".join(ids) or None, status="aborted", paused_because="",
                    objects=self._standing(state, done), **changes)

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
        done: list[ObjectStep] = []
        try:
            ids, outcome = self._drive(
                state, "ramp", target, operation,
                f"rollout {state.id} step {step.index + 1}/{len(plan_steps(plan))}: {step.label}", step.index + 1,
                done)
        except GuardRefused as exc:
            self._event(state, now, "paused", f"the traffic guards refused {step.label}: {exc.message}",
                        status="paused", paused_because=f"refused: {exc.message}", objects=self._standing(state, done))
            return "paused"
        count = len(self._analyses(plan, step))
        self._event(state, now, "applied", f"{step.label}: {target.describe(self.order)} ({outcome})",
                    ",".join(ids) or None, phase="soak", step_started=now, analyses=[AnalysisCount()] * count,
                    waiting_until=None, objects=self._standing(state, done))
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
