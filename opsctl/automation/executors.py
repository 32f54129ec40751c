"""The live Executor: the traffic controller, the pager and the vendor ticket provider.

Wiring only: the policy engine decides what to do, the traffic guards decide whether a change may
happen. Mapping to the Executor's outcomes:

    controller applied            -> applied      (data: the split before and after, the operation)
    controller unchanged          -> noop         (traffic was already away from the backend)
    GuardRefused / bounds         -> refused      (freeze, rate limit, budget, capacity)
    anything else                 -> raised: the engine records `failed` and the event is retried

Failover outside a freeze is a routine change and passes every guard. Inside a freeze it is an
emergency tied to the incident only when the policy says `emergency_in_freeze`; otherwise the
freeze guard refuses it. A restore is always routine (inside a freeze it waits for the end). It
returns to the split saved by the failover, and only when the split is still the one the failover
wrote: traffic somebody moved since is left to a human.
"""

from __future__ import annotations

import os
import socket
import threading
from dataclasses import replace
from typing import TYPE_CHECKING

from opsctl.automation.actions import (
    FailoverRequest, NoteRequest, Outcome, PageRequest, RestoreRequest, TicketNoteRequest, TicketRequest,
)
from opsctl.errors import ConfigError, GuardRefused, UsageError

if TYPE_CHECKING:
    from opsctl.clock import Clock
    from opsctl.config import Config
    from opsctl.paging.base import Pager
    from opsctl.tickets.base import TicketProvider
    from opsctl.traffic.canary import Readiness
    from opsctl.traffic.change import ChangeResult
    from opsctl.traffic.change_entry import ChangeEntry
    from opsctl.traffic.record import ChangeRecord
    from opsctl.traffic.split import Split

SOURCE = "opsctl serve"


def automation_actor() -> str:
    return os.environ.get("OPSCTL_ACTOR", "").strip() or f"opsctl-serve@{socket.gethostname()}"


