"""The automation service without HTTP: record deliveries, queue events, act on them, restore on time.

    accept_*()   deliveries -> events recorded in the delivery log (new keys only) -> queued  (202)
                 queue cannot take them -> nothing recorded                                   (503)
    workers      claim an event -> policy engine -> done, or retried later (capped backoff, no
                 attempt limit: until it acts, its incident closes or on-call takes it over)
    maintenance  every half second: restores whose hold-down passed; every second: events nobody
                 is working on (a full queue earlier, a retry that is due, a replica that died)

Where deliveries live follows `state.backend`: local SQLite under the state dir (one replica, the
embedded default), or the shared state store (delivery_store.py) with a leader elected on a Lease
(leader.py); the incidents (what the policy engine decides from) are a file each under the state
dir, or a ConfigMap each. There every replica records deliveries, and only the leader claims and acts on
them; a replica that becomes leader releases what the previous leader held and sweeps what is due.

server.py puts HTTP in front of it; tests and the benchmark drive it through that real server.
Receiving deliveries (`accept_*`, `Answer`) is here too: an Alertmanager notification or a
PagerDuty event becomes events recorded in the delivery log (new keys only) and queued; which
deliveries some policy acts on is known on receipt (no I/O). The executor under the leader's term
is fenced.py.

Team mode survives its own faults (issue 22): every action runs under the leader's term
(`FencedExecutor`: the term is re-read before each action; a page, ticket or note is preceded by an
intent written under the term, so a stale leader's intent write fails and the action never
happens; failover and restore carry the term and an operation id chosen from the incident's
response before the write, so a retry after a lost answer finds its own change; a new leader's
first write rewrites the open incident under its term). One time base: with shared state the
service's clock is the API server's (`Date` plus monotonic time), for received_at, leases, sweeps
and hold-downs alike. A delivery whose actions failed is retried with capped backoff until it acts,
its alert resolves or on-call takes its incident over, in local mode as in team mode.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
import time
from pathlib import Path
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, cast

from opsctl.automation.actions import Executor
from opsctl.automation.delivery_protocol import Deliveries
from opsctl.automation.fenced import FencedExecutor
from opsctl.automation.idempotency import ClaimedEvent, DeliveryLog, NewEvent, alert_event_key, webhook_event_key
from opsctl.automation.metrics import ServeMetrics
from opsctl.automation.payloads import AlertmanagerMessage, PagerDutyEvent
from opsctl.automation.policy import ActionFailed, AlertEvent, Taken, matching
from opsctl.automation.queue import WorkQueue
from opsctl.automation.quiet_writes import QuietWrites
from opsctl.errors import OpsctlError
from opsctl.fencing import FencedError, Term

if TYPE_CHECKING:
    from opsctl.automation.delivery_store import SharedDeliveryLog
    from opsctl.config import Config
    from opsctl.incident.store import IncidentStore

log = logging.getLogger("opsctl.automation")

STATE_FILE = "automation/automation.sqlite"
FENCED_RETRY = 0.1  # seconds before an event a fenced worker handed back is pending again
RETRY_CAP = 30.0  # seconds: the longest wait between tries of a delivery that could not act yet
SWEEP_GRACE = 5.0  # an event pending this long with no worker on it is re-queued
RETENTION = 14 * 86400  # finished events are forgotten after this long


@dataclass(frozen=True)
class Answer:
    status: int
    body: dict[str, Any]


class AutomationService:
    def __init__(self, cfg: "Config", live: Executor, *, clock: Callable[[], float] = time.time,
                 state_file: Path | None = None):
        settings = cfg.automation
        self.cfg = cfg
        self.clock = clock
        path = state_file or cfg.state_path / STATE_FILE
        from opsctl.automation.election import identity_for, open_elector

        self.elector = open_elector(cfg, on_change=self._leadership)  # None: the only replica
        self.shared = cfg.state.backend != "local"
        self.deliveries: Deliveries  # DeliveryLog (SQLite) or SharedDeliveryLog (team mode)
        self._arriving = 0
        self._quiet: QuietWrites | None = None
        self.incidents: IncidentStore  # the incidents (opsctl/incident/): a file each, or a ConfigMap each
        if self.shared:
            from opsctl.automation.delivery_store import FRESH, SharedDeliveryLog
            from opsctl.state import open_state_store

            store = open_state_store(cfg)
            if clock is time.time:  # one time base for every replica: the API server's clock
                clock = store.now
            self.clock = clock
            owner = f"{identity_for(cfg)}:{os.getpid()}"  # pod name: PIDs repeat across containers
            # An admit's own claim is taken without a write while no successor can have taken over:
            # within half of lease_duration - renew_deadline (delivery_store.FRESH).
            fresh = FRESH
            if self.elector is not None:
                duration, deadline, _ = settings.leader_election.seconds
                fresh = max(0.0, min(FRESH, (duration - deadline) / 2))
            # Writes of only alerts no policy matches wait (bounded, HOLD_OFF) while this replica has
            # actionable events queued or in hand that took no action yet: the trigger's path goes first;
            # past that, a quiet delivery is answered at once and written later (quiet_writes.py).
            self.deliveries = SharedDeliveryLog(store, clock=clock, owner=owner, fresh=fresh,
                                                term=self.term if self.elector is not None else (lambda: None),
                                                acting=self._in_hand)
            self._quiet = QuietWrites(self.deliveries, self._urgent_here,
                                      recorded=lambda new: self.metrics.events.labels("no_policy").inc(new))
            if self.elector is not None:  # intents written on the incident under the term before each action
                live = FencedExecutor(live, self.term, lambda action, key, detail: self.engine.intend(action, key, detail))
            else:
                live = FencedExecutor(live)
            from opsctl.automation.engine_factory import incident_store

            self.incidents = incident_store(cfg, state=store, term=self.term if self.elector is not None else None,
                                            clock=clock)
        else:
            from opsctl.automation.engine_factory import incident_store

            self.deliveries = DeliveryLog(path, clock=clock)
            live = FencedExecutor(live)  # one replica: no term, but operation ids chosen before the write
            self.incidents = incident_store(cfg, clock=clock)  # a file per incident under the state dir
        self.queue = WorkQueue(settings.queue_size, settings.workers, self.process)
        self._waiting = 0  # deliveries waiting for a retry, as the last sweep counted them
        self._handed: set[str] = set()  # owed hand-backs written since that count (counted until the next)
        # Workers between a delivery-log write (finish, hand back) and its counter: the gauge never
        # publishes a count read after the write before the counter shows it (issue 22).
        self._settling: set[int] = set()
        self._settled = threading.Condition()
        # Events queued or in hand here that have taken no action yet (quiet writes wait for them).
        self._hot: set[str] = set()
        self._hot_lock = threading.Lock()
        self._worker = threading.local()  # the event a worker thread is on, for _count
        self._tokens = 0
        self.metrics = ServeMetrics(lambda: self.queue.depth, settings.queue_size, leader=self.acting,
                                    waiting=self.waiting)
        if self._quiet is not None:
            self._quiet.watch(self.metrics)
        from opsctl.automation.action_log import ActionLog
        from opsctl.automation.engine_factory import build_engine

        self.actions = ActionLog(path)  # the record of actions (an audit, beside the delivery log)
        self.engine = build_engine(cfg, self.incidents, live, clock=clock, on_action=self._count,  # as drills build it
                                   actions=self.actions, lock_dir=None if self.shared else path.parent / "locks")
        self._accept_lock = threading.Lock()
        self._owed: dict[str, tuple[float, dict[str, Any], bool]] = {}  # events to hand back once the API server answers
        self._owed_lock = threading.Lock()
        self._stop = threading.Event()
        self._sweep_now = threading.Event()
        self._maintenance = threading.Thread(target=self._maintain, name="opsctl-maintenance", daemon=True)
        self.started = False

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        try:
            released = self.deliveries.recover()
        except OpsctlError as exc:  # the shared state is unreachable: start, not Ready until it is back
            log.warning("start-up: cannot read the shared state yet: %s", str(exc).splitlines()[0][:300])
            released = 0
        if released:
            log.warning("start-up: released %d events a previous process on this host held", released)
        self.queue.start()
        self._maintenance.start()
        if self.elector is not None:
            self.elector.start()
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
        if self._quiet is not None:  # what was answered and held back is written before the Lease goes
            self._quiet.stop(timeout)
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
        """Whether this replica acts: always when it is the only one, else while it leads."""
        return self.elector is None or self.elector.is_leader

    def waiting(self) -> int:
        """Deliveries waiting for a retry (a try could not act), as the maintenance thread last
        counted them, plus those whose hand-back to the delivery log is still owed; 0 on a follower
        (the leader retries them). Never reads the store: /metrics answers at once."""
        if not self.acting():
            return 0
        with self._settled:
            return self._waiting + len(self._owed) + len(self._handed)

    @contextlib.contextmanager
    def _settle(self) -> Iterator[None]:
        """A delivery-log write and the counter that tells of it, seen as one by the waiting gauge."""
        with self._settled:
            self._tokens += 1
            token = self._tokens
            self._settling.add(token)
        try:
            yield
        finally:
            with self._settled:
                self._settling.discard(token)
                self._settled.notify_all()

    def _publish_waiting(self, counted: int, mark: int) -> None:
        """Publish the sweep's count, read after token `mark` was handed out. Never waits: while a
        write+counter begun before the read is in flight, the gauge does not drop this round (the
        next sweep publishes it), so it never reaches a value before the counter that explains it."""
        with self._settled:
            if counted >= self._waiting or not any(t <= mark for t in self._settling):
                self._waiting = counted
                self._handed.clear()

    def _leadership(self, leader: bool) -> None:
        if not leader:
            return
        # The previous leader stopped acting before its Lease could expire: what it held is ours now.
        try:
            released = self.deliveries.recover(all_others=True)
            self.engine.fence()  # the open incident under this term: the previous leader's writes are refused
        except OpsctlError as exc:
            log.warning("new leader: could not take over what the previous leader held: %s", exc)
            return
        if released:
            log.warning("new leader: took over %d events the previous leader held", released)
        self._sweep_now.set()

    def ready(self) -> tuple[bool, str]:
        if not self.started or self._stop.is_set():
            return False, "not started"
        if not self._maintenance.is_alive():
            return False, "maintenance thread stopped"
        try:
            self.deliveries.check()
        except (sqlite3.Error, OpsctlError) as exc:
            return False, f"state unavailable: {str(exc).splitlines()[0][:200]}"
        if self.queue.room() <= 0:
            return False, "queue full"
        if self.elector is not None:
            role = "leader" if self.elector.is_leader else f"follower (leader: {self.elector.holder or 'none'})"
            if not self.elector.is_leader and self.cfg.automation.leader_election.ready_only_when_leader:
                return False, role
            return True, f"ready, {role}"
        return True, "ready"

    # -- acting -------------------------------------------------------------------------------

    def process(self, key: str) -> None:
        """Worker: act on one event if this replica acts and this worker wins the claim."""
        with self._hot_lock:
            self._hot.add(key)
        self._worker.key = key
        try:
            self._process(key)
        finally:
            self._worker.key = None
            if self.shared:
                self._cool([key])
                self._shared_log.nudge()  # quiet writes held back behind this event look again
                self._nudge_quiet()

    def _process(self, key: str) -> None:
        if not self.acting():
            if self.shared:  # admitted claimed while this replica led: hand it to whoever leads now
                self._release([NewEvent(key, "", "", {})])
            return  # it stays pending in the shared record; the leader takes it
        claimed = self.deliveries.claim(key)
        if claimed is None:
            return
        try:
            taken = self._handle(key, claimed)
        except FencedError as exc:  # not leading (any more): whoever leads next takes the event up
            log.warning("event %s: fenced: %s", key[:12], str(exc).splitlines()[0][:300])
            with self._settle():
                self._give_back(key, FENCED_RETRY, {"fenced": True}, count=False)
                self.metrics.events.labels("fenced").inc()
            return
        except Exception as exc:  # ActionFailed, or a bug: retried with capped backoff
            if not isinstance(exc, (ActionFailed, OpsctlError)):
                log.exception("event %s: unexpected error", key[:12])
            detail = {"error": f"{type(exc).__name__}: {exc}"[:500], "attempts": claimed.attempts}
            with self._settle():
                # Local and team mode alike, no attempt counter (issue 36 item 3): a delivery that
                # could not act is retried with capped backoff until it acts, its incident closes
                # (its alert resolved: a firing copy after the resolve is late and ends as done), or
                # on-call takes the incident over (the engine then only notes, and the event ends).
                delay = min(RETRY_CAP, 2.0 ** min(claimed.attempts, 8))
                self._give_back(key, delay, detail)
                self.metrics.events.labels("retried").inc()
            return
        with self._settle():
            self.deliveries.finish(key, {"actions": [[t.policy, t.action, t.outcome.status] for t in taken]})
            self.metrics.events.labels("done").inc()

    def _handle(self, key: str, claimed: ClaimedEvent) -> list[Taken]:
        """Act on a claimed event (a worker and the restore sweep take a response's lock in the engine)."""
        if claimed.source == "alertmanager":
            return self.engine.handle_alert(AlertEvent.from_payload(key, claimed.payload, claimed.received_at))
        return self.engine.handle_pagerduty(key, claimed.payload, claimed.received_at)

    def _give_back(self, key: str, delay: float, detail: dict[str, Any], *, count: bool = True) -> None:
        """Hand an event that could not act back to the delivery log (pending again after `delay`),
        owner-checked, so nothing a successor took is touched. When the API server cannot be
        reached even for that, the maintenance thread keeps trying every round, so the event waits
        for the outage, never for its 300 s claim lease."""
        try:
            self.deliveries.retry_later(key, delay, detail, count=count)
        except OpsctlError as exc:
            log.warning("event %s: could not hand it back yet (retried): %s", key[:12], str(exc).splitlines()[0][:200])
            with self._owed_lock:
                self._owed[key] = (delay, detail, count)

    def _settle_owed(self) -> None:
        with self._owed_lock:
            owed = dict(self._owed)
        for key, (delay, detail, count) in owed.items():
            try:
                self.deliveries.retry_later(key, delay, detail, count=count)
            except OpsctlError:
                return  # still away: next round
            with self._settled:  # pending again in the log: counted there from the next sweep on
                self._handed.add(key)
                with self._owed_lock:
                    self._owed.pop(key, None)

    def _count(self, taken: Taken) -> None:
        self.metrics.action(taken.policy, taken.action, taken.outcome.status, taken.seconds)
        key = getattr(self._worker, "key", None)
        if key is not None and self.shared:  # its first action is taken: quiet writes need not wait for the rest
            self._cool([key])
            self._shared_log.nudge()
            self._nudge_quiet()

    def _maintain(self) -> None:
        last_sweep = last_prune = 0.0
        while not self._stop.wait(0.25):
            if self._owed:
                self._settle_owed()
            if not self.acting():
                continue
            try:
                self.engine.run_due_restores()
                now = time.monotonic()
                if now - last_sweep >= 1.0 or self._sweep_now.is_set():
                    self._sweep_now.clear()
                    last_sweep = now
                    room = self.queue.room()
                    mark = self._tokens  # writes begun from here on are not in this sweep's read
                    swept = False
                    if room > 0:
                        # Shared: other replicas record deliveries without queueing them, so take them at once.
                        due = self.deliveries.due(older_than=0 if self.shared else SWEEP_GRACE, limit=room)
                        swept = True
                        for partition_key in due:
                            self.queue.offer([(partition_key[1], partition_key[0])])
                    # The waiting gauge: from the sweep's own read in team mode, one COUNT locally.
                    self._publish_waiting(self.deliveries.waiting(swept=swept), mark)
                if now - last_prune >= 3600:
                    last_prune = now
                    self.deliveries.prune(RETENTION)
            except OpsctlError as exc:  # the shared state is unreachable: /readyz says so; retried next round
                log.warning("maintenance round: %s", str(exc).splitlines()[0][:300])
                self._stop.wait(2.0)
            except Exception:  # keep maintaining; the error is logged and the next round retries
                log.exception("maintenance round failed")

    # -- deliveries ---------------------------------------------------------------------------

    def urgent(self, message: AlertmanagerMessage) -> bool:
        """Whether some policy matches an alert of the notification (no I/O: the server asks on
        receipt, to record it on the urgent lane, never behind alerts nothing acts on)."""
        return any(matching(self.engine.policies, alert.labels) for alert in message.alerts)

    def accept_alertmanager(self, message: AlertmanagerMessage, received_at: float) -> Answer:
        events = []
        for alert in message.alerts:
            key = alert_event_key(alert.fingerprint, alert.starts_at.canonical, alert.status)
            payload = {
                "status": alert.status, "labels": dict(alert.labels), "annotations": dict(alert.annotations),
                "starts_at": alert.starts_at.canonical, "fingerprint": alert.fingerprint,
                "group_key": message.group_key, "generator_url": alert.generator_url,
            }
            # An alert no policy matches is recorded (for dedupe and the record) but never queued.
            acts = bool(matching(self.engine.policies, alert.labels))
            events.append(NewEvent(key, "alertmanager", alert.labels.get("backend") or alert.fingerprint, payload,
                                   needs_action=acts))
        return self._admit("alertmanager", events, received_at)

    def accept_pagerduty(self, event: PagerDutyEvent, webhook_id: str, received_at: float) -> Answer:
        payload = {
            "event_id": event.id, "event_type": event.event_type, "resource_type": event.resource_type,
            "occurred_at": event.occurred_at.canonical, "agent": event.agent, "data_id": event.data_id,
            "incident_key": event.incident_key, "status": event.status, "title": event.title,
        }
        # Keyed on the signed event id: a replay under a new X-Webhook-Id is the same event.
        return self._admit("pagerduty", [NewEvent(webhook_event_key(event.id), "pagerduty",
                                                  event.data_id or event.id, payload)], received_at)

    def _admit(self, source: str, events: list[NewEvent], received_at: float) -> Answer:
        if self.shared:  # every replica stamps arrivals on one clock: the API server's
            try:
                received_at = self.clock()
            except OpsctlError:
                pass
            if not any(e.needs_action for e in events):
                # Quiet: while an urgent event here has not acted, held back (bounded) and answered now.
                if events and self._quiet is not None and self._quiet.hold(events, received_at):
                    self.metrics.delivery(source, "accepted")
                    return Answer(202, {"status": "accepted", "events": len(events), "held": len(events),
                                        "queued": 0})
            else:
                with self._hot_lock:  # quiet deliveries wait from its receipt on, not from its queueing
                    self._arriving += 1
                try:
                    return self._record(source, events, received_at)
                finally:
                    with self._hot_lock:
                        self._arriving -= 1
                    self._nudge_quiet()
        return self._record(source, events, received_at)

    def _record(self, source: str, events: list[NewEvent], received_at: float) -> Answer:
        # Shared: deliveries are recorded concurrently (the delivery log group-commits them); local:
        # one at a time, as SQLite writes are.
        with (self._accept_lock if not self.shared else contextlib.nullcontext()):
            claim = False
            try:
                unseen = events
                # Shared: when the queue has room for the whole delivery, the admit's own
                # compare-and-swap is the duplicate check (no read before it), and the leader, which
                # queues what it records at once, records it claimed (the worker's claim writes nothing).
                fast = self.shared and self.queue.room() >= sum(1 for e in events if e.needs_action)
                if not fast:
                    unseen = self.deliveries.unseen(events)
                    if not unseen:
                        self.metrics.delivery(source, "duplicate")
                        return Answer(202, {"status": "duplicate", "events": len(events), "new": 0})
                room, wanted = self.queue.room(), sum(1 for e in unseen if e.needs_action)
                # A delivery larger than the whole queue is taken when the queue is idle (the sweep
                # queues what did not fit); otherwise it could never be accepted at all.
                if room < wanted and room < self.queue.capacity:
                    self.metrics.delivery(source, "queue_full")
                    return Answer(503, {"error": "queue full: retry later", "queue_capacity": self.queue.capacity})
                if self.shared:
                    claim = fast and wanted > 0 and self.acting()
                    new = self._shared_log.admit(unseen, received_at, claim=claim)
                else:
                    new = self.deliveries.admit(unseen, received_at)
                if fast and not new:
                    self.metrics.delivery(source, "duplicate")
                    return Answer(202, {"status": "duplicate", "events": len(events), "new": 0})
                idle = sum(1 for e in new if not e.needs_action)
                new = [e for e in new if e.needs_action]
            except (sqlite3.OperationalError, OpsctlError) as exc:  # locked, unreachable, or CAS gave up: retry
                log.warning("delivery log unavailable: %s", str(exc).splitlines()[0][:300])
                self.metrics.delivery(source, "unavailable")
                return Answer(503, {"error": "state unavailable: retry later"})
            if not self.acting():
                left = new  # recorded in the shared state: the leader's sweep queues it there
                new = []
            elif new and not self._offer_hot(new):
                left = [e for e in new if not self.queue.offer([(e.partition, e.key)])]
                log.warning("queue full: %d of %d events queued, the sweep queues the rest", len(new) - len(left),
                            len(new))
            else:
                left = []
            if new and left:
                self._cool([e.key for e in left])
            if claim and left:
                self._release(left)
        if idle:
            self.metrics.events.labels("no_policy").inc(idle)
        self.metrics.delivery(source, "accepted")
        return Answer(202, {"status": "accepted", "events": len(events), "new": len(new) + idle, "queued": len(new)})

    def _offer_hot(self, events: list[NewEvent]) -> bool:
        """Queue the admitted events, marked in hand until their first action (or their end)."""
        with self._hot_lock:
            self._hot.update(e.key for e in events)
        if self.queue.offer([(e.partition, e.key) for e in events]):
            return True
        self._cool([e.key for e in events])
        return False

    def _cool(self, keys: Iterable[str]) -> None:
        with self._hot_lock:
            self._hot.difference_update(keys)

    def _in_hand(self) -> bool:
        """Whether actionable events queued or in hand here have taken no action yet: the delivery
        log holds quiet writes back meanwhile (bounded). A key left over from an event the queue
        never ran does not count once the queue is empty."""
        with self._hot_lock:
            hot = bool(self._hot)
        return hot and self.queue.depth > 0

    def _urgent_here(self) -> bool:
        """Urgent work in progress here: an actionable delivery being recorded, or an actionable
        event queued or in hand that has taken no action yet (quiet_writes.QuietWrites holds
        quiet deliveries back meanwhile, bounded)."""
        with self._hot_lock:
            arriving = self._arriving > 0
        return arriving or self._in_hand()

    def _nudge_quiet(self) -> None:
        if self._quiet is not None:
            self._quiet.nudge()

    def _release(self, events: list[NewEvent]) -> None:
        """Hand back events admitted claimed that this replica will not work on (pending again at
        once, for the sweep of whoever leads); if the API server cannot be reached, the claim's
        lease (or a new leader's take-over) frees them."""
        for e in events:
            try:
                self.deliveries.release(e.key)
            except OpsctlError as exc:
                log.warning("event %s: could not hand it back: %s", e.key[:12], str(exc).splitlines()[0][:200])

    @property
    def _shared_log(self) -> "SharedDeliveryLog":
        """The delivery log in team mode (self.shared), where the calls only it has are made."""
        return cast("SharedDeliveryLog", self.deliveries)


__all__ = ["Answer", "AutomationService"]
