"""The one front door to traffic control, for every actor: the CLI, `opsctl serve` and drills.

`TrafficService(cfg, ...)` builds the TrafficController from config (actuator, pager change hook,
actor, clock, audit fields) and runs set, failover, restore and ramps through one path each, and
reads status and history from the change record stored with the split, so every laptop and replica
sees the same last change, open failovers and history.

Every change returns its result (`ChangeResult`, a ramp's `RampOutcome`). With `check=True`, the
default, a result that ended in an error (refused, conflict, an aborted ramp) raises that error
instead, as `subprocess.run(check=True)` does; `check=False` returns it with `error` set, its exit
code in `exit_code` (the CLI renders it, then exits with that code; the automation's executor
reports it). What has no result (a bad flag, an unknown incident) is raised either way.
"""

from __future__ import annotations

from typing import Any, TYPE_CHECKING, Callable, Mapping, Sequence

from opsctl.traffic.change import ChangeRequest, ChangeResult
from opsctl.traffic.controller import TrafficController

if TYPE_CHECKING:
    from opsctl.clock import Clock
    from opsctl.config import Config
    from opsctl.paging.change_hook import PagerChangeHook
    from opsctl.traffic.base import Actuator, ChangeHook, StoredSplit
    from opsctl.traffic.failover import SavedSplit
    from opsctl.traffic.ramp import RampRunner
    from opsctl.traffic.ramp import RampOutcome
    from opsctl.traffic.change_entry import ChangeEntry
    from opsctl.traffic.split import Split

_DEFAULT: "Sequence[ChangeHook]" = []  # a unique object: hooks not given (never mutated)
Confirm = Callable[[ChangeResult], bool]  # asked with the change, once
RampConfirm = Callable[[str], bool]  # asked with the ramp's plan text


def _pager_hook(cfg: "Config", clock: "Clock | None") -> "PagerChangeHook":
    from opsctl.paging.change_hook import PagerChangeHook  # not on a dry run's path

    return PagerChangeHook(cfg, clock=clock)


