"""What each policy does about an alert (`PolicyEngine`); which policies an alert matches is policy.py.
The engine holds what it acts with (its settings, backends, the incident store, executors: live,
and dry run for a policy or the whole automation in dry run; each policy's hold-down and ticket
category; the incident's dedup key), how one action is run and recorded (the record of actions,
the `on_action` counter, the log) and the words of what it sends (page and ticket titles, the
details): one class, one module (issue 36 item 8).

The incident (opsctl/incident/) is the only record it reads and writes to decide: every alert a
policy matches joins its incident, and what a policy does about its target there is the
incident's response (`IncidentResponse`, docs/decisions/0215-responses-on-the-incident.md). Two
steps (docs/decisions/0216-deliveries-not-persisted.md): `admit` takes a notification's matching
alerts into their incident and responses in one compare-and-swap write (what the answer to
Alertmanager waits for), `act` takes the actions afterwards, on a worker; what the record shows is
still owed (`owed`, `resumable`) is acted on again. For a firing alert, a response takes its
actions once, in this order:

    failover  move all user traffic away from the backend, through the traffic guards; during a
              freeze it is an emergency tied to the incident only where the policy says so. The
              response says "started" before the move is tried, so a replica taking over from one
              killed mid-failover adopts what it wrote (its operation id is chosen before the write)
    page      the incident's one PagerDuty incident (its dedup key is Alertmanager's for the
              service's group), asking a human to confirm (or act, when the failover was refused)
    ticket    at most one ticket per vendor per incident
    note      add what was done to the incident

When every matching alert of a response resolved, a policy with `restore` waits out the hold-down
(`restore_due` on the response) and then returns the traffic (`run_due_restores`, from the open
incident: a restarted serve or a new leader finds it there); an alert firing again inside the
hold-down cancels the restore. With `automation.restore` set the canary restore runs instead, its
progress kept in `Incident.restore` by response key. Traffic someone else moved is never
"restored" by the automation. A policy in dry run (or the global dry run) goes through the same
steps with an executor that changes nothing. Workers and the restore sweep take a response's lock
(per policy and target; across the host's processes in local mode, response_lock.py) while they act
on it, and an admit takes it for a write that changes the response's state; replicas never act
together in team mode (only the leader acts, every write fenced by its term).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping

from opsctl.automation.action_record import ActionRecord
from opsctl.automation.actions import (
    Context, DryRunExecutor, Executor, FailoverRequest, NoteRequest, Outcome, PageRequest, RestoreRequest, TicketNoteRequest,
    TicketRequest, operation_id,
)
from opsctl.automation.policy import ActionFailed, AlertEvent, CompiledPolicy, Taken, matching
from opsctl.automation.response_lock import ResponseLocks
from opsctl.paging.title import incident_title, names_all, widened
from opsctl.slo import conventions as cv

if TYPE_CHECKING:
    from opsctl.automation.action_log import ActionLog
    from opsctl.config import AutomationConfig, Backend, RunbookTickets
    from opsctl.incident.record import Incident, IncidentResponse
    from opsctl.incident.store import IncidentStore, Joined

log = logging.getLogger("opsctl.automation")

SEVERITY_RANK = ("info", "warning", "error", "critical")
ACT_NOW = ("refused", "failed")  # failover outcomes that page "act now"
FAILOVER_DONE = ("applied", "noop", "dry_run")  # a failover in any other state is tried (again)
LOOK_INTERVAL = 1.0  # seconds: the restore sweep reads the open incident at most this often
PAGE_EVENTS = 20  # PagerDuty event ids an incident's page remembers (a replay of one writes nothing)
RETRY_CAP = 30.0  # seconds: the longest wait between tries of a response that could not act yet


@dataclass(frozen=True)
class Admitted:
    """One alert taken into its incident on receipt (`PolicyEngine.admit`), for a worker to act on:
    the alert, the incident as written, the policies its labels match and those chosen by its
    cause, and what the write decided (restores cancelled, responses ended, late copies)."""

    event: AlertEvent
    joined: "Joined"
    candidates: tuple[str, ...]
    chosen: tuple[str, ...]
    flipped: frozenset[str]
    cancelled: frozenset[str]
    ended: tuple["IncidentResponse", ...]
    late: frozenset[str]


@dataclass(frozen=True)
class Admission:
    """What a notification's admit wrote: its alerts some policy matches, and whether anything
    was new (False: every alert already held in that state, a resend: nothing written)."""

    items: tuple[Admitted, ...]
    wrote: bool


@dataclass(frozen=True)
class Begun:
    """A firing alert taken into its response: the response as written, whether it cancelled a
    pending restore, whether its failover was started by a replica that died before finishing it,
    and the targets other open responses moved traffic away from."""

    response: "IncidentResponse"
    cancelled: bool
    resumed: bool
    moved_away: frozenset[str]


@dataclass
class PolicyEngine:
    """Acts on alerts (firing: failover, page, ticket, note; resolved: the restore's hold-down) and
    PagerDuty events, and restores what is due; raises ActionFailed for a retry."""

    settings: "AutomationConfig"
    backends: Mapping[str, "Backend"]
    incidents: "IncidentStore"  # the incidents: an alert's incident owns its page, tickets, moves and responses
    live: Executor
    dry: Executor = field(default_factory=DryRunExecutor)
    clock: Callable[[], float] = time.time
    on_action: Callable[[Taken], None] | None = None
    # runbooks.tickets: the ticket category by cause (None: the defaults, inference for everything)
    tickets: "RunbookTickets | None" = None
    actions: "ActionLog | None" = None  # the record of actions (an audit; None: not kept)
    # one response acted on at a time: across the processes of one host in local mode (response_lock.py)
    locks: ResponseLocks = field(default_factory=ResponseLocks)

    def __post_init__(self) -> None:
        self.policies = [CompiledPolicy.of(p) for p in self.settings.policies]
        self.by_name = {p.name: p for p in self.policies}
        self._closable_at: float | None = None  # when the open incident may close (checked by the sweep)
        self._looked = float("-inf")  # the restore sweep's last read of the open incident
        self._canary_book: dict[str, tuple[float, str]] = {}  # response key -> next look, what was last said
        self._acting = threading.local()  # the incident this thread acts on (for intents written before actions)
        self._admitting = threading.Lock()
        self._holds = threading.local()  # the response locks an admit holds until its write (ExitStack)
        self._book = threading.Lock()  # guards _next_try
        self._next_try: dict[str, tuple[int, float]] = {}  # policy/target -> (tries that could not act, next)

    # -- the incident ---------------------------------------------------------------------------

    def page_key(self) -> str:
        """The incident's PagerDuty dedup key: Alertmanager's own for the service's group on the
        paging route (sha256 of its group key), so its page and ours are one PagerDuty incident."""
        from opsctl.incident.grouping import page_key

        return page_key(self.settings.incident.paging_route_key, self.incidents.service)

    def admit(self, events: list[AlertEvent]) -> "Admission":
        """The alerts some policy matches taken into their incident and its responses, in one
        compare-and-swap write under the leader's term (`IncidentStore.take_alerts`): the intent the
        answer to Alertmanager waits for (docs/decisions/0216-deliveries-not-persisted.md). A firing
        alert joins (or opens) the incident and each chosen policy's response (a pending restore
        cancelled); a resolve starts the response's hold-down or closes it. The actions follow
        (`act`). Raises what the store raises (unreachable, a conflict that kept coming back, a
        malformed stored incident): nothing was written, and the sender resends."""
        from opsctl.incident.record import IncidentAlert

        matched = [(e, matching(self.policies, e.labels)) for e in events]
        matched = [(e, c) for e, c in matched if c]
        if not matched:
            return Admission((), False)
        alerts = [IncidentAlert(fingerprint=e.fingerprint, alertname=e.labels.get("alertname", ""),
                                starts_at=e.starts_at, status="firing" if e.status == "firing" else "resolved",
                                slo=e.labels.get("slo", ""), backend=e.labels.get("backend", ""),
                                severity=e.labels.get("severity", ""), cause=e.cause or "")
                  for e, _ in matched]
        decided: list[tuple[tuple[str, ...], frozenset[str], frozenset[str], tuple["IncidentResponse", ...],
                            frozenset[str]]] = []

        def hold(policy: str, target: str) -> None:
            """A response's state changes (a restore cancelled, a hold-down begun): not while a worker
            or the restore sweep acts on it (they hold its lock); the write is then retried on what
            they wrote (its compare-and-swap fails)."""
            if (policy, target) not in held:
                self._holds.stack.enter_context(self._lock(policy, target))
                held.add((policy, target))

        def respond(incident: "Incident", joined: list["Joined | None"]) -> "Incident | None":
            decided.clear()
            for (event, candidates), one in zip(matched, joined):
                if one is None or incident.takeover is not None:
                    decided.append(((), frozenset(), frozenset(), (), frozenset()))
                    continue
                incident, decision = self._take_in(incident, event, candidates, hold)
                decided.append(decision)
            return incident

        held: set[tuple[str, str]] = set()
        with contextlib.ExitStack() as holds:
            self._holds.stack = holds
            try:
                # One admit at a time in this process: concurrent copies of a notification meet here,
                # not in compare-and-swap conflicts and merged openings.
                with self._admitting:
                    taken = self.incidents.take_alerts(alerts, page_key=self.page_key(), then=respond)
            finally:
                self._holds.stack = None
        items = []
        for (event, candidates), one, (chosen, flipped, cancelled, ended, late) in zip(matched, taken.joined, decided):
            if one is None:
                continue
            items.append(Admitted(event, one, tuple(p.name for p in candidates), chosen, flipped, cancelled, ended,
                                  late))
        if items and not items[-1].joined.incident.firing():
            self._closable_at = items[-1].joined.incident.last_alert_at + self.incidents.quiet
        return Admission(tuple(items), taken.wrote)

    def _take_in(self, incident: "Incident", event: AlertEvent, candidates: list[CompiledPolicy],
                 hold: Callable[[str, str], None]) -> tuple[
            "Incident", tuple[tuple[str, ...], frozenset[str], frozenset[str], tuple["IncidentResponse", ...],
                              frozenset[str]]]:
        """One alert taken into the responses of the policies it concerns (`admit`, in its write):
        (the incident, (chosen policies, those kept by opening, restores cancelled, responses ended,
        policies for which the copy was late))."""
        from opsctl.incident.grouping import response_key
        from opsctl.incident.record import IncidentResponse

        chosen, flipped = self._by_cause(candidates, event, incident)
        now = self.clock()
        cancelled: set[str] = set()
        late: set[str] = set()
        ended: list["IncidentResponse"] = []
        for policy in chosen:
            target = policy.target(event.labels)
            current = incident.response(policy.name, target)
            if event.status == "firing":
                key = response_key(policy.name, target, event.fingerprint, event.starts_at)
                if current is None and incident.response_by_key(key) is not None:
                    late.add(policy.name)  # the response this alert opened is closed: a late copy
                    continue
                current = current or IncidentResponse(policy=policy.name, target=target, key=key, opened_at=now)
                response, stale = current.seen(event.fingerprint, event.starts_at, "firing")
                if stale:
                    late.add(policy.name)
                    continue
                if response.state == "restore_pending":
                    hold(policy.name, target)
                    response = response.changed(state="open", restore_due=None)
                    cancelled.add(policy.name)
                incident = incident.with_response(response)
                continue
            if current is None:
                continue
            response, stale = current.seen(event.fingerprint, event.starts_at, "resolved")
            if stale:
                continue
            if response.state == "open" and not response.firing():
                hold(policy.name, target)
                restores = bool(policy.policy.actions.restore)
                if restores and response.may_have_moved_traffic:
                    response = response.changed(state="restore_pending", restore_due=now + self.hold_down(policy),
                                                restore_refusals=0)
                else:
                    why = "traffic was not moved by this automation" if restores else "the policy does not restore"
                    response = response.changed(state="closed", closed_at=now, closed_because=f"alerts resolved; {why}")
                ended.append(response)
            incident = incident.with_response(response)
        return incident, (tuple(p.name for p in chosen), frozenset(flipped), frozenset(cancelled), tuple(ended),
                          frozenset(late))

    @staticmethod
    def incident_key(incident: "Incident") -> str:
        """The incident's page (its dedup key): what every action of the incident names."""
        return incident.page.dedup_key if incident.page is not None else ""

    def intend(self, action: str, key: str, detail: str) -> None:
        """The intent of a page, ticket or note written on the incident this thread acts on, under
        the leader's term, before the action (FencedExecutor): a paused leader's write is refused
        (a new leader rewrote the open incident under its own term) and the action never happens."""
        from opsctl.incident.record import IncidentIntent

        ident = getattr(self._acting, "incident", None)
        if not ident:
            return
        import hashlib

        at = self.clock()  # always a write (a retry's too): the term is checked on every one
        name = f"{action}:{key}:{hashlib.sha256(detail.encode()).hexdigest()[:12]}"
        self.incidents.change(ident, lambda i: i.with_intent(IncidentIntent(key=name, action=action, at=at)))

    def fence(self) -> None:
        """This replica now leads: the open incident rewritten under its term, and the restore
        sweep reads it at once (what the previous leader left is carried on from the record)."""
        self.incidents.fence_open()
        self._looked = float("-inf")
        self._canary_book.clear()
        with self._book:
            self._next_try.clear()  # a new leader tries what is owed at once

    def _lock(self, policy: str, target: str) -> "contextlib.AbstractContextManager[None]":
        return self.locks.hold(policy, target)

    def move(self, incident: "Incident", kind: str, backend: str, outcome: Outcome,
             response: "IncidentResponse | None" = None, **changes: Any) -> "Incident":
        """A traffic move recorded on its incident (applied ones, and a first refusal or failure),
        with the response's change in the same write."""
        from opsctl.incident.record import IncidentMove

        now = self.clock()
        move = IncidentMove(kind=kind, backend=backend, op_id=str(outcome.data.get("operation") or ""),
                            status=outcome.status, at=now, detail=outcome.detail[:300],
                            overrides=tuple(str(o) for o in outcome.data.get("overrides") or ()))

        def change(i: "Incident") -> "Incident | None":
            new = i.changed(**changes) if changes else i
            if response is not None:
                new = _with_admitted(new, response)
            last = next((m for m in reversed(i.moves) if m.kind == kind and m.backend == backend), None)
            if outcome.status == "applied" or last is None or last.status != outcome.status:
                new = new.with_move(move)  # a retry's same outcome adds no move
            if kind == "failover" and outcome.status == "applied" and new.state == "open":
                new = new.changed(state="mitigated")
            if kind == "restore" and not new.moved() and not new.firing():
                new = new.changed(state="resolved")
            return new

        changed = self.incidents.change(incident.id, change)
        if not changed.firing() and not changed.moved():
            self._closable_at = max(now, changed.last_alert_at + self.incidents.quiet)
        return changed

    def _respond_with(self, incident: "Incident", response: "IncidentResponse", **changes: Any) -> "Incident":
        """The response's change written on its incident."""
        new = response.changed(**changes)
        written = self.incidents.change(incident.id, lambda i: _with_admitted(i, new))
        if not written.firing() and not written.moved():
            self._closable_at = max(self.clock(), written.last_alert_at + self.incidents.quiet)
        return written

    def close_due_incidents(self) -> None:
        if self._closable_at is None or self.clock() < self._closable_at:
            return
        self._closable_at = None
        self.incidents.close_due()

    def ticket_category(self, policy: CompiledPolicy, cause: str | None) -> str:
        """The policy's own category, else the cause's through runbooks.tickets."""
        fixed = policy.policy.actions.ticket.category if policy.policy.actions.ticket else None
        if fixed:
            return fixed
        if self.tickets is None:
            from opsctl.config import RunbookTickets

            self.tickets = RunbookTickets()
        return self.tickets.category_for(cause)

    def executor_for(self, policy: CompiledPolicy) -> tuple[Executor, bool]:
        dry = self.settings.dry_run or policy.policy.dry_run
        return (self.dry if dry else self.live), dry

    def hold_down(self, policy: CompiledPolicy) -> int:
        own = policy.policy.hold_down_seconds
        return self.settings.hold_down_seconds if own is None else own

    @staticmethod
    def _unrecorded_failover(incident_key: str, response: "IncidentResponse") -> tuple[str, ...]:
        """The operation id an unrecorded failover was written under (started, outcome never written)."""
        if not response.failover_unrecorded:
            return ()
        return (operation_id("failover", incident_key, response.target, response.key),)

    # -- recording ----------------------------------------------------------------------------

    def _run(self, policy: CompiledPolicy, event: AlertEvent | None, response: "IncidentResponse | None", action: str,
             dry: bool, call: Callable[[], Outcome], taken: list[Taken], failed: list[str]) -> Outcome:
        started = self.clock()
        try:
            outcome = call()
        except Exception as exc:
            log.warning("policy %s: %s failed: %s", policy.name, action, _describe(exc))
            outcome = Outcome("failed", _describe(exc))
            failed.append(f"{action}: {outcome.detail}")
        return self._record(policy, event, response, action, outcome, dry, taken, started=started)

    def _record(self, policy: CompiledPolicy, event: AlertEvent | None, response: "IncidentResponse | None",
                action: str, outcome: Outcome, dry: bool, taken: list[Taken], *,
                started: float | None = None, received_at: float | None = None) -> Outcome:
        finished = self.clock()
        received = received_at if received_at is not None else (event.received_at if event else finished)
        if self.actions is not None:
            self.actions.record(ActionRecord(
                event_key=event.key if event else None, policy=policy.name, episode=response.key if response else None,
                action=action, status=outcome.status, detail=outcome.detail, dry_run=dry, received_at=received,
                started_at=started if started is not None else finished, finished_at=finished,
            ))
        item = Taken(policy.name, action, outcome, dry, max(0.0, finished - received))
        taken.append(item)
        log.info("policy %s: %s %s%s: %s", policy.name, action, outcome.status, " (dry run)" if dry else "",
                 outcome.detail)
        if self.on_action:
            self.on_action(item)
        return outcome

    def _context(self, policy: CompiledPolicy, event: AlertEvent) -> Context:
        return Context(policy.name, event.labels.get("alertname", ""), dict(event.labels), event.summary(), event.key,
                       event.generator_url)

    @staticmethod
    def _ticket_summary(who: str, event: AlertEvent) -> str:
        what = event.labels.get("slo") or event.labels.get("alertname")
        cause = event.cause
        return f"{who}: {cv.cause_text(cause)} ({what})" if cause else f"{who}: {what} is failing"

    def _page_summary(self, policy: CompiledPolicy, event: AlertEvent, target: str, failover: Outcome | None,
                      incident: str = "") -> str:
        """The page's title: the alert's own summary (it names the backend, the cause and the burn),
        then what the automation did; a partial failover says what moved, what is stuck, why, and
        what on-call can do next, with the commands."""
        what = event.labels.get("slo") or event.labels.get("alertname", "alert")
        head = event.annotations.get("summary") or (
            f"{what}: {cv.cause_text(event.cause)}" if event.cause else f"{what} burning") + (
            f" ({event.labels.get('severity', 'alert')})")
        if failover is None:
            return head[:1024]
        partial = failover.data.get("partial") if failover.status == "applied" else None
        if isinstance(partial, dict) and partial.get("not_moved"):
            return f"{head}: {partial_text(target, partial, incident)}"[:1024]
        tail = {
            "applied": f"traffic failed over away from {target} automatically; confirm",
            "dry_run": f"dry run: would fail over away from {target}",
            "noop": f"no traffic on {target} to move",
            "refused": f"automatic failover away from {target} REFUSED ({failover.detail}); act now",
            "skipped": f"no automatic failover ({failover.detail})",
            "failed": f"automatic failover away from {target} FAILED ({failover.detail}); act now",
        }[failover.status]
        return f"{head}: {tail}"[:1024]

    @staticmethod
    def _details(event: AlertEvent) -> dict[str, Any]:
        return {"labels": dict(event.labels), "annotations": dict(event.annotations), "starts_at": event.starts_at,
                "generator_url": event.generator_url, "fingerprint": event.fingerprint}


    def _by_cause(self, candidates: list[CompiledPolicy], event: "AlertEvent",
                  incident: "Incident | None") -> tuple[list[CompiledPolicy], set[str]]:
        """Narrow the label-matching policies by the alert's cause. A policy with `causes` takes the
        alert when the cause is one of them, unless another such policy's open response was opened
        by this very alert (its cause at opening decides); and keeps an alert whose response it
        opened though the cause has flipped since. Returns the policies and those kept by opening."""
        narrowed = [p for p in candidates if p.causes]
        if not narrowed or event.status != "firing":
            return candidates, set()
        opened = self._opened_by(narrowed, event, incident)
        cause = event.cause
        if opened:
            chosen = [p for p in candidates if not p.causes or p.name in opened]
        else:
            chosen = [p for p in candidates if not p.causes or cause in p.causes]
        return chosen, {p.name for p in chosen if p.causes and cause not in p.causes}

    @staticmethod
    def _opened_by(policies: list[CompiledPolicy], event: "AlertEvent", incident: "Incident | None") -> set[str]:
        """The policies whose open response this alert (fingerprint and startsAt) opened."""
        from opsctl.incident.grouping import response_key

        if incident is None:
            return set()
        keys = {response_key(p.name, p.target(event.labels), event.fingerprint, event.starts_at): p.name
                for p in policies}
        return {keys[r.key] for r in incident.open_responses() if r.key in keys}

    # -- alerts -------------------------------------------------------------------------------

    def handle_alert(self, event: AlertEvent) -> list[Taken]:
        """Admit one alert and act on it at once (drills and tests; serve admits on receipt and acts
        on a worker). Raises ActionFailed (retried until it acts, its incident closes or on-call
        takes it over)."""
        from opsctl.incident.record import MalformedIncident

        try:
            admission = self.admit([event])
        except MalformedIncident as exc:
            taken: list[Taken] = []
            self.blocked(event, exc, taken)
            return taken
        taken = []
        failed: list[str] = []
        for item in admission.items:
            taken += self.act(item, failed)
        if failed:
            raise ActionFailed("; ".join(failed))
        return taken

    def act(self, item: "Admitted", failed: list[str] | None = None) -> list[Taken]:
        """Take the actions of one admitted alert (its responses already hold it): failover, page,
        ticket and notes for a firing alert, the note of a response it ended for a resolve. What
        could not act goes to `failed` (raised as ActionFailed when not given); the responses it
        concerns are then tried again from the record (`owed`), with capped backoff."""
        taken: list[Taken] = []
        errors: list[str] = [] if failed is None else failed
        before = len(errors)
        event, joined = item.event, item.joined
        chosen = [self.by_name[n] for n in item.chosen if n in self.by_name]
        self._acting.incident = joined.incident.id
        try:
            if joined.incident.takeover is not None:
                self._taken_over([self.by_name[n] for n in item.candidates if n in self.by_name], event,
                                 joined.incident, taken, errors)
            else:
                for policy in chosen:
                    if event.status != "firing":
                        ended = next((r for r in item.ended if r.policy == policy.name), None)
                        if ended is not None:
                            self._resolved(policy, event, ended, joined, taken)
                    elif policy.name in item.late:
                        log.info("policy %s: ignoring a late firing copy of %s", policy.name, event.fingerprint)
                    else:
                        self._firing(policy, event, taken, errors, flipped=policy.name in item.flipped, joined=joined,
                                     cancelled=policy.name in item.cancelled)
                if event.status == "firing" and not joined.opened:
                    self._joined_notes(chosen, event, joined, taken, errors)
        finally:
            self._acting.incident = None
        self._tried(joined.incident, chosen, event, failed=len(errors) > before)
        if failed is None and errors:
            raise ActionFailed("; ".join(errors))
        return taken

    def _tried(self, incident: "Incident", chosen: list[CompiledPolicy], event: AlertEvent, *, failed: bool) -> None:
        """The next try of the responses a firing alert concerns: none while they act, else after a
        capped backoff (no attempt counter: until it acts, the alerts resolve or on-call takes over)."""
        if event.status != "firing":
            return
        now = self.clock()
        with self._book:
            for policy in chosen:
                name = f"{policy.name}/{policy.target(event.labels)}"
                if not failed:
                    self._next_try.pop(name, None)
                    continue
                tries, _ = self._next_try.get(name, (0, 0.0))
                self._next_try[name] = (tries + 1, now + min(RETRY_CAP, 2.0 ** min(tries + 1, 8)))

    def names(self, item: "Admitted") -> list[str]:
        """The responses (policy/target) an admitted alert concerns, as the retry book names them."""
        return [f"{n}/{self.by_name[n].target(item.event.labels)}" for n in item.chosen if n in self.by_name]

    def waiting(self) -> int:
        """Responses whose last try could not act, waiting for the next (the waiting gauge)."""
        with self._book:
            return len(self._next_try)

    def owed(self, incident: "Incident", response: "IncidentResponse") -> bool:
        """Whether an open response of a firing alert still owes an action the record shows was not
        taken: its failover not done (never tried, started and never recorded, or failed), the
        incident's page not sent, or the vendor ticket not filed. A guard's refusal is retried by
        the alerts that join (as the CLI's operator would try again), not here."""
        policy = self.by_name.get(response.policy)
        if policy is None or incident.takeover is not None or response.state != "open" or not response.firing():
            return False
        actions = policy.policy.actions
        if actions.failover is not None and response.failover in (None, "started", "failed"):
            return True
        if actions.page is not None and (incident.page is None or incident.page.sent_at is None):
            return True
        backend = self.backends.get(response.target)
        vendor = backend is not None and backend.kind == "vendor" and bool(backend.vendor)
        return actions.ticket is not None and vendor and incident.ticket(response.target) is None \
            and response.ticket != "skipped"

    def resumable(self, busy: Callable[[str], bool] = lambda name: False, *, grace: float = 0.0) -> list["Admitted"]:
        """The open incident's responses that owe an action and are due for a try, as alerts to act
        on again (the record is the retry queue: a worker's queue lost in a crash, a leader that
        stood down, a try that could not act). `busy(name)`: a response in hand here (policy/target);
        `grace`: a response never tried here whose incident took an alert within that many seconds is
        left to the worker (maybe another process's) that admitted it."""
        from opsctl.incident.store import Joined

        incident = self.incidents.open_incident()
        if incident is None:
            return []
        now = self.clock()
        found = []
        for response in incident.open_responses():
            name = f"{response.policy}/{response.target}"
            with self._book:
                tried = self._next_try.get(name)
            due = tried[1] <= now if tried is not None else incident.last_alert_at <= now - grace
            if not due or busy(name) or not self.owed(incident, response):
                continue
            last = response.firing()[-1]
            held = incident.alert(last.fingerprint, last.starts_at)
            labels = {k: v for k, v in (("alertname", held.alertname if held else ""),
                                        ("severity", held.severity if held else ""),
                                        ("slo", held.slo if held else ""), ("backend", response.target),
                                        ("service", self.incidents.service)) if v}
            event = AlertEvent(key=f"resume:{response.key}", status="firing", labels=labels,
                               annotations={"cause": held.cause} if held is not None and held.cause else {},
                               starts_at=last.starts_at, fingerprint=last.fingerprint, group_key="", received_at=now)
            found.append(Admitted(event, Joined(incident, opened=False, new_alert=False), (response.policy,),
                                  (response.policy,), frozenset(), frozenset(), (), frozenset()))
        return found

    def blocked(self, event: AlertEvent, exc: Exception, taken: list[Taken]) -> None:
        """The stored incident does not read: the refusal recorded and a human paged (`_blocked`)."""
        candidates = matching(self.policies, event.labels)
        if candidates:
            self._blocked(candidates, event, exc, taken, [])

    def _blocked(self, chosen: list[CompiledPolicy], event: AlertEvent, exc: Exception, taken: list[Taken],
                 failed: list[str]) -> None:
        """The open incident is stored but does not read: it may hold this very outage (its failover,
        its page), so nothing acts beside it. Never silent: the refusal is recorded (action
        "incident", refused), a human is paged with what to do when a policy pages, and the event is
        retried (ActionFailed) until the record reads or is removed."""
        from opsctl.errors import OpsctlError

        policy = chosen[0]
        executor, dry = self.executor_for(policy)
        hint = exc.hint if isinstance(exc, OpsctlError) and exc.hint else ""
        what = f"{str(exc).splitlines()[0]}{'; ' + hint if hint else ''}"
        log.error("policy %s: %s", policy.name, what)
        self._record(policy, event, None, "incident", Outcome("refused", what), dry, taken)
        page = next((p.policy.actions.page for p in chosen if p.policy.actions.page is not None), None)
        if page is not None:
            head = self._page_summary(policy, event, policy.target(event.labels), None)
            summary = f"{head}: automation BLOCKED: the stored incident does not read ({what}); act now"
            self._run(policy, event, None, "page", dry, lambda: executor.page(PageRequest(
                self._context(policy, event), summary=summary[:1024], severity=page.severity,
                dedup_key=self.page_key(), details={**self._details(event), "blocked": what})), taken, failed)
        failed.append(f"incident: {what}")

    def _taken_over(self, chosen: list[CompiledPolicy], event: AlertEvent, incident: "Incident",
                    taken: list[Taken], failed: list[str]) -> None:
        """On-call took the incident over: nothing acts; the alert is one note on the page."""
        assert incident.takeover is not None
        if not chosen:
            return
        policy = chosen[0]
        executor, dry = self.executor_for(policy)
        self._record(policy, event, None, "takeover", Outcome(
            "noop", f"incident {incident.id} taken over by {incident.takeover.by}: the automation only notes"), dry, taken)
        key = incident.page.dedup_key if incident.page is not None and incident.page.sent_at is not None else ""
        if key and policy.policy.actions.note:
            self._run(policy, event, None, "note", dry, lambda: executor.note(NoteRequest(
                self._context(policy, event), incident=key,
                text=f"opsctl automation (incident taken over, not acting): {event.summary()}")), taken, failed)

    def _joined_notes(self, chosen: list[CompiledPolicy], event: AlertEvent, joined: "Joined", taken: list[Taken],
                      failed: list[str]) -> None:
        """A later alert of an open incident: a new cause or a second backend is one note on its
        page (never a second page), once (its intent is recorded on the incident)."""
        incident = self.incidents.get(joined.incident.id)
        if incident is None or incident.page is None or incident.page.sent_at is None:
            return
        news = []
        if joined.new_cause:
            news.append(f"new cause {cv.cause_text(joined.new_cause)} ({event.labels.get('alertname', '')} on"
                        f" {event.labels.get('backend', '?')})")
        if joined.new_backend:
            news.append(f"{joined.new_backend} degrades too")
        if not news:
            return
        self._retitle(chosen, event, incident, taken, failed)
        policy = next((p for p in chosen if p.policy.actions.note), None)
        if policy is None:
            return
        intent = f"note:{incident.id}:{joined.new_cause or ''}:{joined.new_backend or ''}:{event.fingerprint}"
        if incident.intent(intent) is not None:
            return
        executor, dry = self.executor_for(policy)
        key = incident.page.dedup_key
        text = f"opsctl automation, incident {incident.id}: {event.summary()}; " + "; ".join(news)
        outcome = self._run(policy, event, None, "note", dry, lambda: executor.note(
            NoteRequest(self._context(policy, event), incident=key, text=text)), taken, failed)
        if outcome.status in ("applied", "dry_run", "noop"):
            self._intent(incident, intent, "note", outcome)

    def _retitle(self, chosen: list[CompiledPolicy], event: AlertEvent, incident: "Incident", taken: list[Taken],
                 failed: list[str]) -> None:
        """A second backend or cause joined: the incident's one page says so (paging/title.py), by a
        trigger on its dedup key (never a second incident) whose title the pager sets."""
        policy = next((p for p in chosen if p.policy.actions.page is not None), None)
        page = incident.page
        if policy is None or page is None or page.sent_at is None or names_all(page.title, incident.backends,
                                                                                incident.causes):
            return
        summary = self._page_summary(policy, event, event.labels.get("backend", ""), None, incident=incident.id)
        title = incident_title(summary, incident.backends, incident.causes)
        if title[:300] == page.title:
            return
        executor, dry = self.executor_for(policy)
        severity = page.severity or "critical"
        outcome = self._run(policy, event, None, "page", dry, lambda: executor.page(PageRequest(
            self._context(policy, event), summary=summary, severity=severity, dedup_key=page.dedup_key,
            details={**self._details(event), "incident": incident.id}, title=title)), taken, failed)
        if outcome.status in ("applied", "noop", "dry_run") and self.incidents is not None:
            self.incidents.change(incident.id, lambda i: i.changed(page=dataclasses.replace(
                i.page, title=title[:300], updated_at=self.clock())) if i.page is not None else None)

    def _intent(self, incident: "Incident", key: str, action: str, outcome: Outcome) -> None:
        from opsctl.incident.record import IncidentIntent

        self.incidents.change(incident.id, lambda i: i.with_intent(IncidentIntent(
            key=key, action=action, at=self.clock(), status=outcome.status)))

    def _begin(self, incident: "Incident", policy: CompiledPolicy, event: AlertEvent, target: str) -> Begun | None:
        """The firing alert taken into its response (opened if none is open), in one write: a pending
        restore cancelled, and for a failover policy the failover marked "started" before it is tried.
        None for a late copy (an older startsAt, or a firing copy after its resolve)."""
        from opsctl.incident.grouping import response_key
        from opsctl.incident.record import IncidentResponse

        failover = policy.policy.actions.failover is not None
        now = self.clock()
        key = response_key(policy.name, target, event.fingerprint, event.starts_at)
        begun: list[Begun] = []

        def change(i: "Incident") -> "Incident | None":
            begun.clear()
            if i.response(policy.name, target) is None and i.response_by_key(key) is not None:
                return None  # the response this alert opened is closed already: a late copy
            current = i.response(policy.name, target) or IncidentResponse(
                policy=policy.name, target=target, key=key, opened_at=now)
            response, stale = current.seen(event.fingerprint, event.starts_at, "firing")
            if stale:
                return None
            cancelled = response.state == "restore_pending"
            if cancelled:
                response = response.changed(state="open", restore_due=None)
            resumed = False
            away = frozenset(r.target for r in i.open_responses() if r.target != target and r.traffic_moved)
            # A failover refused because every other backend is already failed away from is not tried
            # again while that still holds: the same decision, left to a human (recorded once).
            receivers = set(self.backends) - {target}
            no_healthy = response.failover == "refused" and bool(receivers) and receivers <= away
            if failover and response.failover not in FAILOVER_DONE and not no_healthy:
                resumed = response.failover == "started"
                response = response.changed(failover="started")
            begun.append(Begun(response, cancelled, resumed, away))
            return i.with_response(response)

        self.incidents.change(incident.id, change)
        return begun[0] if begun else None

    def _firing(self, policy: CompiledPolicy, event: AlertEvent, taken: list[Taken], failed: list[str], *,
                flipped: bool = False, joined: "Joined", cancelled: bool = False) -> None:
        target = policy.target(event.labels)
        with self._lock(policy.name, target):
            begun = self._begin(joined.incident, policy, event, target)
            if begun is not None and cancelled:  # admit cancelled it, in the alert's own write
                begun = dataclasses.replace(begun, cancelled=True)
            if begun is None:
                log.info("policy %s: ignoring a late firing copy of %s", policy.name, event.fingerprint)
                return
            if flipped:  # the same alert, the same response: the cause it opened with stays the response's
                self._record(policy, event, begun.response, "cause", Outcome(
                    "noop", f"cause now {event.cause} (the response opened with one of"
                            f" {', '.join(sorted(policy.causes))}); same response"), self.executor_for(policy)[1], taken)
            self._act_on_firing(policy, event, begun, target, joined, taken, failed)

    def _act_on_firing(self, policy: CompiledPolicy, event: AlertEvent, begun: Begun, target: str, joined: "Joined",
                       taken: list[Taken], failed: list[str]) -> None:
        """Failover first (seconds count at four nines), then the page that asks a human to confirm it,
        the vendor ticket, and the note. The incident's dedup key is known before paging, so the
        failover already names the incident the page opens."""
        actions = policy.policy.actions
        executor, dry = self.executor_for(policy)
        context = self._context(policy, event)
        response = begun.response
        incident = joined.incident
        incident_key = self.incident_key(incident) or self.page_key()
        done: list[str] = []
        if begun.cancelled:
            done.append("restore cancelled: the alert fired again inside the hold-down")
        failover: Outcome | None = None
        if actions.failover is not None and response.failover == "started":
            failover = self._failover(policy, event, response, target, executor, context, dry, taken, failed,
                                      incident=incident_key, moved_away=begun.moved_away, resumed=begun.resumed)
            if failover.status in ("applied", "dry_run"):
                response = response.changed(failover=failover.status, owned=True, saved=dict(failover.data))
            else:
                response = response.changed(failover=failover.status)
            done.append(f"failover from {target}: {failover.status} ({failover.detail})")
            incident = self.move(incident, "failover", target, failover, response)
        self._respond(policy, event, response, target, incident, incident_key, failover, executor, context, dry,
                      taken, failed, done)

    def _failover(self, policy: CompiledPolicy, event: AlertEvent, response: "IncidentResponse", target: str,
                  executor: Executor, context: Context, dry: bool, taken: list[Taken], failed: list[str], *,
                  incident: str, moved_away: frozenset[str], resumed: bool = False) -> Outcome:
        failover = policy.policy.actions.failover
        assert failover is not None  # called only for a policy with a failover action (_act_on_firing)
        if target not in self.backends:
            outcome = Outcome("skipped", f"{target!r} is not a configured backend (known: {', '.join(sorted(self.backends))})")
            return self._record(policy, event, response, "failover", outcome, dry, taken)
        receivers = set(self.backends) - {target}
        if receivers and receivers <= moved_away:
            away = ", ".join(sorted(moved_away))
            outcome = Outcome("refused", f"traffic is already failed over away from {away}; failing over from"
                                         f" {target} too would leave no healthy backend: a human decides")
            return self._record(policy, event, response, "failover", outcome, dry, taken)
        return self._run(policy, event, response, "failover", dry, lambda: executor.failover(FailoverRequest(
            context, backend=target, emergency_in_freeze=failover.emergency_in_freeze, incident=incident,
            resumed=resumed, episode=response.key,
            paging=event.labels.get(cv.LABEL_SEVERITY) == "page",
        )), taken, failed)

    def _respond(self, policy: CompiledPolicy, event: AlertEvent, response: "IncidentResponse", target: str,
                 incident: "Incident", key: str, failover: Outcome | None, executor: Executor, context: Context,
                 dry: bool, taken: list[Taken], failed: list[str], done: list[str]) -> None:
        """The incident's page, ticket and note (one PagerDuty incident, one ticket per vendor):
        the first page opens it; a later one only when its severity rises or the failover needs a
        human for the first time ("act now", once); the rest are notes."""
        from opsctl.incident.record import IncidentPage

        incidents = self.incidents
        actions = policy.policy.actions
        incident = incidents.get(incident.id) or incident
        page = actions.page
        if page is not None:
            stored = incident.page
            sent = stored is not None and stored.sent_at is not None
            act_now = failover is not None and (failover.status in ACT_NOW or bool(
                failover.status == "applied" and (failover.data.get("partial") or {}).get("not_moved")))
            severity: str = "critical" if act_now else page.severity
            if sent and stored is not None and _rank(stored.severity) > _rank(severity):
                severity = stored.severity
            raise_it = sent and stored is not None and _rank(severity) > _rank(stored.severity)
            first_act_now = act_now and not (stored is not None and stored.failed_sent)
            if not sent or raise_it or first_act_now:
                summary = self._page_summary(policy, event, target, failover, incident=incident.id)
                title = (incident_title(summary, incident.backends, incident.causes)
                         if raise_it or widened(incident.backends, incident.causes) else None)
                outcome = self._run(policy, event, response, "page", dry, lambda: executor.page(PageRequest(
                    context, summary=summary, severity=severity, dedup_key=key,
                    details={**self._details(event), "incident": incident.id,
                             **({"failover": failover.to_dict()} if failover else {})}, title=title,
                )), taken, failed)
                if outcome.status in ("applied", "noop", "dry_run"):
                    now = self.clock()
                    incident = incidents.change(incident.id, lambda i: i.changed(page=IncidentPage(
                        dedup_key=key, severity=severity, title=(title or summary)[:300],
                        sent_at=i.page.sent_at if i.page is not None and i.page.sent_at is not None else now,
                        updated_at=now, failed_sent=bool(i.page is not None and i.page.failed_sent) or act_now,
                        notes=i.page.notes if i.page is not None else 0)))
        if actions.ticket is not None:
            self._incident_ticket(policy, event, response, target, incident, key, executor, context, dry, taken,
                                  failed, done)
        if actions.note and key and done:
            text = f"opsctl automation, policy {policy.name}: {event.summary()}. " + "; ".join(done)
            self._run(policy, event, response, "note", dry, lambda: executor.note(
                NoteRequest(context, incident=key, text=text)), taken, failed)

    def _incident_ticket(self, policy: CompiledPolicy, event: AlertEvent, response: "IncidentResponse", target: str,
                         incident: "Incident", key: str, executor: Executor, context: Context, dry: bool,
                         taken: list[Taken], failed: list[str], done: list[str]) -> None:
        """At most one ticket per vendor per incident, its category from the most specific cause seen
        (auth before capacity before the rest); a later cause adds a note to it."""
        import dataclasses

        from opsctl.incident.grouping import most_specific, ticket_key
        from opsctl.incident.record import IncidentTicket

        ticket = incident.ticket(target)
        current = incident.response_by_key(response.key) or response
        if ticket is None and current.ticket == "skipped":
            return  # decided once for this response (no vendor behind the target): not again per alert
        if ticket is None:
            cause = most_specific(incident.causes) or event.cause
            outcome = self._ticket(policy, event, response, target, key, executor, context, dry, taken, failed,
                                   cause=cause, idempotency=ticket_key(incident.id, target))
            if outcome.status in ("applied", "noop", "dry_run"):
                filed = str(outcome.data.get("ticket") or outcome.status)
                category = self.ticket_category(policy, cause)
                now = self.clock()

                def file(i: "Incident") -> "Incident | None":
                    mine = i.response_by_key(response.key)
                    new = i.with_response(mine.changed(ticket=filed)) if mine is not None else i
                    return new if i.ticket(target) else new.with_ticket(IncidentTicket(
                        vendor=target, category=category, id=filed, causes=i.causes, filed_at=now))

                self.incidents.change(incident.id, file)
            elif outcome.status == "skipped":
                def skip(i: "Incident") -> "Incident | None":
                    mine = i.response_by_key(response.key)
                    return i.with_response(mine.changed(ticket="skipped")) if mine is not None else None

                self.incidents.change(incident.id, skip)
            done.append(f"vendor ticket: {outcome.status} ({outcome.detail})")
            return
        new = tuple(c for c in incident.causes if c not in ticket.causes)
        if not new:
            return
        text = (f"opsctl automation, incident {incident.id}: a later cause of the same outage:"
                f" {', '.join(cv.cause_text(c) for c in new)} ({event.summary()})")
        outcome = self._run(policy, event, response, "ticket_note", dry, lambda: executor.ticket_note(
            TicketNoteRequest(context, backend=target, ticket=ticket.id, text=text,
                              idempotency_key=ticket_key(incident.id, target))), taken, failed)
        if outcome.status in ("applied", "dry_run", "skipped"):
            self.incidents.change(incident.id, lambda i: i.with_ticket(
                dataclasses.replace(ticket, causes=ticket.causes + new)) if i.ticket(target) == ticket else None)
            done.append(f"vendor ticket {ticket.id}: note added ({outcome.status})")

    def _ticket(self, policy: CompiledPolicy, event: AlertEvent, response: "IncidentResponse", target: str, key: str,
                executor: Executor, context: Context, dry: bool, taken: list[Taken], failed: list[str], *,
                cause: str | None, idempotency: str) -> Outcome:
        ticket = policy.policy.actions.ticket
        assert ticket is not None  # called only for a policy with a ticket action (_respond)
        backend = self.backends.get(target)
        if backend is None or backend.kind != "vendor" or not backend.vendor:
            outcome = Outcome("skipped", f"{target} is not a vendor backend: no vendor to file a ticket with")
            return self._record(policy, event, response, "ticket", outcome, dry, taken)
        description = "\n".join([
            event.summary(),
            f"Alert: {event.labels.get('alertname', '')} since {event.starts_at}",
            *(f"{k}: {v}" for k, v in sorted(event.labels.items())),
            *([f"Source: {event.generator_url}"] if event.generator_url else []),
            *([f"Incident: {key}"] if key else []),
        ])
        return self._run(policy, event, response, "ticket", dry, lambda: executor.file_ticket(TicketRequest(
            context, backend=target, category=self.ticket_category(policy, cause or event.cause),
            severity=ticket.severity, summary=self._ticket_summary(backend.description or target, event),
            description=description, incident=key or None, idempotency_key=idempotency,
        )), taken, failed)

    def _resolved(self, policy: CompiledPolicy, event: AlertEvent, response: "IncidentResponse", joined: "Joined",
                  taken: list[Taken]) -> None:
        """The note of a response this resolve ended (admit wrote it: the hold-down, or closed)."""
        target = response.target
        restores = bool(policy.policy.actions.restore)
        why = "traffic was not moved by this automation" if restores else "the policy does not restore"
        if not joined.incident.firing() and not joined.incident.moved():
            self._closable_at = max(self.clock(), joined.incident.last_alert_at + self.incidents.quiet)
        if response.state == "restore_pending":
            text = (f"every matching alert resolved; traffic returns to {target} after the hold-down"
                    f" ({self.hold_down(policy)}s)")
        else:
            text = f"every matching alert resolved; response closed ({why})"
        executor, dry = self.executor_for(policy)
        key = self.incident_key(joined.incident)
        if policy.policy.actions.note and key:
            self._run(policy, event, response, "note", dry, lambda: executor.note(NoteRequest(
                self._context(policy, event), incident=key,
                text=f"opsctl automation, policy {policy.name}: {event.summary()}. {text}")), taken, [])

    # -- PagerDuty ----------------------------------------------------------------------------

    def handle_pagerduty(self, event_id: str, data: dict[str, Any], received_at: float) -> tuple[str, list[Taken]]:
        """A verified PagerDuty event taken in by the incident it is about (its dedup key or id):
        written on the incident's page (who acknowledged it and when; the signed event id, so a
        replay writes nothing), by one compare-and-swap under the leader's term, before it is
        answered. Returns "accepted", "duplicate" (its id is on the page already) or "unknown" (no
        incident of this service: nothing written).

        Traffic never moves on a PagerDuty event alone: the alert's resolution drives the restore.
        An acknowledgement is the human confirming the automated failover, and shows in the record."""
        taken: list[Taken] = []
        keys = [k for k in (data.get("incident_key"), data.get("data_id")) if k]
        if not keys:
            return "unknown", taken
        current = self.incidents.open_incident()
        candidates = [current] if current is not None else []
        incident = next((i for i in candidates + self.incidents.incidents()
                         if i.id in keys or self.incident_key(i) in keys), None)
        if incident is None or incident.page is None:
            return "unknown", taken
        if event_id in incident.page.events:
            return "duplicate", taken
        acked = data.get("event_type") == "incident.acknowledged"
        who = str(data.get("agent") or "")

        def take(i: "Incident") -> "Incident | None":
            page = i.page
            if page is None or event_id in page.events:
                return None
            return i.changed(page=dataclasses.replace(
                page, events=(page.events + (event_id,))[-PAGE_EVENTS:],
                acknowledged_by=who if acked else page.acknowledged_by,
                acknowledged_at=received_at if acked and page.acknowledged_at is None else page.acknowledged_at))

        incident = self.incidents.change(incident.id, take)
        response = incident.responses[-1] if incident.responses else None
        policy = self.by_name.get(response.policy) if response is not None else None
        if response is not None and policy is not None:
            by = f" by {who}" if who else ""
            outcome = Outcome("noop", f"PagerDuty {data.get('event_type')}{by} on incident {data.get('data_id') or keys[0]}"
                                      f" (incident {incident.id}, {incident.state})")
            event = AlertEvent(key=f"pagerduty:{event_id}", status="pagerduty", labels={}, annotations={}, starts_at="",
                               fingerprint="", group_key="", received_at=received_at)
            self._record(policy, event, response, "pagerduty", outcome, self.executor_for(policy)[1], taken)
        return "accepted", taken

    # -- restores -----------------------------------------------------------------------------

    def run_due_restores(self, limit: int = 10) -> list[Taken]:
        """Restore every response of the open incident whose hold-down has passed (a refused restore
        is retried later), or with `automation.restore` look at each canary restore; the open
        incident is read at most once per LOOK_INTERVAL."""
        taken: list[Taken] = []
        now = self.clock()
        if now < self._looked + LOOK_INTERVAL:
            return taken
        self._looked = now
        incident = self.incidents.open_incident()
        if incident is not None:
            self._acting.incident = incident.id
            try:
                if self.settings.restore is not None:  # the canary restore instead of the hold-down
                    self._canary_restores(incident, taken)
                else:
                    due = [r for r in incident.open_responses()
                           if r.state == "restore_pending" and r.restore_due is not None and r.restore_due <= now]
                    for response in sorted(due, key=lambda r: r.restore_due or 0.0)[:limit]:
                        self._restore(incident.id, response.key, taken)
            finally:
                self._acting.incident = None
        self.close_due_incidents()
        return taken

    def _canary_restores(self, incident: "Incident", taken: list[Taken]) -> None:
        """Every open response whose failover this automation applied, under a restoring policy, is
        looked at every LOOK_EVERY seconds (opsctl/traffic/canary.py decides, canary_run.py moves):
        it starts as soon as the backend's fast windows are healthy, whether or not its alerts still
        fire. Its progress is kept on the incident (`Incident.restore`, by response key), so a
        restarted serve or a new leader resumes it from the record; the response closes once its
        alerts resolved and the saved split is back. Looks that move nothing are not recorded."""
        from opsctl.traffic.canary import RestoreProgress
        from opsctl.traffic.canary_run import LOOK_EVERY

        now = self.clock()
        for candidate in incident.open_responses():
            policy = self.by_name.get(candidate.policy)
            look, said = self._canary_book.get(candidate.key, (0.0, ""))
            if policy is None or not policy.policy.actions.restore or not candidate.traffic_moved or now < look:
                continue
            with self._lock(candidate.policy, candidate.target):
                current = self.incidents.get(incident.id)
                response = current.response_by_key(candidate.key) if current is not None else None
                if current is None or response is None or not response.is_open:
                    continue
                stored = (current.restore or {}).get(response.key)
                kept: RestoreProgress | None = None
                if stored is not None:
                    try:
                        kept = RestoreProgress.from_dict(stored, f"incident {current.id}: restore.{response.key}")
                    except ValueError as exc:  # rebuilt from the split as it is (canary_run.resume)
                        log.warning("%s; rebuilt from the split", exc)
                executor, dry = self.executor_for(policy)
                key = self.incident_key(current)
                context = Context(policy.name, "", {"backend": response.target},
                                  f"canary restore of {response.target}", f"restore-{response.key}")
                try:
                    outcome = executor.restore(RestoreRequest(context, backend=response.target, incident=key or None,
                                                              saved=response.saved, canary=True, progress=kept,
                                                              episode=response.key))
                except Exception as exc:  # a conflict, a transient API failure: the next look tries again
                    log.exception("response %s: canary restore failed", response.key)
                    outcome = Outcome("failed", _describe(exc))
                progress = outcome.data.get("restore", kept)
                say = f"{outcome.status}:{outcome.data.get('move', '')}"  # a move refused again is not said again
                self._canary_book[response.key] = (now + LOOK_EVERY, say if outcome.status != "applied" else "")
                if outcome.status == "applied" or (say != said and ("move" in outcome.data or outcome.status != "noop")):
                    self._record(policy, None, response, "restore", outcome, dry, taken, started=now)
                    ended = outcome.status == "skipped" or (outcome.status == "applied" and progress is not None
                                                            and progress.finished)
                    if policy.policy.actions.note and key and ended:  # one note when it ends
                        self._run(policy, None, response, "note", dry, lambda: executor.note(NoteRequest(
                            context, incident=key, text=f"opsctl automation, policy {policy.name}: canary restore"
                            f" of {response.target}: {outcome.status} ({outcome.detail})")), taken, [])
                finished = progress is not None and progress.finished
                book = dict(current.restore or {})
                if outcome.status in ("dry_run", "skipped") or (finished and response.state != "open"):
                    book.pop(response.key, None)
                    self._canary_book.pop(response.key, None)
                    closed = response.changed(state="closed", closed_at=self.clock(), restore_due=None,
                                              closed_because=f"restore {outcome.status}: {outcome.detail}"[:500])
                    if outcome.status == "dry_run":
                        self.incidents.change(current.id, lambda i: _with_admitted(i, closed).changed(restore=book or None))
                    else:
                        self.move(current, "restore", response.target, outcome, closed, restore=book or None)
                elif progress is not None and (stored is None or progress.to_dict() != stored):
                    book[response.key] = progress.to_dict()
                    self.incidents.change(current.id, lambda i: i.changed(restore={**(i.restore or {}),
                                                                                   response.key: book[response.key]}))

    def _restore(self, ident: str, key: str, taken: list[Taken]) -> None:
        incident = self.incidents.get(ident)
        found = incident.response_by_key(key) if incident is not None else None
        if incident is None or found is None:
            return
        with self._lock(found.policy, found.target):
            incident = self.incidents.get(ident)  # again, under the response's lock
            response = incident.response_by_key(key) if incident is not None else None
            now = self.clock()
            if incident is None or response is None or response.state != "restore_pending" or (
                    response.restore_due is not None and response.restore_due > now):
                return
            self._restore_held(incident, response, taken)

    def _restore_held(self, incident: "Incident", response: "IncidentResponse", taken: list[Taken]) -> None:
        policy = self.by_name.get(response.policy)
        if policy is None:
            self._respond_with(incident, response, state="closed", closed_at=self.clock(), restore_due=None,
                               closed_because="policy no longer configured; restore left to a human")
            log.warning("response %s: policy %s is gone; traffic left as it is", response.key, response.policy)
            return
        if incident.takeover is not None:
            self._respond_with(incident, response, state="closed", closed_at=self.clock(), restore_due=None,
                               closed_because=f"incident {incident.id} taken over by {incident.takeover.by}:"
                                              " restore left to them")
            return
        executor, dry = self.executor_for(policy)
        key = self.incident_key(incident)
        context = Context(policy.name, "", {"backend": response.target}, f"restore {response.target} after hold-down",
                          f"restore-{response.key}")
        started = self.clock()
        retry: float = self.settings.restore_retry_seconds
        try:
            outcome = executor.restore(RestoreRequest(
                context, backend=response.target, incident=key or None, saved=response.saved,
                failover_operations=self._unrecorded_failover(key, response),
                hold_down=float(self.hold_down(policy)), episode=response.key))
        except Exception as exc:  # a failed restore is retried after restore_retry
            log.exception("response %s: restore failed", response.key)
            outcome = Outcome("failed", _describe(exc))
            if _passing(exc):  # a conflict or a transient API failure: worth another try soon, not in a minute
                retry = min(retry, TRANSIENT_RESTORE_RETRY)
        held_for = outcome.data.get("retry_in") if outcome.status == "refused" else None
        if isinstance(held_for, (int, float)):  # held until a known instant (the re-failover backoff)
            retry = min(retry, float(held_for))
        self._record(policy, None, response, "restore", outcome, dry, taken, started=started,
                     received_at=response.restore_due)
        if outcome.status in ("applied", "noop", "dry_run", "skipped"):
            ended = response.changed(state="closed", closed_at=self.clock(), restore_due=None,
                                     closed_because=f"restore {outcome.status}: {outcome.detail}"[:500])
        else:
            ended = response.changed(restore_due=self.clock() + retry, restore_refusals=response.restore_refusals + 1)
        if outcome.status == "dry_run":
            self._respond_with(incident, ended)
        else:
            self.move(incident, "restore", response.target, outcome, ended)
        # One note per restore step: its first unsuccessful try (refused or failed, retried after)
        # and its end; the retries between add none (under chaos they would multiply).
        unsuccessful = outcome.status in ("refused", "failed")
        if policy.policy.actions.note and key and (not unsuccessful or not response.restore_refusals):
            text = f"opsctl automation, policy {policy.name}: restore traffic to {response.target}: {outcome.status} ({outcome.detail})"
            if outcome.status in ("refused", "failed"):
                text += (f"; retrying every {self.settings.restore_retry}" if retry == self.settings.restore_retry_seconds
                         else f"; retrying in {retry:.0f}s")
            self._run(policy, None, response, "note", dry, lambda: executor.note(
                NoteRequest(context, incident=key, text=text)), taken, [])


