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

The document it keeps is document.py; the plan's steps and the objects they drive, steps.py.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Callable

from opsctl.errors import ConflictError, GuardRefused, UsageError
from opsctl.rollout.document import (FINISHED, AnalysisCount, Event, Intent, ObjectStep, RolloutState,
                                     RolloutStore)
from opsctl.rollout.steps import ONCE_AT_END, PlanStep, plan_steps, shadow_service

if TYPE_CHECKING:
    from opsctl.fencing import Term
    from opsctl.rollout.plan import Analysis
    from opsctl.traffic.service import TrafficService
    from opsctl.traffic.split import Split


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
        self._lengths: tuple[object, dict[int, int]] = (None, {})

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
        replanned, paused, next, completed, aborted)."""
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
                            step=state.step + 1, phase="apply", analyses=[], reapply=0, step_started=None,
                            traffic_at=None)
        else:
            self._abort(state, now, who, handled=handled)
        return "intent"

    def _change(self, state: RolloutState, action: str, plan: "Callable[[Split | None], Split]", operation: str,
                reason: str, service: "TrafficService | None" = None):
        from opsctl.traffic.change import ChangeRequest

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
        from opsctl.errors import ConfigError
        from opsctl.freeze import FreezeCalendar
        from opsctl.rollout.calendar import first_conflict
        from opsctl.traffic.freeze_source import current_freezes

        try:  # the freezes as the config holds them at this decision (one added mid-step binds the next step)
            windows = current_freezes(self.cfg)
        except ConfigError as exc:
            why = exc.message.splitlines()[0]
            if not state.history or state.history[-1].detail != f"{step.label} waits: {why}":
                self._event(state, now, "waiting", f"{step.label} waits: {why}")
            return "waiting"
        problems = self._unmeasurable(state, plan)
        if problems:
            why = f"a gate cannot be measured: {problems[0]}" + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else "")
            self._event(state, now, "paused", why, status="paused", paused_because=f"refused: {why}")
            return "paused"
        seconds = self._seconds(plan, step, state)
        span = first_conflict(FreezeCalendar(windows), now, now + seconds)
        if span is not None:
            if state.waiting_until != span.end:
                added = "" if any(w.name == span.name for w in self.cfg.freezes) else " (added since this process started)"
                self._event(state, now, "waiting", f"{step.label} would run into freeze {span.describe()}{added}:"
                                                   " waits until its end", waiting_until=span.end)
            return "waiting"
        from opsctl.rollout.calendar import hours_text, next_opening

        opened = next_opening(plan, now)  # the plan's working hours: a step starts only inside them
        if opened > now:
            if state.waiting_until != opened:
                from opsctl.clock import format_rfc3339

                self._event(state, now, "waiting", f"{step.label} waits for {hours_text(plan)}: until"
                                                   f" {format_rfc3339(opened)}", waiting_until=opened)
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
        from opsctl.rollout.calendar import remaining

        # the rest, as `rollout plan` places it (at the traffic measured so far)
        ahead = remaining(plan, FreezeCalendar(windows), now, step.index, _measured(state))
        self._event(state, now, "applied", f"{step.label}: {target.describe(self.order)} ({outcome})",
                    ",".join(ids) or None, phase="soak", step_started=now, analyses=[AnalysisCount()] * count,
                    waiting_until=None, objects=self._standing(state, done), planned_end=ahead.end)
        return "applied"

    def _unmeasurable(self, state: RolloutState, plan) -> list[str]:
        """rollout/gates.py's problems of the plan, its files beside the plan as `rollout start` found it
        (a rollout recorded without a plan_dir: beside the config)."""
        from opsctl.rollout.gates import gate_problems

        return gate_problems(self.cfg, plan, self._plan_dir(state))

    def _seconds(self, plan, step: PlanStep, state: RolloutState | None = None) -> int:
        """The step's length as `rollout plan` shows it (calendar.step_seconds: an A/B until its
        horizon or min_duration, whichever is longer), at the traffic measured so far; cached."""
        from opsctl.rollout.calendar import step_seconds

        measured = _measured(state)
        key = (repr(plan), tuple(sorted(measured.items())))
        if self._lengths[0] != key:
            self._lengths = (key, step_seconds(plan, measured)[0])
        return self._lengths[1][step.index]

    def _calendar(self):
        """The freezes as the config files hold them now (at start-up's when they no longer load)."""
        from opsctl.errors import ConfigError
        from opsctl.freeze import FreezeCalendar
        from opsctl.traffic.freeze_source import current_freezes

        try:
            return FreezeCalendar(current_freezes(self.cfg))
        except ConfigError:
            return FreezeCalendar(self.cfg.freezes)

    def _traffic(self, state: RolloutState, plan, step: PlanStep, now: float, ends: float) -> str | None:
        """An A/B step's traffic, measured a day into it, each day after and once at its end: trials a
        day of both arms over the A/B gate's window (quality.abtest.daily_trials: the window's own from
        a day on, else scaled by the weekly profile). When the horizon at that traffic moves the step's end
        (whole days, never under min_duration) the rest is re-planned (`replanned`, with the step's and
        the rollout's new ends); else the figure is kept (`measured`). None: not due, or no counts."""
        from opsctl.clock import format_rfc3339
        from opsctl.errors import OpsctlError
        from opsctl.quality.abtest import daily_trials, read_arms
        from opsctl.rollout.ab_check import WithCounters
        from opsctl.rollout.calendar import remaining

        started = state.step_started if state.step_started is not None else now
        last = state.traffic_at if state.traffic_at is not None else started
        if not (now - last >= 86400 or (now >= ends and last < ends)) or now <= started:
            return None
        stage = plan.stages[step.stage].body
        # over the window the A/B gate reads (its args.window, else its interval; 1h without one), at
        # most the step so far: the counters `rollout run` simulates are there too
        gate = next((a for a in stage.analysis if a.check == "ab-equivalence"), None)
        window = (gate.args.window or gate.interval).seconds if gate is not None else 3600
        seconds = int(min(now - started, window))
        per_day = None
        try:
            counters = WithCounters(self.evidence(now, plan).source())
            window = counters.window(f"{seconds}s", seconds)
            for metric in stage.metrics[:1]:  # the arms' trials: the first metric's counters
                arms = read_arms(counters, metric.successes, metric.trials, (plan.baseline, plan.backend), window, now)
                per_day = daily_trials(sum(n for _, n in arms.values()), seconds, now)
        except OpsctlError:
            per_day = None
        if per_day is None:  # no counts: the plan's figure stands; looked again in a day
            self._event(state, now, "measured", f"{step.label}: no trials counted over the step so far;"
                        " the plan's horizon stands", traffic_at=now)
            return "measured"
        before = self._seconds(plan, step, state)
        measured = {**state.measured_trials, str(step.index): per_day.trials}
        after = self._seconds(plan, step, dataclasses.replace(state, measured_trials=measured))
        said = f"{per_day.trials:,} trials a day measured ({per_day.basis}; the plan: " + (
            f"{stage.daily_trials:,})" if stage.daily_trials else "none)")
        if after == before:
            self._event(state, now, "measured", f"{step.label}: {said}; its end stands",
                        measured_trials=measured, traffic_at=now)
            return "measured"
        end = remaining(plan, self._calendar(), started + after, step.index + 1, _measured_of(measured)).end \
            if step.index + 1 < len(plan_steps(plan)) else started + after
        self._event(state, now, "replanned", f"{step.label}: {said}: the step ends {format_rfc3339(started + after)}"
                    f" (was {format_rfc3339(started + before)}); the rollout {format_rfc3339(end)}",
                    measured_trials=measured, traffic_at=now, planned_end=end)
        return "replanned"

    def _plan_dir(self, state: RolloutState) -> str:
        return state.plan_dir or self.cfg.base_dir

    def _soak(self, state: RolloutState, plan, steps: list[PlanStep], step: PlanStep, now: float) -> str:
        from opsctl.rollout.analyses import measure
        from opsctl.rollout.plan import classify, outcome_of

        analyses = self._analyses(plan, step)
        counts = list(state.analyses) + [AnalysisCount()] * (len(analyses) - len(state.analyses))
        ends = (state.step_started or now) + self._seconds(plan, step, state)
        if step.kind == "ab":
            replanned = self._traffic(state, plan, step, now, ends)
            if replanned:
                return replanned
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
            evidence.base_dir = self._plan_dir(state)  # files an analysis names: beside the plan file
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
                    reapply=0, step_started=None, traffic_at=None)
        return "next"


def _measured_of(measured: dict[str, int]) -> dict[int, float]:
    return {int(k): float(v) for k, v in measured.items()}


def _measured(state: RolloutState | None) -> dict[int, float]:
    """The A/B traffic the controller measured, by step index (calendar.step_seconds' `measured`)."""
    return _measured_of(state.measured_trials) if state is not None else {}


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
