"""What each policy does about an alert (`PolicyEngine`); which policies an alert matches is policy.py.
The engine holds what it acts with (its settings, backends, episode store, executors: live, and dry
run for a policy or the whole automation in dry run; each policy's hold-down and ticket category;
the incident's dedup key), how one action is run and recorded (the store's record of actions, the
`on_action` counter, the log) and the words of what it sends (page and ticket titles, the details):
one class, one module (issue 36 item 8; it was split over policy_engine.py and policy_actions.py).

For a firing alert, a policy's episode (see episodes.py) takes its actions once, in
this order:

    failover  move all user traffic away from the backend, through the traffic guards; during a
              freeze it is an emergency tied to the incident only where the policy says so
    page      open the incident that asks a human to confirm (or act, when the failover was
              refused); its dedup key is stable per policy and target and names the incident the
              failover already recorded, so repeated alerts fold into the open incident
    ticket    file the support ticket with the backend's vendor
    note      add what was done to the incident

When every matching alert of the episode resolved, a policy with `restore` waits out the hold-down
and then returns the traffic (`run_due_restores`); an alert firing again inside the hold-down
cancels the restore. Traffic someone else moved is never "restored" by the automation. A policy in
dry run (or the global dry run) goes through the same steps with an executor that changes nothing.
A stored episode of the policy and target that does not read (and is not closed) blocks a second
one: the refusal is recorded, a human is paged with what to do, and the event is retried.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping

from opsctl.automation.action_record import ActionRecord
from opsctl.automation.actions import (
    Context, DryRunExecutor, Executor, FailoverRequest, NoteRequest, Outcome, PageRequest, RestoreRequest, TicketNoteRequest,
    TicketRequest, operation_id,
)
from opsctl.automation.episode_protocol import Episodes, episode_key
from opsctl.automation.episode_record import Episode, EpisodeBlocked
from opsctl.automation.policy import ActionFailed, AlertEvent, CompiledPolicy, Taken, matching
from opsctl.paging.title import incident_title, names_all, widened
from opsctl.slo import conventions as cv

if TYPE_CHECKING:
    from opsctl.config import AutomationConfig, Backend, RunbookTickets
    from opsctl.incident.record import Incident
    from opsctl.incident.store import IncidentStore, Joined

log = logging.getLogger("opsctl.automation")

SEVERITY_RANK = ("info", "warning", "error", "critical")
ACT_NOW = ("refused", "failed")  # failover outcomes that page "act now"


class Held:
    """The episode a worker holds while it acts, as its actions change it (each change a new frozen
    `Episode`), saved when the worker lets go whatever happened in between (`_firing`'s finally)."""

    __slots__ = ("episode",)

    def __init__(self, episode: Episode):
        self.episode = episode

    def change(self, **fields: Any) -> Episode:
        self.episode = self.episode.changed(**fields)
        return self.episode


@dataclass
class PolicyEngine:
    """Acts on alerts (firing: failover, page, ticket, note; resolved: the restore's hold-down) and
    PagerDuty events, and restores what is due; raises Busy or ActionFailed for a retry."""

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
        from opsctl.incident.grouping import page_key

        assert self.incidents is not None
        return page_key(self.settings.incident.paging_route_key, self.incidents.service)

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
                            status=outcome.status, at=now, detail=outcome.detail[:300],
                            overrides=tuple(str(o) for o in outcome.data.get("overrides") or ()))

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


    def _by_cause(self, candidates: list[CompiledPolicy], event: "AlertEvent") -> tuple[list[CompiledPolicy], set[str]]:
        """Narrow the label-matching policies by the alert's cause. A policy with `causes` takes the
        alert when the cause is one of them, unless another such policy's open episode was opened
        by this very alert (its cause at opening decides); and keeps an alert whose episode it
        opened though the cause has flipped since. Returns the policies and those kept by opening."""
        narrowed = [p for p in candidates if p.causes]
        if not narrowed or event.status != "firing":
            return candidates, set()
        opened = self._opened_by(narrowed, event)
        cause = event.cause
        if opened:
            chosen = [p for p in candidates if not p.causes or p.name in opened]
        else:
            chosen = [p for p in candidates if not p.causes or cause in p.causes]
        return chosen, {p.name for p in chosen if p.causes and cause not in p.causes}

    def _opened_by(self, policies: list[CompiledPolicy], event: "AlertEvent") -> set[str]:
        """The policies whose open episode this alert (fingerprint and startsAt) opened."""
        keys = {episode_key(p.name, p.target(event.labels), event.fingerprint, event.starts_at): p.name
                for p in policies}
        return {keys[e.key] for e in self.store.episodes(open_only=True) if e.key in keys}

    # -- alerts -------------------------------------------------------------------------------

    def handle_alert(self, event: AlertEvent) -> list[Taken]:
        """Act on one alert event. Raises Busy (retry soon) or ActionFailed (retry, bounded)."""
        taken: list[Taken] = []
        failed: list[str] = []
        chosen, flipped = self._by_cause(matching(self.policies, event.labels), event)
        joined = self.join(event) if chosen and self.incidents is not None else None
        if joined is not None and joined.incident.takeover is not None:
            self._taken_over(chosen, event, joined.incident, taken, failed)
        else:
            for policy in chosen:
                if event.status == "firing":
                    self._firing(policy, event, taken, failed, flipped=policy.name in flipped, joined=joined)
                else:
                    self._resolved(policy, event, taken)
            if joined is not None and event.status == "firing" and not joined.opened:
                self._joined_notes(chosen, event, joined, taken, failed)
        if failed:
            raise ActionFailed("; ".join(failed))
        return taken

    def _taken_over(self, chosen: list[CompiledPolicy], event: AlertEvent, incident: "Incident",
                    taken: list[Taken], failed: list[str]) -> None:
        """On-call took the incident over: nothing acts; the alert is one note on the page."""
        assert incident.takeover is not None
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
        incident = self.incidents.get(joined.incident.id) if self.incidents is not None else None
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

        assert self.incidents is not None
        self.incidents.change(incident.id, lambda i: i.with_intent(IncidentIntent(
            key=key, action=action, at=self.clock(), status=outcome.status)))

    def _firing(self, policy: CompiledPolicy, event: AlertEvent, taken: list[Taken], failed: list[str], *,
                flipped: bool = False, joined: "Joined | None" = None) -> None:
        target = policy.target(event.labels)
        try:
            start = self.store.begin_firing(policy.name, event.fingerprint, target, event.starts_at,
                                            failover=policy.policy.actions.failover is not None)
        except EpisodeBlocked as blocked:
            self._blocked(policy, event, target, blocked, taken, failed)
            return
        if start is None:
            log.info("policy %s: ignoring a late firing copy of %s", policy.name, event.fingerprint)
            return
        held = Held(start.episode)
        episode = start.episode
        if flipped:  # the same alert, the same episode: the cause it opened with stays the episode's
            self._record(policy, event, episode, "cause", Outcome(
                "noop", f"cause now {event.cause} (the episode opened with one of {', '.join(sorted(policy.causes))});"
                        " same episode"), self.executor_for(policy)[1], taken)
        try:
            self._act_on_firing(policy, event, held, target, taken, failed, start.cancelled, start.moved_away,
                                start.resumed, joined=joined)
        finally:
            self.store.save(held.episode)

    def _act_on_firing(self, policy: CompiledPolicy, event: AlertEvent, held: "Held", target: str,
                       taken: list[Taken], failed: list[str], cancelled: bool, moved_away: set[str],
                       resumed: bool = False, joined: "Joined | None" = None) -> None:
        """Failover first (seconds count at four nines), then the page that asks a human to confirm it,
        the vendor ticket, and the note. The incident key is known before paging (it is the pager's
        dedup key), so the failover already names the incident the page opens."""
        actions = policy.policy.actions
        executor, dry = self.executor_for(policy)
        context = self._context(policy, event)
        episode = held.episode
        if joined is not None:  # the incident's page is the dedup key every action names
            page_of = joined.incident.page
            incident_key = episode.incident or (page_of.dedup_key if page_of is not None else self.page_key())
            if episode.incident != incident_key:
                episode = held.change(incident=incident_key)
        else:
            incident_key = self.incident_key(policy.name, target, episode)
        done: list[str] = []
        if cancelled:
            done.append("restore cancelled: the alert fired again inside the hold-down")
        failover: Outcome | None = None
        if actions.failover is not None and episode.failover == "started":
            # Marked when the episode was taken (begin_firing): a replica taking over from one killed
            # mid-failover knows it was started, and adopts what it wrote.
            failover = self._failover(policy, event, episode, target, executor, context, dry, taken, failed,
                                      incident=episode.incident or incident_key, moved_away=moved_away,
                                      resumed=resumed)
            if failover.status in ("applied", "dry_run"):
                episode = held.change(failover=failover.status, owned=True, saved=dict(failover.data))
            else:
                episode = held.change(failover=failover.status)
            done.append(f"failover from {target}: {failover.status} ({failover.detail})")
            if joined is not None:
                self.move(joined.incident, "failover", target, failover)
        if joined is not None:
            self._respond(policy, event, held, target, joined, failover, executor, context, dry, taken, failed, done)
            return
        page = actions.page
        if page is not None and not episode.incident:
            outcome = self._run(policy, event, episode, "page", dry, lambda: executor.page(PageRequest(
                context, summary=self._page_summary(policy, event, target, failover), severity=page.severity,
                dedup_key=incident_key, details={**self._details(event), **(
                    {"failover": failover.to_dict()} if failover else {})},
            )), taken, failed)
            if outcome.status in ("applied", "noop", "dry_run"):
                episode = held.change(incident=str(outcome.data.get("incident") or incident_key))
        if actions.ticket is not None and not episode.ticket:
            outcome = self._ticket(policy, event, episode, target, executor, context, dry, taken, failed)
            if outcome.status in ("applied", "noop", "dry_run", "skipped"):
                episode = held.change(ticket=str(outcome.data.get("ticket") or outcome.status))
            done.append(f"vendor ticket: {outcome.status} ({outcome.detail})")
        incident = episode.incident
        if actions.note and incident and done:
            text = f"opsctl automation, policy {policy.name}: {event.summary()}. " + "; ".join(done)
            self._run(policy, event, episode, "note", dry, lambda: executor.note(
                NoteRequest(context, incident=incident, text=text)), taken, failed)

    def _blocked(self, policy: CompiledPolicy, event: AlertEvent, target: str, blocked: EpisodeBlocked,
                 taken: list[Taken], failed: list[str]) -> None:
        """The policy's episode for `target` is stored but does not read: it may hold this very
        incident (its failover, its page), so no second episode opens beside it and nothing is done
        twice. Never silent either: the refusal is recorded and counted (action "episode", refused),
        a human is paged with what to do when the policy pages (one incident per entry: its dedup
        key names it), and the event is retried (ActionFailed) until the entry reads or is removed."""
        executor, dry = self.executor_for(policy)
        what = f"{blocked.message}; {blocked.hint}"
        log.error("policy %s: %s", policy.name, what)
        self._record(policy, event, None, "episode", Outcome("refused", what), dry, taken)
        page = policy.policy.actions.page
        if page is not None:
            head = self._page_summary(policy, event, target, None)
            summary = (f"{head}: automation BLOCKED for {target}: stored episode {blocked.ident} does not read;"
                       f" repair or delete it; act now")
            self._run(policy, event, None, "page", dry, lambda: executor.page(PageRequest(
                self._context(policy, event), summary=summary[:1024], severity=page.severity,
                dedup_key=f"opsctl-automation-{policy.name}-{target}-unreadable-{blocked.ident}",
                details={**self._details(event), "blocked": what})), taken, failed)
        failed.append(f"episode: {what}")


    def _failover(self, policy: CompiledPolicy, event: AlertEvent, episode: Episode, target: str, executor: Executor,
                  context: Context, dry: bool, taken: list[Taken], failed: list[str], *,
                  incident: str, moved_away: set[str], resumed: bool = False) -> Outcome:
        failover = policy.policy.actions.failover
        assert failover is not None  # called only for a policy with a failover action (_act_on_firing)
        if target not in self.backends:
            outcome = Outcome("skipped", f"{target!r} is not a configured backend (known: {', '.join(sorted(self.backends))})")
            return self._record(policy, event, episode, "failover", outcome, dry, taken)
        receivers = set(self.backends) - {target}
        if receivers and receivers <= moved_away:
            away = ", ".join(sorted(moved_away))
            outcome = Outcome("refused", f"traffic is already failed over away from {away}; failing over from"
                                         f" {target} too would leave no healthy backend: a human decides")
            return self._record(policy, event, episode, "failover", outcome, dry, taken)
        return self._run(policy, event, episode, "failover", dry, lambda: executor.failover(FailoverRequest(
            context, backend=target, emergency_in_freeze=failover.emergency_in_freeze, incident=incident,
            resumed=resumed, episode=episode.key or "",
            paging=event.labels.get(cv.LABEL_SEVERITY) == "page",
        )), taken, failed)

    def _respond(self, policy: CompiledPolicy, event: AlertEvent, held: "Held", target: str, joined: "Joined",
                 failover: Outcome | None, executor: Executor, context: Context, dry: bool, taken: list[Taken],
                 failed: list[str], done: list[str]) -> None:
        """The incident's page, ticket and note (one PagerDuty incident, one ticket per vendor):
        the first page opens it; a later one only when its severity rises or the failover needs a
        human for the first time ("act now", once); the rest are notes."""
        from opsctl.incident.record import IncidentPage

        assert self.incidents is not None
        incidents = self.incidents
        actions = policy.policy.actions
        incident = incidents.get(joined.incident.id) or joined.incident
        key = held.episode.incident or self.page_key()
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
                outcome = self._run(policy, event, held.episode, "page", dry, lambda: executor.page(PageRequest(
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
            self._incident_ticket(policy, event, held, target, incident, executor, context, dry, taken, failed, done)
        if actions.note and key and done:
            text = f"opsctl automation, policy {policy.name}: {event.summary()}. " + "; ".join(done)
            self._run(policy, event, held.episode, "note", dry, lambda: executor.note(
                NoteRequest(context, incident=key, text=text)), taken, failed)

    def _incident_ticket(self, policy: CompiledPolicy, event: AlertEvent, held: "Held", target: str,
                         incident: "Incident", executor: Executor, context: Context, dry: bool, taken: list[Taken],
                         failed: list[str], done: list[str]) -> None:
        """At most one ticket per vendor per incident, its category from the most specific cause seen
        (auth before capacity before the rest); a later cause adds a note to it."""
        from opsctl.incident.grouping import most_specific, ticket_key
        from opsctl.incident.record import IncidentTicket

        assert self.incidents is not None
        ticket = incident.ticket(target)
        if ticket is None and held.episode.ticket == "skipped":
            return  # decided once for this episode (no vendor behind the target): not again per alert
        if ticket is None:
            cause = most_specific(incident.causes) or event.cause
            outcome = self._ticket(policy, event, held.episode, target, executor, context, dry, taken, failed,
                                   cause=cause, key=ticket_key(incident.id, target))
            if outcome.status in ("applied", "noop", "dry_run"):
                filed = str(outcome.data.get("ticket") or outcome.status)
                category = self.ticket_category(policy, cause)
                self.incidents.change(incident.id, lambda i: None if i.ticket(target) else i.with_ticket(IncidentTicket(
                    vendor=target, category=category, id=filed, causes=i.causes, filed_at=self.clock())))
                held.change(ticket=filed)
            elif outcome.status == "skipped":
                held.change(ticket="skipped")
            done.append(f"vendor ticket: {outcome.status} ({outcome.detail})")
            return
        if not held.episode.ticket:
            held.change(ticket=ticket.id)
        new = tuple(c for c in incident.causes if c not in ticket.causes)
        if not new:
            return
        text = (f"opsctl automation, incident {incident.id}: a later cause of the same outage:"
                f" {', '.join(cv.cause_text(c) for c in new)} ({event.summary()})")
        outcome = self._run(policy, event, held.episode, "ticket_note", dry, lambda: executor.ticket_note(
            TicketNoteRequest(context, backend=target, ticket=ticket.id, text=text,
                              idempotency_key=ticket_key(incident.id, target))), taken, failed)
        if outcome.status in ("applied", "dry_run", "skipped"):
            self.incidents.change(incident.id, lambda i: i.with_ticket(
                dataclasses.replace(ticket, causes=ticket.causes + new)) if i.ticket(target) == ticket else None)
            done.append(f"vendor ticket {ticket.id}: note added ({outcome.status})")

    def _ticket(self, policy: CompiledPolicy, event: AlertEvent, episode: Episode, target: str, executor: Executor,
                context: Context, dry: bool, taken: list[Taken], failed: list[str], *, cause: str | None = None,
                key: str = "") -> Outcome:
        ticket = policy.policy.actions.ticket
        assert ticket is not None  # called only for a policy with a ticket action (_act_on_firing)
        backend = self.backends.get(target)
        if backend is None or backend.kind != "vendor" or not backend.vendor:
            outcome = Outcome("skipped", f"{target} is not a vendor backend: no vendor to file a ticket with")
            return self._record(policy, event, episode, "ticket", outcome, dry, taken)
        description = "\n".join([
            event.summary(),
            f"Alert: {event.labels.get('alertname', '')} since {event.starts_at}",
            *(f"{k}: {v}" for k, v in sorted(event.labels.items())),
            *([f"Source: {event.generator_url}"] if event.generator_url else []),
            *([f"Incident: {episode.incident}"] if episode.incident else []),
        ])
        return self._run(policy, event, episode, "ticket", dry, lambda: executor.file_ticket(TicketRequest(
            context, backend=target, category=self.ticket_category(policy, cause or event.cause),
            severity=ticket.severity, summary=self._ticket_summary(backend.description or target, event),
            description=description, incident=episode.incident,
            idempotency_key=key or f"opsctl-automation-{policy.name}-{target}-{episode.key}",
        )), taken, failed)

    def _resolved(self, policy: CompiledPolicy, event: AlertEvent, taken: list[Taken]) -> None:
        target = policy.target(event.labels)
        restores = bool(policy.policy.actions.restore)
        why = "traffic was not moved by this automation" if restores else "the policy does not restore"
        ended = self.store.begin_resolved(policy.name, event.fingerprint, target, event.starts_at, restores=restores,
                                          hold_down=self.hold_down(policy), because=lambda _: f"alerts resolved; {why}")
        if ended is None:
            return
        episode, state = ended
        if state == "restore_pending":
            text = f"every matching alert resolved; traffic returns to {target} after the hold-down ({self.hold_down(policy)}s)"
        else:
            text = f"every matching alert resolved; episode closed ({why})"
        executor, dry = self.executor_for(policy)
        incident = episode.incident
        if policy.policy.actions.note and incident:
            self._run(policy, event, episode, "note", dry, lambda: executor.note(NoteRequest(
                self._context(policy, event), incident=incident,
                text=f"opsctl automation, policy {policy.name}: {event.summary()}. {text}")), taken, [])

    # -- PagerDuty ----------------------------------------------------------------------------

    def handle_pagerduty(self, key: str, data: dict[str, Any], received_at: float) -> list[Taken]:
        """Record a verified PagerDuty event against the episode whose incident it is about.

        Traffic never moves on a PagerDuty event alone: the alert's resolution drives the restore.
        An acknowledgement is the human confirming the automated failover, and shows in the record."""
        taken: list[Taken] = []
        keys = [k for k in (data.get("incident_key"), data.get("data_id")) if k]
        if not keys:
            return taken
        episode = self.store.by_incident(keys)
        if episode is None:
            return taken
        policy = self.by_name.get(episode.policy)
        if policy is None:
            return taken
        who = f" by {data['agent']}" if data.get("agent") else ""
        outcome = Outcome("noop", f"PagerDuty {data.get('event_type')}{who} on incident {data.get('data_id') or keys[0]}"
                                  f" (episode {episode.id}, {episode.state})")
        event = AlertEvent(key=key, status="pagerduty", labels={}, annotations={}, starts_at="", fingerprint="",
                           group_key="", received_at=received_at)
        self._record(policy, event, episode, "pagerduty", outcome, self.executor_for(policy)[1], taken)
        return taken

    # -- restores -----------------------------------------------------------------------------

    def run_due_restores(self, limit: int = 10) -> list[Taken]:
        """Restore every episode whose hold-down has passed; a refused restore is retried later."""
        taken: list[Taken] = []
        if self.settings.restore is not None:  # automation.restore: the canary restore instead of the hold-down
            self._canary_restores(taken)
            return taken
        for _ in range(limit):
            episode = self.store.claim_due_restore()
            if episode is None:
                break
            self._restore(episode, taken)
        self.close_due_incidents()
        return taken

    def _canary_restores(self, taken: list[Taken]) -> None:
        """Every open episode whose failover this automation applied, under a restoring policy, is
        looked at every LOOK_EVERY seconds (opsctl/traffic/canary.py decides, canary_run.py moves):
        it starts as soon as the backend's fast windows are healthy, whether or not its alerts still
        fire. Its progress is kept here, in memory (the incident record's `restore` field keeps it
        next; after a restart it is rebuilt from the split); the episode closes once its alerts
        resolved and the saved split is back. Looks that move nothing are not recorded."""
        from opsctl.traffic.canary_run import LOOK_EVERY

        book: dict[int | str, tuple[Any, float, str]] = self.__dict__.setdefault("_canary_book", {})
        now = self.clock()
        if now < self.__dict__.get("_canary_swept", float("-inf")) + 1.0:  # serve sweeps every 0.25 s: read once a second
            return
        self.__dict__["_canary_swept"] = now
        for episode in self.store.episodes(open_only=True):
            policy = self.by_name.get(episode.policy)
            kept, look, said = book.get(episode.id, (None, 0.0, ""))
            if policy is None or not policy.policy.actions.restore or not episode.traffic_moved or now < look:
                continue
            executor, dry = self.executor_for(policy)
            context = Context(policy.name, "", {"backend": episode.target}, f"canary restore of {episode.target}",
                              f"restore-{episode.id}")
            try:
                outcome = executor.restore(RestoreRequest(context, backend=episode.target, incident=episode.incident,
                                                          saved=episode.saved, canary=True, progress=kept))
            except Exception as exc:  # a conflict, a transient API failure: the next look tries again
                log.exception("episode %s: canary restore failed", episode.id)
                outcome = Outcome("failed", _describe(exc))
            kept = outcome.data.get("restore", kept)
            say = f"{outcome.status}:{outcome.data.get('move', '')}"  # a move refused again is not said again
            book[episode.id] = (kept, now + LOOK_EVERY, say if outcome.status != "applied" else "")
            if outcome.status == "applied" or (say != said and ("move" in outcome.data or outcome.status != "noop")):
                self._record(policy, None, episode, "restore", outcome, dry, taken, started=now)
                incident = episode.incident  # one note when it ends (every move is a change event already)
                ended = outcome.status == "skipped" or (outcome.status == "applied" and kept is not None and kept.finished)
                if policy.policy.actions.note and incident and ended:
                    self._run(policy, None, episode, "note", dry, lambda: executor.note(NoteRequest(
                        context, incident=incident, text=f"opsctl automation, policy {policy.name}: canary restore"
                        f" of {episode.target}: {outcome.status} ({outcome.detail})")), taken, [])
            done = kept is not None and kept.finished and episode.state != "open"
            if outcome.status in ("dry_run", "skipped") or done:
                self.store.close_episode(episode, f"restore {outcome.status}: {outcome.detail}")
                book.pop(episode.id, None)

    def _restore(self, episode: Episode, taken: list[Taken]) -> None:
        policy = self.by_name.get(episode.policy)
        store = self.store
        if policy is None:
            store.close_episode(episode, "policy no longer configured; restore left to a human")
            log.warning("episode %s: policy %s is gone; traffic left as it is", episode.id, episode.policy)
            return
        incident = self.incident_of(episode.incident)
        if incident is not None and incident.takeover is not None:
            store.close_episode(episode, f"incident {incident.id} taken over by {incident.takeover.by}: restore left to them")
            return
        executor, dry = self.executor_for(policy)
        context = Context(policy.name, "", {"backend": episode.target}, f"restore {episode.target} after hold-down",
                          f"restore-{episode.id}")
        started = self.clock()
        retry: float = self.settings.restore_retry_seconds
        try:
            outcome = executor.restore(RestoreRequest(
                context, backend=episode.target, incident=episode.incident, saved=episode.saved,
                failover_operations=self._unrecorded_failover(policy.name, episode),
                hold_down=float(self.hold_down(policy)), episode=episode.key or ""))
        except Exception as exc:  # a failed restore is retried after restore_retry
            log.exception("episode %s: restore failed", episode.id)
            outcome = Outcome("failed", _describe(exc))
            if _passing(exc):  # a conflict or a transient API failure: worth another try soon, not in a minute
                retry = min(retry, TRANSIENT_RESTORE_RETRY)
        held_for = outcome.data.get("retry_in") if outcome.status == "refused" else None
        if isinstance(held_for, (int, float)):  # held until a known instant (the re-failover backoff)
            retry = min(retry, float(held_for))
        self._record(policy, None, episode, "restore", outcome, dry, taken, started=started,
                     received_at=episode.restore_due)
        if incident is not None and outcome.status in ("applied", "noop", "skipped", "refused", "failed"):
            self.move(incident, "restore", episode.target, outcome)
        if outcome.status in ("applied", "noop", "dry_run", "skipped"):
            store.end_restore(episode, closed_because=f"restore {outcome.status}: {outcome.detail}")
        else:
            store.end_restore(episode, closed_because=None, retry_at=self.clock() + retry)
        # One note per restore step: its first unsuccessful try (refused or failed, retried after)
        # and its end; the retries between add none (under chaos they would multiply).
        unsuccessful = outcome.status in ("refused", "failed")
        incident_key = episode.incident
        if policy.policy.actions.note and incident_key and (not unsuccessful or not episode.restore_refusals):
            text = f"opsctl automation, policy {policy.name}: restore traffic to {episode.target}: {outcome.status} ({outcome.detail})"
            if outcome.status in ("refused", "failed"):
                text += (f"; retrying every {self.settings.restore_retry}" if retry == self.settings.restore_retry_seconds
                         else f"; retrying in {retry:.0f}s")
            self._run(policy, None, episode, "note", dry, lambda: executor.note(
                NoteRequest(context, incident=incident_key, text=text)), taken, [])


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


__all__ = ["PolicyEngine", "TRANSIENT_RESTORE_RETRY", "partial_text"]