class LiveExecutor:
    name = "live"

    def __init__(self, cfg: "Config", *, clock: "Clock | None" = None):
        from opsctl.clock import WallClock
        from opsctl.traffic.service import TrafficService

        self.cfg = cfg
        self.clock: Clock = clock or WallClock()
        self.order = list(cfg.backends)
        self._pager: Pager | None = None
        # The traffic front door every actor uses (with the pager change hook, like `opsctl traffic`).
        self.traffic = TrafficService(cfg, clock=self.clock, actor=automation_actor())
        self.controller = self.traffic.controller
        self._desks: dict[str, TicketProvider] = {}
        self._lock = threading.Lock()

    # -- traffic ------------------------------------------------------------------------------

    def failover(self, request: FailoverRequest) -> Outcome:
        from opsctl.freeze import FreezeCalendar

        backend = request.backend
        receivers = [b for b in self.order if b not in (backend, self.cfg.traffic.degradation)]
        if not receivers:
            return Outcome("skipped", f"there is no other backend to fail {backend} over to")
        from opsctl.traffic.record import now_for

        # The controller's freeze guard's time: the API server's for a Kubernetes actuator, never this host's clock.
        from opsctl.errors import ConfigError
        from opsctl.traffic.freeze_source import current_freezes

        try:  # the freezes as the config holds them now (one added while serve runs binds it)
            frozen = [s.name for s in FreezeCalendar(current_freezes(self.cfg)).active(
                now_for(self.controller.actuator, self.clock))]
        except ConfigError:
            frozen = ["(the freezes, unreadable)"]  # freezes that no longer load: the guard refuses routine changes
        emergency = bool(frozen) and request.emergency_in_freeze
        incident = request.incident or f"opsctl-automation-{request.context.policy}-{backend}"
        reason = f"opsctl serve, policy {request.context.policy}: {request.context.summary}"[:500]
        operation = request.operation_id or None
        try:
            with self.controller.acting_as(term=request.term, operation_id=operation):
                result = self.traffic.failover(backend, incident, to=receivers, reason=reason, emergency=emergency,
                                               check=False)
                if not emergency and not frozen and request.paging and _no_data_on_receivers(result):
                    # A paging backend's users cannot wait for data on the receiving side: the move
                    # is the emergency the CLI's --emergency --incident would make it, the override
                    # recorded in the audit (the controller's) and on the incident (the outcome's data).
                    emergency, how_why = True, "no data to judge the receiving side's error budget"
                    result = self.traffic.failover(backend, incident, to=receivers, reason=reason, emergency=True,
                                                   check=False)
                else:
                    how_why = ""
        except (GuardRefused, UsageError) as exc:  # before any attempt: nothing to report but the refusal
            return Outcome("refused", exc.message)
        if isinstance(result.error, (GuardRefused, UsageError)):  # a guard, or bounds: a plan the split cannot take
            return Outcome("refused", result.error.message, self._result_data(result))
        result.raise_for_outcome()  # a conflict, a fenced write: the episode's retry decides
        data = self._result_data(result)
        if result.outcome == "unchanged":
            # Its own earlier attempt (an answer lost, a replica that died mid-failover) may have written it.
            applied = self._applied_failover(incident, operation, resumed=request.resumed)
            if applied is not None:
                return Outcome("applied", f"failed over away from {backend} (written by {applied.actor} at"
                                          f" {applied.time}, recognised by its operation)", {
                                   "operation": applied.operation, "outcome": "applied",
                                   "before": applied.before, "after": applied.after})
            return Outcome("noop", f"no user traffic on {backend} to move ({self._describe(result.after)})", data)
        how = " as an emergency overriding " + ", ".join(frozen or [how_why]) if emergency else ""
        if how_why:
            data["emergency"] = how_why
        moved = f"{self._describe(result.before)} -> {self._describe(result.after)}"
        short = (f"; {result.partial.message}" if result.partial is not None
                 else f"; capacity kept some on {backend}: {result.shortfall}" if result.shortfall else "")
        return Outcome("applied", f"failed over away from {backend}{how}: {moved}{short}", data)

    def _applied_failover(self, incident: str, operation: str | None, *, resumed: bool) -> "ChangeEntry | None":
        """The failover this episode applied, from the shared change record: by its operation id (read
        your own write), or for a resumed episode of an older version, by incident (None if none)."""
        from opsctl.traffic.record import find_change

        from opsctl.traffic.record import newest_first

        record = self.traffic.read().record
        if operation and find_change(record, operation=operation, action="failover") is not None:
            steps = [e for e in newest_first(record) if e.operation == operation and e.action == "failover"]
            # Its first step saved the split before; its last (top-ups as replicas became Ready) wrote the split now.
            if steps[-1].before and steps[0].after:
                return replace(steps[0], before=steps[-1].before)
        if resumed:
            for entry in self.traffic.history(incident=incident):
                if entry.action == "failover" and entry.before and entry.after:
                    return entry
        return None

    def restore(self, request: RestoreRequest) -> Outcome:
        from opsctl.traffic.record import find_change, now_for
        from opsctl.traffic.split import Split

        if request.canary:
            return self._canary_look(request)
        saved = request.saved or {}
        if (not saved.get("before") or not saved.get("after")) and request.failover_operations:
            adopted = next(filter(None, (self._applied_failover(request.incident or "", operation, resumed=False)
                                         for operation in request.failover_operations)), None)
            if adopted is None:
                return Outcome("noop", "the failover's result was never recorded and the change record holds no"
                                       " change under its operation: it was never written, nothing to restore")
            saved = {"before": adopted.before, "after": adopted.after}
        if not saved.get("before") or not saved.get("after"):
            return Outcome("skipped", "the failover saved no split to return to; restore left to a human")
        before = Split.from_dict(saved["before"], self.order, "the split saved by the failover")
        after = Split.from_dict(saved["after"], self.order, "the split the failover wrote")
        stored = self.controller.read()
        current = stored.split
        operation = request.operation_id or None
        now = now_for(self.controller.actuator, self.clock)
        held = reflap_hold(stored.record, request.backend, request.hold_down, now)
        if held is not None and current == after:
            reason, until = held
            return Outcome("refused", reason, {"retry_in": max(1.0, until - now)})
        if current == before and operation:
            own = find_change(stored.record, operation=operation, action="restore")
            if own is not None:  # an earlier attempt's write, whose answer was lost
                return Outcome("applied", f"restored {request.backend} (recognised by its operation"
                                          f" {operation} in the change record)",
                               {"operation": operation, "outcome": "applied", "before": own.before,
                                "after": own.after})
        if current != after:
            shown = current.describe(self.order) if current else "unknown"
            return Outcome("skipped", f"the split changed since the failover (now {shown}, the failover wrote"
                                      f" {after.describe(self.order)}); restore left to a human")
        # Never an emergency: inside a freeze the restore waits (retried every restore_retry) until it ends.
        incident = request.incident or f"opsctl-automation-{request.context.policy}-{request.backend}"
        try:
            with self.controller.acting_as(term=request.term, operation_id=operation):
                result = self.traffic.restore_now(
                    incident, before, expect=after, check=False,
                    reason=f"opsctl serve, policy {request.context.policy}: alert resolved, hold-down passed")
        except (GuardRefused, UsageError) as exc:  # before any attempt: nothing to report but the refusal
            return Outcome("refused", exc.message)
        refused = result.error
        if isinstance(refused, (GuardRefused, UsageError)):
            if "changed since the failover" in refused.message:
                return Outcome("skipped", refused.message, self._result_data(result))
            return Outcome("refused", refused.message, self._result_data(result))
        result.raise_for_outcome()  # a conflict, a fenced write: the episode's retry decides
        data = self._result_data(result)
        if result.outcome == "unchanged":
            return Outcome("noop", "the split is already the one saved before the failover", data)
        return Outcome("applied", f"restored {request.backend}: {self._describe(result.before)} ->"
                                  f" {self._describe(result.after)}", data)

    def _canary_look(self, request: RestoreRequest) -> Outcome:
        """One look at the canary restore (opsctl/traffic/canary_run.py): `noop` without a move (its
        data["restore"] the progress to keep), else the move's outcome, data["move"] its kind."""
        from opsctl.traffic.canary import CanarySettings
        from opsctl.traffic.canary_run import restore_tick, resume
        from opsctl.traffic.record import now_for
        from opsctl.traffic.split import Split

        settings = CanarySettings.from_config(self.cfg)
        saved = request.saved or {}
        if settings is None or not saved.get("before") or not saved.get("after"):
            return Outcome("skipped", "the failover saved no split to return to; restore left to a human")
        before = Split.from_dict(saved["before"], self.order, "the split saved by the failover")
        after = Split.from_dict(saved["after"], self.order, "the split the failover wrote")
        now = now_for(self.controller.actuator, self.clock)
        backend = request.backend
        progress = request.progress or resume(before, after, self.controller.read().split, backend, now, settings)
        if progress is None:
            current = self.controller.read().split
            return Outcome("skipped", f"the split changed since the failover (now {self._describe(current)}, the"
                                      f" failover wrote {after.describe(self.order)}); restore left to a human")
        from opsctl.freeze import FreezeCalendar

        incident = request.incident or f"opsctl-automation-{request.context.policy}-{backend}"
        frozen = ", ".join(w.name for w in FreezeCalendar(self.cfg.freezes).active(now))
        with self.controller.acting_as(term=request.term):
            tick = restore_tick(self.traffic, settings, progress, incident=incident, backend=backend, before=before,
                                after=after, now=now, reason=f"opsctl serve, policy {request.context.policy}",
                                frozen=frozen, readiness=lambda: self.readiness(backend))
        if tick.move is None or tick.result is None:
            return Outcome("noop", tick.progress.why, {"restore": tick.progress})
        result, kind = tick.result, tick.move.kind
        data = {**self._result_data(result), "restore": tick.progress, "move": kind}
        if isinstance(result.error, (GuardRefused, UsageError)):
            status = "skipped" if "changed since" in result.error.message else "refused"
            return Outcome(status, f"{kind}: {result.error.message}", data)
        result.raise_for_outcome()  # a conflict, a fenced write: tried again at the next look
        if tick.recognised:
            return Outcome("applied", f"{kind}: recognised by its operation {result.operation_id}", data)
        if result.outcome == "unchanged":
            return Outcome("noop", f"{kind}: the split already is {self._describe(result.after)}", data)
        return Outcome("applied", f"{kind}: {self._describe(result.before)} -> {self._describe(result.after)}"
                                  f" ({tick.move.why})", data)

    def readiness(self, backend: str) -> "Readiness | None":
        """The backend's pods, ready of desired, from the capacity source (None: opsctl does not
        count its pods, a vendor): what holds a canary restore toward a fleet still short of pods."""
        from opsctl.traffic.canary_readiness import read_readiness

        return read_readiness(self.cfg, backend)

    def _describe(self, split: "Split | None") -> str:
        return split.describe(self.order) if split is not None else "unset"

    def _result_data(self, result: "ChangeResult") -> dict[str, object]:
        data: dict[str, object] = {"operation": result.operation_id, "outcome": result.outcome}
        if result.before is not None:
            data["before"] = result.before.to_dict(self.order)
        if result.after is not None:
            data["after"] = result.after.to_dict(self.order)
        if result.overrides:
            data["overrides"] = list(result.overrides)
        if result.partial is not None:  # what moved and what is stuck, for the page (capacity)
            data["partial"] = result.partial.to_dict()
        return data

    # -- paging -------------------------------------------------------------------------------

    @property
    def pager(self) -> "Pager":
        with self._lock:
            if self._pager is None:
                from opsctl.paging.registry import open_pager

                self._pager = open_pager(self.cfg, clock=self.clock)
            return self._pager

    def page(self, request: PageRequest) -> Outcome:
        from opsctl.paging.base import Link, PageEvent

        links = (Link(request.context.generator_url, "alert source"),) if request.context.generator_url else ()
        result = self.pager.trigger(PageEvent(
            summary=request.summary, source=SOURCE, severity=request.severity, dedup_key=request.dedup_key,
            component=request.context.labels.get("backend"), group=request.context.policy,
            custom_details=dict(request.details), links=links, title=request.title,
        ))
        data = {"incident": result.dedup_key or request.dedup_key}
        if result.incident_id:
            data["incident_id"] = result.incident_id
        return Outcome("applied", result.detail or f"paged: {request.summary}", data)

    def note(self, request: NoteRequest) -> Outcome:
        """An incident note where the pager has them; else a change event, which PagerDuty shows
        on the service's timeline next to the incident."""
        from opsctl.paging.base import ChangeEvent

        add_note = getattr(self.pager, "add_note", None)
        if callable(add_note):
            add_note(request.incident, request.text)
            return Outcome("applied", f"note added to {request.incident}")
        self.pager.change_event(ChangeEvent(
            summary=request.text[:1024], source=SOURCE, timestamp=self.clock.now(),
            custom_details={"incident": request.incident, "policy": request.context.policy},
        ))
        return Outcome("applied", f"recorded as a change event next to {request.incident}")

    # -- tickets ------------------------------------------------------------------------------

    def _desk(self, vendor: str) -> "TicketProvider":
        with self._lock:
            if vendor not in self._desks:
                from opsctl.tickets.registry import open_ticket_provider

                self._desks[vendor] = open_ticket_provider(self.cfg, vendor, clock=self.clock)
            return self._desks[vendor]

    def file_ticket(self, request: TicketRequest) -> Outcome:
        from opsctl.tickets.base import Link, TicketRequest as Ticket

        vendor = self.cfg.backends[request.backend].vendor
        if not vendor:  # the engine files only for vendor backends that name one (policy._ticket)
            return Outcome("skipped", f"{request.backend} names no vendor to file a ticket with")
        links = (Link(request.context.generator_url, "alert source"),) if request.context.generator_url else ()
        filed = self._desk(vendor).file(Ticket(
            vendor=vendor, category=request.category, severity=request.severity, subject=request.summary,
            body=request.description, links=links, idempotency_key=request.idempotency_key,
        ))
        status = "noop" if filed.outcome in ("existing", "recovered") else "applied"
        return Outcome(status, f"{vendor} ticket {filed.id} ({filed.outcome}, {filed.provider})",
                       {"ticket": filed.id, "url": filed.url or ""})

    def ticket_note(self, request: TicketNoteRequest) -> Outcome:
        """A note on the ticket filed already, where the desk takes notes (`add_note`); else skipped
        (the incident's own note says what the ticket would have been told)."""
        vendor = self.cfg.backends[request.backend].vendor
        if not vendor:
            return Outcome("skipped", f"{request.backend} names no vendor")
        desk = self._desk(vendor)
        if not getattr(desk, "takes_notes", False):
            return Outcome("skipped", f"{vendor} tickets ({desk.name}) take no notes from opsctl")
        desk.add_note(request.ticket, request.text)  # type: ignore[attr-defined]
        return Outcome("applied", f"note added to {vendor} ticket {request.ticket}", {"ticket": request.ticket})


