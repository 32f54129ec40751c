"""Ramps: move the split step by step, checking the receiving backend's burn rate between steps.

Each step goes through the controller (guards, audit, Event) under the ramp's operation id. After a
step the ramp waits `interval`, then evaluates the SLOs of the backends gaining traffic: a page-level
burn or missing data aborts the ramp and returns the split to where it started; so does a guard
refusing the next step. A restore is a ramp back to the split saved by an incident's failover.

State lives in the shared state store (document `ramp`, see rampstate.py), written with
compare-and-swap before and after every step and before every soak, so after a crash `--resume`
(from any host) continues where the ramp stopped: a step that was written but not yet recorded is
recognised by the split itself, and a step whose soak was cut short finishes its soak and burn
check before the next step moves. One ramp at a time: the document names its owner and carries a
heartbeat; a ramp whose owner died stays `running` and blocks new ramps until it is resumed or aborted.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, TYPE_CHECKING, Callable, Sequence

from opsctl.clock import format_duration
from opsctl.errors import ConflictError, GuardRefused, NoDataError, OpsctlError, UsageError
from opsctl.traffic.change import ChangeRequest, ChangeResult, new_operation_id
from opsctl.traffic.ramp_record import RampDocument, RampOwner, RampSoak
from opsctl.traffic.rampstate import RampState
from opsctl.traffic.split import Split, ramp_steps

if TYPE_CHECKING:
    from opsctl.metrics.base import MetricSource
    from opsctl.traffic.controller import TrafficController


# ---------------------------------------------------------------------------------------------
# Running


class SplitMoved(ConflictError):
    """Someone else changed the split during the ramp: the ramp stops and does not fight back."""


@dataclass
class RampOutcome:
    state: RampDocument  # the stored ramp (shown as its summary), or a plan never stored (`stored=False`)
    results: list[ChangeResult]
    status: str  # completed | aborted | planned (dry run) | unchanged
    message: str = ""
    # An aborted ramp's error (exit 4, with its hint); None otherwise. Never rendered: `message` says it.
    error: OpsctlError | None = field(default=None, repr=False, compare=False)
    stored: bool = True

    @property
    def exit_code(self) -> int:
        return 0 if self.error is None else self.error.exit_code

    def raise_for_outcome(self) -> "RampOutcome":
        """Raise an aborted ramp's error, else return the outcome (`check=True` does this)."""
        if self.error is not None:
            raise self.error
        return self

    def to_dict(self, order: Sequence[str] | None = None) -> dict[str, Any]:
        return {
            "ramp": self.state.summary() if self.stored else self.state.stored(),
            "status": self.status,
            "message": self.message,
            "steps": [r.to_dict(order) for r in self.results],
        }


