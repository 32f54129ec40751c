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

    def __post_init__(self) -> None:
        self.policies = [CompiledPolicy.of(p) for p in self.settings.policies]
        self.by_name = {p.name: p for p in self.policies}

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
        return tuple(operation_id("failover", incident, episode.target) for incident in incidents)

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

    def _page_summary(self, policy: CompiledPolicy, event: AlertEvent, target: str, failover: Outcome | None) -> str:
        """The page's title: the alert's own summary (it names the backend, the cause and the burn),
        then what the automation did."""
        what = event.labels.get("slo") or event.labels.get("alertname", "alert")
        head = event.annotations.get("summary") or (
            f"{what}: {cv.cause_text(event.cause)}" if event.cause else f"{what} burning") + (
            f" ({event.labels.get('severity', 'alert')})")
        if failover is None:
            return head[:1024]
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



def _describe(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}"[:500]


__all__ = ["PolicyActions"]