def check_wiring(cfg: "Config") -> None:
    """Fail at start, not at 3 a.m.: every vendor a ticket action may reach must be configured."""
    problems = []
    for policy in cfg.automation.policies:
        if policy.actions.ticket is None:
            continue
        fixed = policy.actions.failover.backend if policy.actions.failover else None
        candidates = [fixed] if fixed else list(cfg.backends)
        for name in candidates:
            backend = cfg.backends[name]
            if backend.kind == "vendor" and backend.vendor and backend.vendor not in cfg.tickets.vendors:
                problems.append(f"automation.policies ({policy.name}): tickets for {name} go to vendor"
                                f" {backend.vendor!r}, which tickets.vendors does not configure")
            fixed = policy.actions.ticket.category  # unset: by the cause, through runbooks.tickets
            where = "actions.ticket.category" if fixed else "runbooks.tickets (the category by cause)"
            route = cfg.tickets.vendors.get(backend.vendor or "")
            for category in [fixed] if fixed else cfg.runbooks.tickets.categories:
                if route is not None and category not in route.categories:
                    problems.append(f"automation.policies ({policy.name}): {where}: {category!r} is not a category"
                                    f" of vendor {backend.vendor!r} (known: {', '.join(sorted(route.categories))})")
    if problems:
        raise ConfigError(f"{cfg.source_path}: automation cannot file its tickets", problems=sorted(set(problems)))