class TrafficService:
    def __init__(self, cfg: "Config", *, dry_run: bool = False, clock: "Clock | None" = None,
                 actor: str | None = None, hooks: "Sequence[ChangeHook]" = _DEFAULT,
                 progress: Callable[[str], None] | None = None, audit_fields: dict[str, Any] | None = None,
                 actuator: "Actuator | None" = None):
        if hooks is _DEFAULT:  # like every actor: an applied change also goes to the pager as a change event
            hooks = [] if dry_run else [_pager_hook(cfg, clock)]
        self.cfg = cfg
        self.order = list(cfg.backends)
        self.progress = progress
        self.controller = TrafficController(cfg, dry_run=dry_run, actuator=actuator, clock=clock, hooks=hooks,
                                            progress=progress, actor=actor, audit_fields=audit_fields)

    # -- changes ----------------------------------------------------------------------------------

    def read(self) -> "StoredSplit":
        return self.controller.read()

    def set(self, weights: Mapping[str, int], shadow: Mapping[str, int] | None = None, *, reason: str = "",
            incident: str | None = None, emergency: bool = False, confirm: Confirm | None = None, check: bool = True) -> ChangeResult:
        from opsctl.traffic.split import Split, check_known

        mirrored = dict(shadow or {})

        def plan(before: "Split | None") -> "Split":
            check_known([*weights, *mirrored], self.cfg.backends, "set")
            current_shadow = dict(before.shadow) if before else {}
            current_shadow.update(mirrored)
            return Split.of(weights, current_shadow)

        return self.controller.apply(ChangeRequest("set", plan, reason=reason, incident=incident,
                                                   emergency=emergency, confirm=confirm), check=check)

    def failover(self, source: str, incident: str, *, to: Sequence[str] = (), reason: str = "",
                 emergency: bool = True, confirm: Confirm | None = None, check: bool = True) -> ChangeResult:
        """The one failover path. `emergency=False` (automation outside a freeze) keeps the routine
        guards; the budget guard still never blocks moving away from a backend burning faster.
        What capacity could not carry goes to traffic.degradation when configured; a move that stays
        partial returns with `partial` set (exit 4), never as an error."""
        result = self._failover(source, incident, to, reason, emergency, confirm)
        return result.raise_for_outcome() if check else result

    def _failover(self, source: str, incident: str, to: Sequence[str], reason: str, emergency: bool,
                  confirm: Confirm | None) -> ChangeResult:
        from opsctl.errors import GuardRefused
        from opsctl.traffic.failover import degrade, failover, partial_move

        result = failover(self.controller, source, incident, to=to, reason=reason, confirm=confirm,
                          emergency=emergency, check=False)
        refused = result.error
        if refused is not None:  # nothing fits on the replicas ready now: degrade, wait for the ones asked for
            if not isinstance(refused, GuardRefused) or not result.shortfall or self.controller.dry_run:
                return result
            if not self._can_top_up() and self.cfg.traffic.degradation is None:
                return result
            result.after = result.before  # nothing moved yet
        started = result.before
        if result.shortfall and not self.controller.dry_run:
            step = degrade(self.controller, result, source, reason=reason, emergency=emergency)
            if step is not None and step.error is not None:  # what moved stays moved and recorded; the rest is said below
                if refused is not None:
                    return step
                result.warnings.append(f"sending the rest to {self.cfg.traffic.degradation} failed: {step.error.message}")
                step = None
            result.degradation = step
            if step is not None and step.outcome == "applied":
                result.after, result.version = step.after, step.version
        if result.shortfall and self._can_top_up():
            failed = self._top_up(result, source, incident, to, reason, emergency)
            if failed is not None:
                return failed
        if refused is not None:
            if not result.topups and result.degradation is None:
                return result
            result.error = None
            result.outcome = "applied"
            result.message = "nothing fitted at first; " + (
                f"the share went to {self.cfg.traffic.degradation}" if result.degradation else "moved as replicas became Ready")
        result.partial = partial_move(self.cfg, result, source, started)
        return result

    def _can_top_up(self) -> bool:
        cap = self.cfg.capacity
        return cap is not None and cap.source == "kubernetes" and not self.controller.dry_run

    def _top_up(self, first: ChangeResult, source: str, incident: str, to: Sequence[str], reason: str,
                emergency: bool) -> ChangeResult | None:
        """After a failover that moved only what the ready replicas carried, move more each time
        more replicas are Ready, until the whole share moved or capacity.ready_timeout. Each step is
        an applied change of the same operation (recorded, counted once by the rate guard); it stops
        if anyone else changes the split meanwhile. Returns a step that failed otherwise (a conflict,
        a fenced write), which ends the failover, or None."""
        from opsctl.errors import GuardRefused, UsageError
        from opsctl.traffic.capacity import Capacity, no_source
        from opsctl.traffic.failover import receivers_of, topup_plan, topup_trim

        clock = self.controller.clock
        capacity = Capacity(self.cfg, no_source, lambda: clock.now(), clock=clock)
        cap = capacity.settings
        poll = max(cap.poll_interval.seconds, 1)
        deadline = clock.now() + cap.ready_timeout.seconds
        receivers = receivers_of(self.cfg, source, to)
        last, ready_seen = (first.degradation if first.degradation is not None and first.degradation.outcome == "applied"
                            else first), None
        for _ in range(int(cap.ready_timeout.seconds / poll) + 2):
            left = deadline - clock.now()
            if left <= 0:
                break
            clock.sleep(min(poll, left))
            ready = capacity.ready_replicas()
            if self.progress:
                self.progress(f"waiting for {capacity.where}: {ready} replicas ready; {sum(s['not_moved'] for s in last.shortfall.values())}"
                              f" points still on {source}")
            if ready_seen is not None and ready <= ready_seen:
                continue
            ready_seen = ready
            expected = last.after

            def plan(before: "Split | None", expected: "Split | None" = expected) -> "Split":
                if before != expected:
                    raise UsageError("the split changed since the failover's last step; not topping up")
                return topup_plan(self.cfg, source, receivers)(before)

            step = self.controller.apply(ChangeRequest(
                "failover", plan, reason=f"{reason or 'failover from ' + source} (top-up: {ready} replicas ready)",
                incident=incident, emergency=emergency, operation_id=first.operation_id,
                trim=topup_trim(self.cfg, source, receivers)), check=False)
            if isinstance(step.error, GuardRefused):  # none of the rest fits yet: keep waiting, unless no more replicas can come
                if ready >= cap.max_replicas:
                    break
                continue
            if isinstance(step.error, UsageError):
                first.warnings.append(f"top-up stopped: {step.error.message}")
                break
            if step.error is not None:
                return step
            if step.outcome != "applied":
                break
            first.topups.append(step)
            last = step
            if not step.shortfall or ready >= cap.max_replicas:
                break  # all moved, or at max_replicas: no more replicas are coming
        if first.topups:
            first.after, first.version, first.shortfall = last.after, last.version, last.shortfall
        return None

    def saved_split(self, incident: str) -> "SavedSplit":
        from opsctl.traffic.failover import saved_split

        return saved_split(self.read().record, self.controller.audit, incident, self.order)

    def restore(self, incident: str, *, step: int | None = None, interval: int | None = None, reason: str = "",
                emergency: bool = False, confirm: RampConfirm | None = None, check: bool = True) -> "RampOutcome":
        """Ramp back to the split saved when the incident's failover began."""
        found = self.saved_split(incident)
        saved = found.split
        if self.progress:
            self.progress(f"restoring the split saved by the failover of {found.time}: {saved.describe(self.order)}")
        outcome = self.ramp(lambda current: saved, action="restore", step=step, interval=interval,
                            reason=reason or f"restore after incident {incident}", incident=incident,
                            emergency=emergency, confirm=confirm, check=check)
        if outcome.status in ("completed", "unchanged") and not self.controller.dry_run:
            released = self.release_capacity()
            if released:
                outcome.message += f"; {released}"
        return outcome

    def release_capacity(self) -> str | None:
        """After a restore: put back the autoscaler minimum a failover raised (no-op otherwise)."""
        cap = self.cfg.capacity
        if cap is None or cap.autoscaler == "none":
            return None
        from opsctl.traffic.capacity import Capacity, no_source

        clock = self.controller.clock
        return Capacity(self.cfg, no_source, lambda: clock.now(), clock=clock).restore_minimum()

    def restore_now(self, incident: str, saved: "Split", *, reason: str, emergency: bool = False,
                    expect: "Split | None" = None, check: bool = True) -> ChangeResult:
        """Return to `saved` in one step (automation: the hold-down already waited). With `expect`,
        only from that split: the precondition is checked on every attempt, so a retry after a
        conflict never restores over a change made meanwhile (it is refused by bounds, exit 2)."""
        from opsctl.errors import UsageError

        def plan(current: "Split | None") -> "Split":
            if expect is not None and current != expect and current != saved:
                now = current.describe(self.order) if current else "unset"
                raise UsageError(f"the split changed since the failover (now {now}, the failover wrote"
                                 f" {expect.describe(self.order)}); restore left to a human")
            return saved

        result = self.controller.apply(ChangeRequest("restore", plan, incident=incident,
                                                     emergency=emergency, reason=reason), check=check)
        if result.outcome in ("applied", "unchanged") and not self.controller.dry_run:
            released = self.release_capacity()
            if released:
                result.recorded.append(released)
        return result

    def move_from(self, incident: str, target: "Split", expect: "Sequence[Split]", *, action: str, operation_id: str,
                  reason: str, emergency: bool = False) -> ChangeResult:
        """One move of a canary restore (opsctl/traffic/canary.py): to `target`, only from one of
        `expect` (checked on every attempt: a change made meanwhile is refused by bounds, exit 2,
        and left to a human), under `operation_id`, which the caller chose before the write: a split
        already at `target` comes back `unchanged`, and the change record says whether it was this
        operation's own earlier write (`record.find_change`)."""
        from opsctl.errors import UsageError

        def plan(current: "Split | None") -> "Split":
            if current != target and current not in expect:
                now = current.describe(self.order) if current else "unset"
                raise UsageError(f"the split changed since the restore's last move (now {now}, expected"
                                 f" {' or '.join(s.describe(self.order) for s in expect)}); restore left to a human")
            return target

        return self.controller.apply(ChangeRequest(action, plan, incident=incident, emergency=emergency, reason=reason,
                                                   operation_id=operation_id), check=False)

    def ramp(self, target_of: Callable[["Split"], "Split"], *, action: str = "ramp", step: int | None = None,
             interval: int | None = None, reason: str = "", incident: str | None = None, emergency: bool = False,
             confirm: RampConfirm | None = None, check: bool = True) -> "RampOutcome":
        runner = self.ramp_runner()
        step = step if step is not None else self.cfg.traffic.ramp.step
        interval = interval if interval is not None else self.cfg.traffic.ramp.interval.seconds
        return runner.start(action=action, target_of=target_of, step=step, interval=interval, reason=reason,
                            incident=incident, emergency=emergency, confirm=confirm, check=check)

    def resume(self, *, check: bool = True) -> "RampOutcome":
        return self.ramp_runner().resume(check=check)

    def abort(self, reason: str) -> "RampOutcome":
        return self.ramp_runner().abort(reason)

    def ramp_runner(self) -> "RampRunner":
        from opsctl.traffic.ramp import RampRunner

        return RampRunner(self.controller, progress=self.progress)

    # -- reading ----------------------------------------------------------------------------------

    def history(self, *, incident: str | None = None, limit: int | None = None) -> list["ChangeEntry"]:
        """Applied changes from the shared change record, newest first."""
        from opsctl.traffic.record import newest_first

        stored = self.read()
        entries = [e for e in newest_first(stored.record) if incident is None or e.incident == incident]
        return entries[:limit] if limit else entries

    def attempts(self, *, incident: str | None = None, applied: bool = False, limit: int | None = None) -> list[dict[str, Any]]:
        """Every attempt this host made, from the local audit log (refusals, conflicts, dry runs too)."""
        def wanted(e: dict[str, Any]) -> bool:
            return (e.get("kind") == "traffic" and (incident is None or e.get("incident") == incident)
                    and (not applied or (e.get("outcome") == "applied" and not e.get("dry_run"))))

        return self.controller.audit.find(wanted, limit=limit)