class RampRunner:
    def __init__(self, ctl: "TrafficController", *, progress: Callable[[str], None] | None = None):
        self.ctl = ctl
        self.cfg = ctl.cfg
        self.backends = list(ctl.cfg.backends)
        self.progress = progress or (lambda message: None)
        from opsctl.state import open_state_store

        self.store = open_state_store(ctl.cfg)

    def _say(self, message: str) -> None:
        self.progress(message)

    # -- entry points -----------------------------------------------------------------------------

    def start(self, *, action: str, target_of: Callable[[Split], Split], step: int, interval: int, reason: str,
              incident: str | None, emergency: bool, confirm: Callable[[str], bool] | None = None,
              check: bool = True) -> RampOutcome:
        """Plan and run a ramp. An aborted ramp (a step refused, a burn) returns with `error` set, or
        with `check=True` (the default) raises it; what leaves no outcome (another ramp running, the
        split unknown or moved by someone else, a lost write race) is raised."""
        outcome = self._start(action, target_of, step, interval, reason, incident, emergency, confirm)
        return outcome.raise_for_outcome() if check else outcome

    def _start(self, action: str, target_of: Callable[[Split], Split], step: int, interval: int, reason: str,
               incident: str | None, emergency: bool, confirm: Callable[[str], bool] | None) -> RampOutcome:
        if not 1 <= step <= 100:
            raise UsageError(f"--step must be between 1 and 100 percentage points, got {step}")
        if emergency and not incident:
            self.ctl.refuse(action, "--emergency needs --incident ID: an override must name the incident it serves",
                            reason=reason, emergency=True)
        if self.ctl.dry_run:
            return self._dry_run(action, target_of, step, interval, reason, incident, emergency)
        existing = RampState.load(self.store)
        if existing is not None and existing.status == "running" and existing.live:
            owner = existing.doc.owner or RampOwner()
            raise ConflictError(
                f"another ramp is running (pid {owner.pid} on {owner.host}, by {owner.actor},"
                f" ramp {existing.doc.id})",
                hint="wait for it to finish, or stop it (Ctrl-C or kill PID) and then run"
                     " `opsctl traffic ramp --resume` or `--abort`",
            )
        if existing is not None and existing.status == "running":
            raise ConflictError(
                f"ramp {existing.doc.id} was interrupted at step {existing.doc.done}"
                f"/{len(existing.doc.steps)} and is not finished",
                hint="continue it with `opsctl traffic ramp --resume`, or return to its start with"
                     " `opsctl traffic ramp --abort --reason ...`",
            )
        stored = self.ctl.read()
        if stored.split is None:
            raise NoDataError(f"the current split is unknown ({stored.note})",
                              hint="set it first with `opsctl traffic set ... --emergency --incident ID`")
        start = stored.split
        target = target_of(start)
        target.validate(self.cfg.backends, "ramp target")
        steps = ramp_steps(start, target, step)
        if not steps:
            return RampOutcome(RampDocument.new(start=start.to_dict(self.backends)), [], "unchanged",
                               "the split is already at the target", stored=False)
        if confirm is not None and not confirm(self._plan_text(start, steps, interval)):
            raise OpsctlError("not confirmed; nothing changed")
        state = RampState(RampDocument.new(
            id=new_operation_id(action),
            action=action,
            status="running",
            start=start.to_dict(self.backends),
            target=target.to_dict(self.backends),
            steps=tuple(s.to_dict(self.backends) for s in steps),
            step=step,
            interval=interval,
            done=0,
            pending=None,
            reason=reason,
            incident=incident,
            emergency=emergency,
            actor=self.ctl.actor,
            soak=None,
            started_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        ), self.store, existing.version if existing is not None else None)
        state.take(self.ctl.actor)
        self._say(f"ramp {state.doc.id}: {start.describe(self.backends)} -> {target.describe(self.backends)}"
                  f" in {len(steps)} step(s), {format_duration(interval)} apart")
        return self._run(state)

    def _interrupted(self, verb: str) -> RampState:
        state = RampState.load(self.store)
        if state is None or state.status != "running":
            raise UsageError(f"there is no interrupted ramp to {verb}"
                             + (f" (the last one is {state.status})" if state else ""))
        if state.live:
            owner = state.doc.owner or RampOwner()
            raise ConflictError(
                f"ramp {state.doc.id} is still running (pid {owner.pid} on {owner.host})",
                hint="wait for it, or stop it (Ctrl-C or kill PID) first",
            )
        state.take(self.ctl.actor)
        return state

    def resume(self, *, check: bool = True) -> RampOutcome:
        state = self._interrupted("resume")
        self._say(f"resuming ramp {state.doc.id} after step {state.doc.done}/{len(state.doc.steps)}")
        outcome = self._run(state)
        return outcome.raise_for_outcome() if check else outcome

    def abort(self, reason: str) -> RampOutcome:
        """Return an interrupted ramp to its start."""
        state = self._interrupted("abort")
        results: list[ChangeResult] = []
        self._rollback(state, results, reason or "aborted by operator")
        return RampOutcome(state.doc, results, "aborted", state.doc.message or "")

    # -- the loop ---------------------------------------------------------------------------------

    def _run(self, state: RampState) -> RampOutcome:
        steps = state.steps(self.backends)
        start = state.split("start", self.backends)
        target = state.split("target", self.backends)
        receiving = target.increased(start)
        results: list[ChangeResult] = []
        total = len(steps)
        soak = state.doc.soak
        if soak and soak.step == state.doc.done - 1:  # interrupted while watching that step
            index = soak.step
            self._say(f"step {index + 1}/{total}: finishing its soak and burn check before the next step")
            problem = self._watch(state, receiving, index, total, until=soak.until)
            if problem:
                self._rollback(state, results, problem)
                return self._aborted(state, results, GuardRefused(
                    state.doc.message or "",
                    hint="find out why the receiving backend burns (opsctl slo report) before ramping again"))
        for index in range(state.doc.done, total):
            expected = steps[index - 1] if index else start
            wanted = steps[index]
            current = self.ctl.read().split
            if current == wanted and state.doc.pending == index:
                self._say(f"step {index + 1}/{total} was applied before the interruption: {wanted.describe(self.backends)}")
            else:
                if current != expected:
                    self._finish(state, "stopped", f"the split was changed outside the ramp: it is"
                                 f" {current.describe(self.backends) if current else 'unset'}, the ramp expected"
                                 f" {expected.describe(self.backends)}; stopping without rollback")
                    raise SplitMoved(state.doc.message or "", hint="see `opsctl traffic history`")
                state.update(pending=index)
                state.save()
                result = self.ctl.apply(self._request(state, expected, wanted, index, total), check=False)
                exc = result.error
                if isinstance(exc, GuardRefused):
                    results.append(result)
                    self._rollback(state, results, f"step {index + 1}/{total} refused: {exc.message}")
                    aborted = GuardRefused(state.doc.message or "", hint=exc.hint)
                    aborted.__cause__ = exc
                    return self._aborted(state, results, aborted)
                if isinstance(exc, SplitMoved):
                    self._finish(state, "stopped", f"step {index + 1}/{total}: {exc.message}; stopping without rollback")
                    raise exc
                if isinstance(exc, ConflictError):  # lost every write race: the ramp stays resumable
                    exc.hint = "the ramp is paused at this step; continue with `opsctl traffic ramp --resume`"
                    raise exc
                result.raise_for_outcome()  # any other failure leaves no outcome
                results.append(result)
                self._say(f"step {index + 1}/{total}: {wanted.describe(self.backends)} applied"
                          f" (version {result.version})")
            state.update(done=index + 1, pending=None)
            problem = self._watch(state, receiving, index, total)
            if problem:
                self._rollback(state, results, problem)
                return self._aborted(state, results, GuardRefused(
                    state.doc.message or "",
                    hint="find out why the receiving backend burns (opsctl slo report) before ramping again"))
        message = f"ramp complete: {target.describe(self.backends)}"
        self._finish(state, "completed", message)
        self._say(message)
        return RampOutcome(state.doc, results, "completed", message)

    def _request(self, state: RampState, expected: Split, wanted: Split, index: int, total: int) -> ChangeRequest:
        def plan(before: Split | None) -> Split:
            if before != expected:
                raise SplitMoved(f"the split was changed outside the ramp before step {index + 1}/{total}: it is"
                                 f" {before.describe(self.backends) if before else 'unset'}")
            return wanted

        doc = state.doc
        return ChangeRequest(
            doc.action, plan, reason=f"{doc.reason or ''} (step {index + 1}/{total})".strip(),
            incident=doc.incident, emergency=bool(doc.emergency), operation_id=str(doc.id),
        )

    def _watch(self, state: RampState, receiving: list[str], index: int, total: int,
               until: float | None = None) -> str | None:
        """Soak until the step's deadline (saved first, so a resume finishes it), then check the
        receiving backends' SLOs. Returns a problem or None; on success the soak is cleared."""
        interval = int(state.doc.interval or 0)
        clock = self.ctl.clock
        deadline = until if until is not None else clock.now() + interval
        state.update(soak=RampSoak(index, deadline))
        state.save()
        tick = 1 if interval <= 10 else 5  # sleep slices: the heartbeat is renewed between them
        say_every = 1 if interval <= 10 else 10 if interval <= 600 else 60  # at most ~60 progress lines
        said = None
        for _ in range(int(max(0, deadline - clock.now())) // tick + 2):
            left = deadline - clock.now()
            if left <= 0:
                break
            if said is None or said - left >= say_every:
                self._say(f"step {index + 1}/{total}: watching {', '.join(receiving) or 'the split'},"
                          f" {int(left + 0.999)}s to the burn check")
                said = left
            clock.sleep(min(tick, left))
            state.heartbeat()
        problem = self._burn_check(receiving, index, total)
        if problem is None:
            state.update(soak=None)
            state.save()
        return problem

    def _burn_check(self, receiving: list[str], index: int, total: int) -> str | None:
        if not receiving:
            return None
        from opsctl.metrics.base import open_source
        from opsctl.traffic.slo_health import health_problems, slo_results

        cache: dict[str, MetricSource] = {}

        def source() -> MetricSource:
            if "source" not in cache:
                cache["source"] = open_source(self.cfg)
                cache["source"].check()
            return cache["source"]

        try:
            results, missing = slo_results(self.cfg, source, lambda: source().default_time(), receiving)
        except NoDataError as exc:
            return f"burn check after step {index + 1}/{total}: no data ({exc.message})"
        problems = health_problems(results, missing, budget_spent_counts=False)
        if problems:
            return f"burn check after step {index + 1}/{total}: " + "; ".join(problems)
        self._say(f"step {index + 1}/{total}: burn check ok for {', '.join(receiving)}")
        return None

    def _rollback(self, state: RampState, results: list[ChangeResult], why: str) -> None:
        start = state.split("start", self.backends)
        self._say(f"aborting: {why}; returning to {start.describe(self.backends)}")
        request = ChangeRequest(
            "rollback", lambda before: start, reason=f"ramp {state.doc.id} aborted: {why}",
            incident=state.doc.incident, operation_id=str(state.doc.id),
        )
        try:
            result = self.ctl.apply(request)
        except OpsctlError as exc:
            self._finish(state, "stopped", f"{why}; the rollback to the start failed: {exc.message}")
            raise OpsctlError(state.doc.message or "",
                              hint="set the split by hand with `opsctl traffic set ... --emergency --incident ID`") from exc
        results.append(result)
        self._finish(state, "aborted", f"{why}; returned to {start.describe(self.backends)}")

    @staticmethod
    def _aborted(state: RampState, results: list[ChangeResult], error: OpsctlError) -> RampOutcome:
        return RampOutcome(state.doc, results, "aborted", state.doc.message or "", error=error)

    def _finish(self, state: RampState, status: str, message: str) -> None:
        state.update(status=status, message=message, pending=None, soak=None)
        state.save()

    # -- dry run ----------------------------------------------------------------------------------

    def _dry_run(self, action: str, target_of: Callable[[Split], Split], step: int, interval: int, reason: str,
                 incident: str | None, emergency: bool) -> RampOutcome:
        stored = self.ctl.read()
        if stored.split is None:
            raise NoDataError(f"the current split is unknown ({stored.note})")
        start = stored.split
        target = target_of(start)
        target.validate(self.cfg.backends, "ramp target")
        steps = ramp_steps(start, target, step)
        plan = RampDocument.new(
            id=None, action=action, status="planned",
            start=start.to_dict(self.backends), target=target.to_dict(self.backends),
            steps=tuple(s.to_dict(self.backends) for s in steps), step=step, interval=interval,
        )
        if not steps:
            return RampOutcome(plan, [], "unchanged", "the split is already at the target", stored=False)
        # The first step is checked by every guard (dry run); later steps are checked when they run.
        result = self.ctl.apply(ChangeRequest(action, lambda before: steps[0], reason=reason, incident=incident,
                                              emergency=emergency))
        return RampOutcome(plan, [result], "planned",
                           f"dry run: {len(steps)} step(s) planned; the first passes every guard", stored=False)

    def _plan_text(self, start: Split, steps: list[Split], interval: int) -> str:
        lines = [f"  {i + 1}. {s.describe(self.backends)}" for i, s in enumerate(steps)]
        return (f"Ramp from {start.describe(self.backends)} in {len(steps)} step(s), {format_duration(interval)}"
                f" apart, checking the burn rate between steps:\n" + "\n".join(lines))
