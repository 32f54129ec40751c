"""The automation service without HTTP: admit alerts into their incident, act on them, restore on time.

    accept_alertmanager  alerts no policy matches -> answered at once, written nowhere           (202)
                         the rest -> taken into their incident and its responses, one
                         compare-and-swap under the leader's term (PolicyEngine.admit) -> queued  (202)
                         nothing written: a replica that does not lead, the state unreachable,
                         the queue full                                                          (503)
    accept_pagerduty     the event written on its incident's page (one compare-and-swap)          (202)
    workers              take the actions of an admitted alert (failover, page, ticket, notes)
    maintenance          every quarter second: restores whose hold-down passed; every second (and
                         at once on start and on becoming leader): responses the open incident
                         shows still owe an action (PolicyEngine.resumable) are acted on again

Deliveries are not persisted (docs/decisions/0216-deliveries-not-persisted.md): the incident is the
only durable record, Alertmanager the queue. An answer is given once the incident's intent is
written, so a lost answer is resent and the resend finds its alerts in the incident (`duplicate`,
nothing written); the worker queue is memory, and what it lost (a crash, a leader that stood down,
a try that could not act) is found again on the record by the maintenance thread. A try that
could not act is tried again with capped backoff until it acts, its alerts resolve or on-call takes
the incident over, in local mode as in team mode.

Where the incidents live follows `state.backend`: a file each under the state dir (processes of one
host sharing it act on a response one at a time: response_lock.py, decision 0231), or one
ConfigMap each with a leader elected on a Lease (leader.py). With a leader only it admits a
matching alert: a follower answers it 503 (Retry-After) and the sender's resend, spread over the
replicas by the Service, reaches the leader. Every action runs under the leader's term
(`FencedExecutor`: the term is re-read before each action; a page, ticket or note is preceded by an
intent written on the incident under the term; failover and restore carry the term and an operation
id chosen from the incident's response before the write; a new leader's first write rewrites the
open incident under its term). One time base: with shared state the service's clock is the API
server's (`Date` plus monotonic time). server.py puts HTTP in front of it.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from opsctl.automation.actions import Executor
from opsctl.automation.fenced import FencedExecutor
from opsctl.automation.metrics import ServeMetrics
from opsctl.automation.payloads import AlertmanagerMessage, PagerDutyEvent
from opsctl.automation.policy import ActionFailed, AlertEvent, matching
from opsctl.automation.queue import WorkQueue
from opsctl.errors import OpsctlError
from opsctl.fencing import FencedError, Term

if TYPE_CHECKING:
    from opsctl.automation.policy_engine import Admitted
    from opsctl.config import Config
    from opsctl.incident.store import IncidentStore

log = logging.getLogger("opsctl.automation")

STATE_FILE = "automation/automation.sqlite"  # the record of actions (an audit: action_log.py)
RESUME_EVERY = 1.0  # seconds: the open incident is read for owed actions at most this often
RESUME_GRACE = 5.0  # seconds an alert just admitted is left to the worker that admitted it
NOT_LEADING = {"Retry-After": "1"}


@dataclass(frozen=True)
class Answer:
    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


def alert_key(fingerprint: str, starts_at: str, status: str) -> str:
    """One alert state (fingerprint + startsAt + status) as a fixed-length name for the record of
    actions and the actions' contexts (an audit: nothing is deduplicated on it)."""
    return hashlib.sha256("\x1f".join(("alertmanager", fingerprint, starts_at, status)).encode()).hexdigest()


