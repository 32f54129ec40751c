"""The one call every traffic change ends in, from the CLI, automation and drills alike:

    read -> plan -> guards -> (confirm) -> capacity -> write split + record -> audit -> Event / log / hooks

The plan is a function of the current split, so when the write meets a concurrent change (the
file's version moved, or the API server answered 409) the controller re-reads, re-plans and
re-checks every guard, up to `traffic.conflict_attempts` times, then fails with exit 5. The change
record (opsctl/traffic/record.py) is written in the same write as the split, and the rate guard
counts from the record as read, so the count and the change are atomic. Every attempt, applied,
refused or not, is one entry in the local audit log (written after the record); with
`state.backend: kubernetes` it is also one structured JSON log line for the cluster's log pipeline.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, TYPE_CHECKING, Callable, Iterator, NoReturn, Sequence, TextIO

from opsctl.audit import AuditLog, current_actor
from opsctl.errors import ConflictError, GuardRefused, NoDataError, OpsctlError, UsageError
from opsctl.fencing import Term
from opsctl.traffic import record as records
from opsctl.traffic.base import ChangeHook, ChangeNotice, StoredSplit
from opsctl.traffic.change import ChangeRequest, ChangeResult, new_operation_id
from opsctl.traffic.guards import ACTIONS, CAPACITY_GUARD, POLICY_GUARDS, GuardContext, GuardResult, guard
from opsctl.traffic.split import Split

if TYPE_CHECKING:
    import logging
    from contextlib import AbstractContextManager

    from opsctl.clock import Clock
    from opsctl.config import Config
    from opsctl.traffic.base import Actuator, WriteResult


def change_log() -> "logging.Logger":
    """The structured change log: one JSON object per line on stderr, for the cluster's log pipeline
    (kubernetes mode only: logging is imported here, off the local CLI's start-up)."""
    import logging

    class CurrentStderr(logging.StreamHandler[TextIO]):
        """Writes to sys.stderr as it is at each line, not as it was when the logger was first set up
        (a process that redirects stderr later, or runs the CLI in-process, still gets every line)."""

        @property
        def stream(self) -> TextIO:
            return sys.stderr

        @stream.setter
        def stream(self, _value: TextIO) -> None:
            pass

    logger = logging.getLogger("opsctl.traffic.changes")
    if not logger.handlers:
        handler = CurrentStderr()
        handler.setFormatter(logging.Formatter("%(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False
    return logger


def _ended(result: ChangeResult, error: OpsctlError) -> ChangeResult:
    result.error = error
    return result


class TrafficController:
    def __init__(self, cfg: "Config", *, dry_run: bool = False, actuator: "Actuator | None" = None,
                 clock: "Clock | None" = None,
                 hooks: Sequence[ChangeHook] = (), progress: Callable[[str], None] | None = None,
                 actor: str | None = None, audit_fields: dict[str, Any] | None = None):
        from opsctl.clock import WallClock

        if actuator is None:
            from opsctl.traffic.registry import open_actuator

            actuator = open_actuator(cfg, dry_run=dry_run)
        self.cfg = cfg
        self.dry_run = dry_run
        self.actuator = actuator
        self.clock: Clock = clock or WallClock()
        self.hooks = list(hooks)
        self.progress = progress
        self.actor = actor or current_actor()
        self.audit = AuditLog(cfg.audit_path)
        self.order = list(cfg.backends)
        # Added to every audit entry, e.g. {"drill": True, "drill_run": ID} for changes a drill makes.
        self.audit_fields = dict(audit_fields or {})
        import threading

        self._acting = threading.local()  # per worker thread: the leader's term and the operation id

    def acting_as(self, *, term: "Callable[[], Term | None] | None" = None,
                  operation_id: str | None = None) -> "AbstractContextManager[TrafficController]":
        """Within this block (this thread only), changes are written under the leader's term, read
        afresh before every attempt (None: this replica no longer leads, FencedError), and under
        `operation_id`, chosen by the caller before the write so a retry finds its own change."""
        from contextlib import contextmanager

        @contextmanager
        def block() -> Iterator[TrafficController]:
            saved = getattr(self._acting, "term", None), getattr(self._acting, "operation_id", None)
            self._acting.term, self._acting.operation_id = term, operation_id
            try:
                yield self
            finally:
                self._acting.term, self._acting.operation_id = saved

        return block()

    def _term(self, request: ChangeRequest) -> "Term | None":
        if request.term is not None:
            return request.term
        source = getattr(self._acting, "term", None)
        if source is None:
            return None  # a person: compare-and-swap only
        term: Term | None = source()
        if term is None:
            from opsctl.fencing import FencedError

            raise FencedError(f"{self.actuator.target}: this replica no longer leads; it does not write")
        return term

    def read(self) -> StoredSplit:
        return self.actuator.read()

    def apply(self, request: ChangeRequest, *, check: bool = True) -> ChangeResult:
        """Attempt the change. The result says what happened: applied, unchanged, a dry run, or with
        `error` set, refused, lost to concurrent writers, declined or failed (the guards it met, the
        split it read). `check=True` (the default, as `subprocess.run(check=True)`) raises that
        error instead of returning; either way, what has no result (an unknown action, an error
        outside opsctl) is raised."""
        result = self._apply(request)
        return result.raise_for_outcome() if check else result

    def _apply(self, request: ChangeRequest) -> ChangeResult:
        if request.action not in ACTIONS:
            raise UsageError(f"unknown traffic action {request.action!r} (known: {', '.join(ACTIONS)})")
        operation = (request.operation_id or getattr(self._acting, "operation_id", None)
                     or new_operation_id(request.action))
        if request.emergency and not request.incident:
            return self.refusal(request.action, "--emergency needs --incident ID: an override must name the incident"
                                " it serves", reason=request.reason, emergency=True, operation_id=operation)
        attempts = self.cfg.traffic.conflict_attempts
        confirmed: list[Split | None] = []  # the split the person confirmed against, once asked
        for attempt in range(1, attempts + 1):
            result = ChangeResult(
                request.action, operation, self.actor, self.dry_run, self.actuator.kind, self.actuator.target,
                request.reason, request.incident, request.emergency, attempt,
            )
            try:
                term = self._term(request)
                result.term = str(term) if term is not None else None
                if self._attempt(request, result, confirmed, term):
                    return result
            except OpsctlError as exc:
                if not result.audited:  # e.g. a guard could not be evaluated: still one audited attempt
                    result.outcome, result.message = "failed", exc.message
                    self._audit(result)
                return _ended(result, exc)
            if self.progress:
                self.progress(f"attempt {attempt}/{attempts} met a concurrent change; re-reading")
        return _ended(result, ConflictError(
            f"gave up after {attempts} attempts: each write to {self.actuator.target} met a concurrent change"
            f" ({result.message})",
            hint="another operator or controller keeps changing the split; check `opsctl traffic history` and"
                 " `opsctl traffic status`, then run again",
        ))

    def refusal(self, action: str, message: str, *, reason: str = "", incident: str | None = None,
                emergency: bool = False, operation_id: str | None = None, hint: str | None = None,
                error: type[OpsctlError] = UsageError) -> ChangeResult:
        """Refuse an attempt before it reaches the guards (bad flags, a running ramp): still one
        audited attempt, returned refused with `error` (exit 2 by default)."""
        result = ChangeResult(action, operation_id or new_operation_id(action), self.actor, self.dry_run,
                              self.actuator.kind, self.actuator.target, reason, incident, emergency)
        result.guards.append(GuardResult("bounds", False, message, hint or ""))
        result.outcome, result.message = "refused", message
        self._audit(result)
        return _ended(result, error(message, hint=hint))

    def refuse(self, action: str, message: str, *, reason: str = "", incident: str | None = None,
               emergency: bool = False, hint: str | None = None, error: type[OpsctlError] = UsageError) -> NoReturn:
        """`refusal(...)`, raised: for a command's own checks, whose refusal is not rendered."""
        refused = self.refusal(action, message, reason=reason, incident=incident, emergency=emergency, hint=hint,
                               error=error)
        assert refused.error is not None  # a refusal always carries its error
        raise refused.error

    def _attempt(self, request: ChangeRequest, result: ChangeResult, confirmed: list[Split | None],
                 term: Term | None = None) -> bool:
        """One read-plan-check-write round. True when done; False when the write met a concurrent change."""
        stored = self.actuator.read()
        result.before, result.version_before = stored.split, stored.version
        if stored.corrupt:
            if not request.emergency:  # only an emergency tied to an incident may replace what it cannot read
                result.outcome, result.message = "refused", f"the stored split is corrupt: {stored.corrupt}"
                self._audit(result)
                from opsctl.traffic.file import repair_hint

                default = Split.of(self.cfg.traffic.default_split) if self.cfg.traffic.default_split else None
                raise NoDataError(result.message, hint=repair_hint(default, self.order))
            result.warnings.append(f"the stored split was corrupt ({stored.corrupt}); this change replaces it")
        try:
            result.requested = result.after = request.plan(stored.split)
        except UsageError as exc:  # a plan that cannot be made is refused by bounds, and audited
            result.guards.append(GuardResult("bounds", False, exc.message, exc.hint or ""))
            result.outcome, result.message = "refused", exc.message
            self._audit(result)
            raise
        record = stored.record if stored.record is not None else records.empty()
        from opsctl.fencing import fence

        kept_term = fence(term, record.term, self.actuator.target)  # FencedError: a newer leader
        if result.requested == stored.split:
            result.outcome, result.message = "unchanged", "the split is already as asked"
            self._audit(result)
            return True
        now = records.now_for(self.actuator, self.clock)
        ctx = GuardContext(
            self.cfg, request.action, stored.split, result.requested, request.emergency, request.incident,
            now, result.operation_id, self.dry_run, self.audit, request.reason, self.clock, self.progress,
            record=record,
        )
        self._check(result, ctx, POLICY_GUARDS)
        if request.confirm is not None and not self.dry_run:
            self._confirm(request.confirm, result, stored.split, confirmed)
        capacity = self._check(result, ctx, (CAPACITY_GUARD,))[0]
        limit = capacity.details.get("limit")
        if limit and request.trim is not None:
            result.after = request.trim(stored.split, result.requested, limit)
            result.shortfall = self._shortfall(result.requested, result.after, limit)
            if result.after == stored.split:
                result.outcome = "refused"
                result.message = f"capacity: none of the requested move fits ({capacity.message})"
                self._audit(result)
                raise GuardRefused(result.message, hint="add GPUs or raise capacity.max_replicas")
        entry = records.entry_of(result, self.order, now, self.audit_fields)
        new_record = record.with_change(entry, history=self.cfg.state.history,
                                        window=self.cfg.traffic.rate_limit.window_seconds, now=now)
        if kept_term is not None:
            new_record = new_record.with_term(kept_term)
        try:
            written = self.actuator.write(result.after, stored.version, dry_run=self.dry_run, record=new_record)
        except OpsctlError as exc:
            # A lost answer (or its retry meeting 409) may hide an applied write: read it back.
            own = None if self.dry_run else self._own_change(entry.id)
            if own is None:
                if not isinstance(exc, ConflictError):
                    raise
                result.outcome, result.message = "conflict", exc.message
                self._audit(result)
                return False
            written = own
            result.warnings.append(f"the answer to the write was lost ({exc.message[:200]}); the change record"
                                   " shows it applied")
        result.version = written.version
        if not self.dry_run:
            result.change_id = entry.id
        result.outcome = "dry-run" if self.dry_run else "applied"
        result.message = written.detail
        self._audit(result)
        if not self.dry_run:
            self._announce(result)
        return True

    def _own_change(self, change_id: str) -> "WriteResult | None":
        """After a failed write: the stored split's version when the record holds this change."""
        from opsctl.traffic.base import WriteResult

        try:
            stored = self.actuator.read()
        except OpsctlError:
            return None
        if records.find_change(stored.record, change_id=change_id) is None:
            return None
        return WriteResult(stored.version, False, "applied (recognised in the change record after a lost answer)")

    def _confirm(self, confirm: Callable[[ChangeResult], bool], result: ChangeResult, before: Split | None,
                 confirmed: list[Split | None]) -> None:
        """Ask once. A retry after a conflict may proceed only if the split is still the one confirmed."""
        if not confirmed:
            if not confirm(result):
                result.outcome, result.message = "declined", "not confirmed; nothing changed"
                self._audit(result)
                raise OpsctlError("not confirmed; nothing changed")
            confirmed.append(before)
        elif confirmed[0] != before:
            result.outcome = "conflict"
            result.message = ("the split changed after you confirmed: it is now "
                              f"{before.describe(self.order) if before else 'unset'}")
            self._audit(result)
            raise ConflictError(result.message, hint="check `opsctl traffic status` and run again")

    # -- steps ------------------------------------------------------------------------------------

    def _check(self, result: ChangeResult, ctx: GuardContext, names: Sequence[str]) -> list[GuardResult]:
        checked = [guard(name)(ctx) for name in names]
        result.guards.extend(checked)
        failed = [g for g in checked if not g.ok]
        if not failed:
            return checked
        result.outcome = "refused"
        result.message = "; ".join(f"{g.name}: {g.message}" for g in failed)
        self._audit(result)
        first = failed[0]
        if first.name == "bounds":
            raise UsageError(f"invalid split: {first.message}", hint=first.remedy)
        hint = " | ".join(g.remedy for g in failed if g.remedy)
        if len(failed) == 1:
            text = f"refused by guard {first.name}: {first.message}"
        else:
            text = f"refused by guards {', '.join(g.name for g in failed)}: {result.message}"
        raise GuardRefused(text, hint=hint or None)

    @staticmethod
    def _shortfall(requested: Split, after: Split, limit: dict[str, int]) -> dict[str, Any]:
        return {
            b: {"asked": requested.weight(b), "moved_to": after.weight(b), "capacity_share": fits,
                "not_moved": requested.weight(b) - after.weight(b)}
            for b, fits in limit.items()
            if requested.weight(b) != after.weight(b)
        }

    def _audit(self, result: ChangeResult) -> None:
        entry = {"kind": "traffic", **result.to_dict(self.order), **self.audit_fields, "pid": os.getpid()}
        # The controller's clock stamps the entry, so the rate guard compares like with like in drills
        # on simulated time; on the wall clock it is simply now.
        written = self.audit.append(entry, now=self.clock.now())
        result.audited = True
        if self.cfg.state.backend == "kubernetes":
            change_log().info(json.dumps({"log": "opsctl.traffic.change", **written}, default=str,
                                         separators=(",", ":")))

    def _announce(self, result: ChangeResult) -> None:
        assert result.after is not None  # announced once applied: the split it wrote
        notice = ChangeNotice(result.action, result.before, result.after, result.actor, result.reason,
                              result.incident, result.emergency or result.action == "failover", result.overrides)
        try:
            recorded = self.actuator.record_event(notice)
            if recorded:
                result.recorded.append(recorded)
        except OpsctlError as exc:
            result.warnings.append(f"the change is applied, but recording its Kubernetes Event failed: {exc.message}")
        for hook in self.hooks:
            try:
                hook.on_change(notice)
                result.recorded.append(f"hook {hook.name}")
            except Exception as exc:  # a hook must not turn an applied change into a failure
                result.warnings.append(f"the change is applied, but hook {hook.name} failed: {exc}")