def _with_admitted(incident: "Incident", response: "IncidentResponse") -> "Incident":
    """`response` as a worker or the restore sweep changed it, written with the alerts the stored
    one holds: those are admit's (written on receipt, without the response's lock, while it only
    adds an alert to an open response)."""
    stored = incident.response_by_key(response.key)
    return incident.with_response(response.changed(alerts=stored.alerts) if stored is not None else response)


def _rank(severity: str | None) -> int:
    return SEVERITY_RANK.index(severity) if severity in SEVERITY_RANK else -1


TRANSIENT_RESTORE_RETRY = 5  # seconds: a restore that met a conflict or a transient API failure tries again soon


def _passing(exc: BaseException) -> bool:
    """A failure that says nothing about the restore itself: a concurrent change (409) or a transient
    API failure (429, 5xx, no answer). A fenced write is neither: this replica no longer leads."""
    from opsctl.errors import ConflictError
    from opsctl.fencing import FencedError
    from opsctl.traffic.kube import is_transient

    return not isinstance(exc, FencedError) and (isinstance(exc, ConflictError) or is_transient(exc))


def partial_text(target: str, partial: dict[str, Any], incident: str) -> str:
    """A failover the capacity guard let move only in part, as on-call must read it: the points
    moved and stuck, why (capacity), and the commands of what can be done next."""
    moved = ", ".join(f"{n} to {b}" for b, n in (partial.get("moved") or {}).items() if n) or "nothing"
    stuck = int(partial.get("not_moved") or 0)
    asked = int(partial.get("asked") or 0)
    ref = incident or "INCIDENT"
    total = sum(int(n) for n in (partial.get("moved") or {}).values())
    text = (f"PARTIAL failover away from {target}: moved {total} of its {asked} points ({moved}); {stuck} points"
            f" STUCK on {target} (capacity: the receivers carry no more)")
    if partial.get("degraded"):
        text += f"; {partial['degraded']} to {partial.get('degradation')} (no suggestions)"
    degradation = partial.get("degradation")
    if degradation:
        text += (f". Next: degrade the stuck points: opsctl traffic failover --from {target} --to {degradation}"
                 f" --incident {ref} --yes")
    else:
        text += ". Next: degrade: name a no-suggestions backend in traffic.degradation, then fail over again"
    text += (f"; or approve more capacity (raise capacity.max_replicas or add GPUs), then:"
             f" opsctl traffic failover --from {target} --incident {ref} --yes")
    return text


def _describe(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}"[:500]


__all__ = ["Admission", "Admitted", "PolicyEngine", "RETRY_CAP", "TRANSIENT_RESTORE_RETRY", "partial_text"]