class AutomationService:
    def __init__(self, cfg: "Config", live: Executor, *, clock: Callable[[], float] = time.time,
                 state_file: Path | None = None):
        settings = cfg.automation
        self.cfg = cfg
        self.clock = clock
        path = state_file or cfg.state_path / STATE_FILE
        from opsctl.automation.election import open_elector
        from opsctl.automation.engine_factory import incident_store

        self.elector = open_elector(cfg, on_change=self._leadership)  # None: local state
        self.shared = cfg.state.backend != "local"
        self.incidents: IncidentStore  # the incidents (opsctl/incident/): a file each, or a ConfigMap each
        if self.shared:
            from opsctl.state import open_state_store

            store = open_state_store(cfg)
            if clock is time.time:  # one time base for every replica: the API server's clock
                clock = store.now
            self.clock = clock
            if self.elector is not None:  # intents written on the incident under the term before each action
                live = FencedExecutor(live, self.term, lambda action, key, detail: self.engine.intend(action, key, detail))
            else:
                live = FencedExecutor(live)
            self.incidents = incident_store(cfg, state=store, term=self.term if self.elector is not None else None,
                                            clock=clock)
        else:
            live = FencedExecutor(live)  # one replica: no term, but operation ids chosen before the write
            self.incidents = incident_store(cfg, clock=clock)  # a file per incident under the state dir
        self.queue = WorkQueue(settings.queue_size, settings.workers, self.process)
        self._items: dict[str, "Admitted"] = {}  # queued or in hand, by queue key (memory only)
        self._busy: dict[str, int] = {}  # responses (policy/target) queued or in hand here
        self._items_lock = threading.Lock()
        self._ids = itertools.count(1)
        self.metrics = ServeMetrics(lambda: self.queue.depth, settings.queue_size, leader=self.acting,
                                    waiting=self.waiting)
        from opsctl.automation.action_log import ActionLog
        from opsctl.automation.engine_factory import build_engine

        self.actions = ActionLog(path)  # the record of actions (an audit, never read to decide)
        # Local mode: processes of one host sharing the state dir act on a response one at a time
        # (response_lock.py, decision 0231); team mode: only the leader acts.
        self.engine = build_engine(cfg, self.incidents, live, clock=clock, on_action=self._count,  # as drills build it
                                   actions=self.actions, lock_dir=None if self.shared else path.parent / "locks")
        self._stop = threading.Event()
        self._resume_now = threading.Event()
        self._maintenance = threading.Thread(target=self._maintain, name="opsctl-maintenance", daemon=True)
        self.started = False

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        self.queue.start()
        self._maintenance.start()
        if self.elector is not None:
            self.elector.start()
        self._resume_now.set()  # what a previous process left owed is on the record: looked at at once
        from opsctl.rollout.serve import start_in_serve  # the rollout, ticked while this replica leads

        self.rollouts = start_in_serve(self)
        self.started = True

    def stop(self, timeout: float = 10.0) -> None:
        """Stop acting (finishing what is in hand), then give the Lease up so a successor takes over at once."""
        self._stop.set()
        rollouts = getattr(self, "rollouts", None)
        if rollouts is not None:
            rollouts.stop()
        self.queue.stop(timeout)
        if self._maintenance.is_alive():
            self._maintenance.join(timeout)
        if self.elector is not None:
            self.elector.stop(release=True)
        self.started = False

    def term(self) -> Term | None:
        """The term this replica acts under: the elector's (None when not leading), else local@0."""
        from opsctl.fencing import LOCAL_TERM

        return LOCAL_TERM if self.elector is None else self.elector.term

    def acting(self) -> bool:
        """Whether this replica acts: always when it is the only one (local state), else while it leads."""
        return self.elector is None or self.elector.is_leader

    def waiting(self) -> int:
        """Responses waiting for a retry (their last try could not act); 0 on a replica that does
        not act. Never reads the store: /metrics answers at once."""
        return self.engine.waiting() if self.acting() else 0

    def _leadership(self, leader: bool) -> None:
        if not leader:
            return
        if self.shared:
            try:
                self.engine.fence()  # the open incident under this term: the previous leader's writes are refused
            except OpsctlError as exc:
                log.warning("new leader: could not rewrite the open incident under its term yet: %s", exc)
        self._resume_now.set()  # what the previous leader left owed: acted on from the record at once

    def ready(self) -> tuple[bool, str]:
        if not self.started or self._stop.is_set():
            return False, "not started"
        if not self._maintenance.is_alive():
            return False, "maintenance thread stopped"
        try:
            self.incidents.check()
        except OpsctlError as exc:
            return False, f"state unavailable: {str(exc).splitlines()[0][:200]}"
        if self.queue.room() <= 0:
            return False, "queue full"
        elector = self.elector
        if elector is not None:
            role = "leader" if elector.is_leader else f"follower (leader: {elector.holder or 'none'})"
            if not elector.is_leader and self.cfg.automation.leader_election.ready_only_when_leader:
                return False, role
            return True, f"ready, {role}"
        return True, "ready"

    # -- acting -------------------------------------------------------------------------------

    def process(self, key: str) -> None:
        """Worker: the actions of one admitted alert, while this replica acts."""
        with self._items_lock:
            item = self._items.pop(key, None)
        if item is None:
            return
        try:
            if not self.acting():  # the leader acts on it from the record (its maintenance thread)
                return
            self.engine.act(item)
        except FencedError as exc:  # not leading (any more): whoever leads acts on the record
            log.warning("alert %s: fenced: %s", item.event.key[:12], str(exc).splitlines()[0][:300])
            self.metrics.events.labels("fenced").inc()
        except Exception as exc:  # ActionFailed, or a bug: the record's owed actions are tried again
            if not isinstance(exc, (ActionFailed, OpsctlError)):
                log.exception("alert %s: unexpected error", item.event.key[:12])
            else:
                log.warning("alert %s: %s (tried again)", item.event.key[:12], str(exc).splitlines()[0][:300])
            self.metrics.events.labels("retried").inc()
        else:
            self.metrics.events.labels("done").inc()
        finally:
            self._release(item)

    def _offer(self, item: "Admitted") -> bool:
        """Queue an admitted alert for a worker (its backend is its partition: in order per backend)."""
        key = f"{item.event.key[:16]}#{next(self._ids)}"
        names = self.engine.names(item)
        with self._items_lock:
            self._items[key] = item
            for name in names:
                self._busy[name] = self._busy.get(name, 0) + 1
        if self.queue.offer([(item.event.labels.get("backend") or item.event.fingerprint, key)]):
            return True
        with self._items_lock:
            self._items.pop(key, None)
        self._release(item)
        return False

    def _release(self, item: "Admitted") -> None:
        with self._items_lock:
            for name in self.engine.names(item):
                left = self._busy.get(name, 0) - 1
                if left > 0:
                    self._busy[name] = left
                else:
                    self._busy.pop(name, None)

    def _in_hand(self, name: str) -> bool:
        with self._items_lock:
            return name in self._busy

    def _count(self, taken: Any) -> None:
        self.metrics.action(taken.policy, taken.action, taken.outcome.status, taken.seconds)

    def _maintain(self) -> None:
        last_resume = 0.0
        while not self._stop.wait(0.25):
            if not self.acting():
                continue
            try:
                self.engine.run_due_restores()
                now = time.monotonic()
                at_once = self._resume_now.is_set()  # started, or became leader: nobody else is on it
                if now - last_resume >= RESUME_EVERY or at_once:
                    self._resume_now.clear()
                    last_resume = now
                    for item in self.engine.resumable(self._in_hand, grace=0.0 if at_once else RESUME_GRACE):
                        if self.queue.room() <= 0 or not self._offer(item):
                            break
            except OpsctlError as exc:  # the shared state is unreachable: /readyz says so; retried next round
                log.warning("maintenance round: %s", str(exc).splitlines()[0][:300])
                self._stop.wait(2.0)
            except Exception:  # keep maintaining; the error is logged and the next round retries
                log.exception("maintenance round failed")

    # -- deliveries ---------------------------------------------------------------------------

    def urgent(self, message: AlertmanagerMessage) -> bool:
        """Whether some policy matches an alert of the notification (no I/O): the server answers
        one that none matches on the event loop, the rest on a recording thread."""
        return any(matching(self.engine.policies, alert.labels) for alert in message.alerts)

    def accept_alertmanager(self, message: AlertmanagerMessage, received_at: float) -> Answer:
        events = [AlertEvent(key=alert_key(a.fingerprint, a.starts_at.canonical, a.status), status=a.status,
                             labels=dict(a.labels), annotations=dict(a.annotations), starts_at=a.starts_at.canonical,
                             fingerprint=a.fingerprint, group_key=message.group_key, generator_url=a.generator_url,
                             received_at=received_at) for a in message.alerts]
        matched = [e for e in events if matching(self.engine.policies, e.labels)]
        idle = len(events) - len(matched)
        if idle:
            self.metrics.events.labels("no_policy").inc(idle)
        if not matched:  # nothing any policy acts on: answered without a write
            self.metrics.delivery("alertmanager", "accepted")
            return Answer(202, {"status": "accepted", "events": len(events), "new": 0, "queued": 0})
        if not self.acting():
            self.metrics.delivery("alertmanager", "not_leading")
            return Answer(503, {"error": "this replica does not lead: retry (the leader writes the incident)"},
                          NOT_LEADING)
        if self.queue.room() <= 0:
            self.metrics.delivery("alertmanager", "queue_full")
            return Answer(503, {"error": "queue full: retry later", "queue_capacity": self.queue.capacity})
        from opsctl.incident.record import MalformedIncident

        if self.shared:  # every replica stamps arrivals on one clock: the API server's
            try:
                received_at = self.clock()
            except OpsctlError:
                pass
        try:
            admission = self.engine.admit(matched)
        except MalformedIncident as exc:  # never acted on beside it: refused, paged, resent by Alertmanager
            self._blocked(matched[0], exc)
            self.metrics.delivery("alertmanager", "unavailable")
            return Answer(503, {"error": f"the stored incident does not read: {str(exc).splitlines()[0][:300]}"})
        except FencedError:
            self.metrics.delivery("alertmanager", "not_leading")
            return Answer(503, {"error": "this replica no longer leads: retry"}, NOT_LEADING)
        except OpsctlError as exc:  # unreachable, or compare-and-swap gave up: nothing written, resent
            log.warning("incident not written: %s", str(exc).splitlines()[0][:300])
            self.metrics.delivery("alertmanager", "unavailable")
            return Answer(503, {"error": "state unavailable: retry later"})
        if not admission.wrote:
            self.metrics.delivery("alertmanager", "duplicate")
            return Answer(202, {"status": "duplicate", "events": len(events), "new": 0, "queued": 0})
        queued = 0
        for item in self._worth_acting(admission.items):
            if self._offer(item):
                queued += 1
            else:  # written: the record's owed actions are picked up by the maintenance thread
                log.warning("queue full: alert %s left to the record's sweep", item.event.fingerprint[:32])
        self.metrics.delivery("alertmanager", "accepted")
        new = sum(1 for i in admission.items if i.joined.new_alert)
        return Answer(202, {"status": "accepted", "events": len(events), "new": new, "queued": queued})

    def _worth_acting(self, items: tuple["Admitted", ...]) -> list["Admitted"]:
        """The admitted alerts a worker has something to do for: the first new firing alert of each
        response in the notification and any that brings a new cause or backend, and each resolve that
        ended a response. The others were taken in by the write alone (a notification of 1,200
        alerts of one outage is one or two actions, not 1,200)."""
        worth: list["Admitted"] = []
        seen: set[tuple[str, ...]] = set()
        for item in items:
            if item.event.status != "firing":
                if item.ended:
                    worth.append(item)
                continue
            if not item.joined.new_alert and not item.cancelled:
                continue
            names = tuple(self.engine.names(item)) or (f"takeover:{item.joined.incident.id}",)
            news = item.joined.new_cause or item.joined.new_backend or item.cancelled
            if names not in seen or news:
                seen.add(names)
                worth.append(item)
        return worth

    def _blocked(self, event: AlertEvent, exc: Exception) -> None:
        try:
            self.engine.blocked(event, exc, [])
        except Exception:  # the page failed too: the resend tries again
            log.exception("the blocked-incident page failed")

    def accept_pagerduty(self, event: PagerDutyEvent, webhook_id: str, received_at: float) -> Answer:
        """Written on the incident's page (deduplicated on the signed event id, not X-Webhook-Id,
        which a replay can change), then answered."""
        payload = {
            "event_id": event.id, "event_type": event.event_type, "resource_type": event.resource_type,
            "occurred_at": event.occurred_at.canonical, "agent": event.agent, "data_id": event.data_id,
            "incident_key": event.incident_key, "status": event.status, "title": event.title,
        }
        if not self.acting():
            self.metrics.delivery("pagerduty", "not_leading")
            return Answer(503, {"error": "this replica does not lead: retry"}, NOT_LEADING)
        try:
            status, _ = self.engine.handle_pagerduty(event.id, payload, received_at)
        except FencedError:
            self.metrics.delivery("pagerduty", "not_leading")
            return Answer(503, {"error": "this replica no longer leads: retry"}, NOT_LEADING)
        except OpsctlError as exc:
            log.warning("PagerDuty event %s not written: %s", event.id[:64], str(exc).splitlines()[0][:300])
            self.metrics.delivery("pagerduty", "unavailable")
            return Answer(503, {"error": "state unavailable: retry later"})
        self.metrics.delivery("pagerduty", "duplicate" if status == "duplicate" else "accepted")
        return Answer(202, {"status": "duplicate" if status == "duplicate" else "accepted", "events": 1,
                            "incident": status != "unknown"})


__all__ = ["Answer", "AutomationService", "alert_key"]
