"""What the policy engine acts with (`PolicyActions`, the base of policy_engine.PolicyEngine): its
settings, backends, episode store and executors (live, and dry run for a policy or the whole
automation in dry run), each policy's hold-down and ticket category, the pager's dedup key of an
episode, and how one action is run and recorded (the store's record of actions, the `on_action`
counter, the log), with the words of what it sends (page and ticket titles, the details).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, TYPE_CHECKING, Callable, Mapping

from opsctl.automation.actions import Context, DryRunExecutor, Executor, Outcome, operation_id
from opsctl.automation.action_record import ActionRecord
from opsctl.automation.episode_protocol import Episodes
from opsctl.automation.episode_record import Episode
from opsctl.automation.policy import AlertEvent, CompiledPolicy, Taken
from opsctl.slo import conventions as cv

if TYPE_CHECKING:
    from opsctl.config import AutomationConfig, Backend, RunbookTickets
    from opsctl.incident.record import Incident
    from opsctl.incident.store import IncidentStore, Joined

log = logging.getLogger("opsctl.automation")


@dataclass
class PolicyActions:
    settings: "AutomationConfig"
    backends: Mapping[str, "Backend"]
    store: Episodes  # the same operations, local (episodes.EpisodeStore) or on the shared state (shared.py)
    live: Executor
    dry: Executor = field(default_factory=DryRunExecutor)
    clock: Callable[[], float] = time.time
    on_action: Callable[[Taken], None] | None = None
    # runbooks.tickets: the ticket category by cause (None: the defaults, inference for everything)
    tickets: "RunbookTickets | None" = None
    # The incidents (opsctl/incident/): an alert's incident owns its page, its tickets and its moves.
    incidents: "IncidentStore | None" = None

    def __post_init__(self) -> None:
        self.policies = [CompiledPolicy.of(p) for p in self.settings.policies]
        self.by_name = {p.name: p for p in self.policies}
        self._closable_at: float | None = None  # when the open incident may close (checked by the sweep)

    # -- the incident ---------------------------------------------------------------------------

    def page_key(self) -> str:
        """The incident's PagerDuty dedup key: Alertmanager's own for the service's group on the
        paging route (sha256 of its group key), so its page and ours are one PagerDuty incident."""
        from opsctl.incident.grouping import dedup_key, service_group_key

        assert self.incidents is not None
        return dedup_key(service_group_key(self.settings.incident.paging_route_key, self.incidents.service))

    def join(self, event: AlertEvent) -> "Joined | None":
        """The alert taken into its incident (firing: joined or opened; resolved: marked)."""
        from opsctl.incident.record import IncidentAlert

        assert self.incidents is not None
        labels = event.labels
        alert = IncidentAlert(fingerprint=event.fingerprint, alertname=labels.get("alertname", ""),
                              starts_at=event.starts_at, status="firing" if event.status == "firing" else "resolved",
                              slo=labels.get("slo", ""), backend=labels.get("backend", ""),
                              severity=labels.get("severity", ""), cause=event.cause or "")
        joined = self.incidents.take_alert(alert, page_key=self.page_key())
        if joined is not None and not joined.incident.firing():
            self._closable_at = joined.incident.last_alert_at + self.incidents.quiet
        return joined

    def incident_of(self, key: str | None) -> "Incident | None":
        """The open incident whose page is `key` (an episode's incident), if any."""
        if self.incidents is None or not key:
            return None
        current = self.incidents.open_incident()
        return current if current is not None and current.page is not None and current.page.dedup_key == key else None

    def move(self, incident: "Incident | None", kind: str, backend: str, outcome: Outcome) -> None:
        """A traffic move recorded on its incident: applied ones, and a first refusal or failure."""
        from opsctl.incident.record import IncidentMove

        if self.incidents is None or incident is None:
            return
        now = self.clock()
        move = IncidentMove(kind=kind, backend=backend, op_id=str(outcome.data.get("operation") or ""),
                            status=outcome.status, at=now, detail=outcome.detail[:300])

        def change(i: "Incident") -> "Incident | None":
            last = next((m for m in reversed(i.moves) if m.kind == kind and m.backend == backend), None)
            if outcome.status != "applied" and last is not None and last.status == outcome.status:
                return None  # a retry's same outcome adds nothing
            new = i.with_move(move)
            if kind == "failover" and outcome.status == "applied" and new.state == "open":
                new = new.changed(state="mitigated")
            if kind == "restore" and not new.moved() and not new.firing():
                new = new.changed(state="resolved")
            return new

        changed = self.incidents.change(incident.id, change)
        if not changed.firing() and not changed.moved():
            self._closable_at = max(now, changed.last_alert_at + self.incidents.quiet)

    def close_due_incidents(self) -> None:
        if self.incidents is None or self._closable_at is None or self.clock() < self._closable_at:
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
    def incident_key(policy: str, target: str, episode: Episode) -> str:
        """The pager's dedup key for the episode, known before paging (the failover is written under it)."""
        return f"opsctl-automation-{policy}-{target}-{episode.key}"

    def _unrecorded_failover(self, policy: str, episode: Episode) -> tuple[str, ...]:
        """The operation ids an unrecorded failover may have been written under (the incident it was
        written for is the episode's, or the dedup key when the page's result was lost too)."""
        if not episode.failover_unrecorded:
            return ()
        incidents = dict.fromkeys(i for i in (episode.incident, self.incident_key(policy, episode.target, episode)) if i)
        return tuple(operation_id("failover", incident, episode.target, episode.key or "") for incident in incidents)

    # -- recording ----------------------------------------------------------------------------

    def _run(self, policy: CompiledPolicy, event: AlertEvent | None, episode: Episode | None, action: str, dry: bool,
             call: Callable[[], Outcome], taken: list[Taken], failed: list[str]) -> Outcome:
        started = self.clock()
        try:
            outcome = call()
        except Exception as exc:
            log.warning("policy %s: %s failed: %s", policy.name, action, _describe(exc))
            outcome = Outcome("failed", _describe(exc))
            failed.append(f"{action}: {outcome.detail}")
        return self._record(policy, event, episode, action, outcome, dry, taken, started=started)

    def _record(self, policy: CompiledPolicy, event: AlertEvent | None, episode: Episode | None, action: str,
                outcome: Outcome, dry: bool, taken: list[Taken], *,
                started: float | None = None, received_at: float | None = None) -> Outcome:
        finished = self.clock()
        received = received_at if received_at is not None else (event.received_at if event else finished)
        self.store.record_action(ActionRecord(
            event_key=event.key if event else None, policy=policy.name, episode=episode.id if episode else None,
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


__all__ = ["PolicyActions", "partial_text"]