def open_executor(cfg: "Config") -> LiveExecutor:
    check_wiring(cfg)
    return LiveExecutor(cfg)


def _no_data_on_receivers(result: "ChangeResult") -> bool:
    """Whether the only thing that refused the failover is the budget guard's no data on the
    receiving side (guards.check_budget: "no data to judge ...'s error budget")."""
    if not isinstance(result.error, GuardRefused):
        return False
    refused = [g for g in result.guards if not g.ok]
    return bool(refused) and all(g.name == "budget" and g.message.startswith("no data to judge") for g in refused)


__all__ = ["LiveExecutor", "automation_actor", "check_wiring", "open_executor"]


# A restore into a backend that failed over again soon after its last restore waits longer each
# time: the hold-down times 2 ** (earlier failovers of that backend within REFLAP_WINDOW), counted
# from the latest failover, at most REFLAP_MAX_FACTOR hold-downs. The pages of a failed-over
# backend resolve because it has no traffic left, not because it is healthy, so a long outage
# would otherwise flap back into the outage once per hold-down (each time costing the fast tier's
# detection at the restored share); the rate guard bounds the count, this spaces them out.
REFLAP_WINDOW = 6 * 3600
REFLAP_MAX_FACTOR = 16


def reflap_hold(record: "ChangeRecord | None", backend: str, hold_down: float, now: float) -> tuple[str, float] | None:
    """Why a restore of `backend` waits and until when, or None: from the failovers away from it in
    the change record (one per operation) within REFLAP_WINDOW."""
    from opsctl.audit import timestamp
    from opsctl.traffic.record import newest_first

    if hold_down <= 0:
        return None
    failovers: dict[str, float] = {}
    for entry in newest_first(record):
        before, after = entry.before_split, entry.after_split
        moved_away = (before.weight(backend) if before else 0) > (after.weight(backend) if after else 0)
        if entry.action == "failover" and entry.outcome == "applied" and moved_away and entry.ts >= now - REFLAP_WINDOW:
            failovers.setdefault(entry.operation or entry.id, entry.ts)
    earlier = len(failovers) - 1
    if earlier < 1:
        return None
    wait = hold_down * min(2 ** earlier, REFLAP_MAX_FACTOR)
    latest = max(failovers.values())
    if now >= latest + wait:
        return None
    return (f"restore held by the re-failover backoff: {backend} was failed over {earlier + 1} times in the last"
            f" {REFLAP_WINDOW // 3600}h, so traffic returns {wait:.0f}s after the latest failover"
            f" ({timestamp(latest + wait)}) if nothing fires again", latest + wait)
