"""Deliveries in (`Admission`, the base of service.AutomationService): an Alertmanager notification
or a PagerDuty event becomes events recorded in the delivery log (new keys only) and queued, and
the answer the sender gets (`Answer`: 202, or 503 when the queue or the state cannot take them).
Which deliveries some policy acts on is known on receipt (no I/O); a delivery no policy matches is
recorded for dedupe and the record, never queued. Actionable events queued or in hand here that
have not taken their first action yet are "hot": quiet writes of the delivery log wait for them.
In team mode a quiet delivery that has waited HOLD_OFF while urgent work here (an actionable
delivery being recorded, or a hot event) still has not acted is answered 202 and held back,
written once that work acted or a bound passed (quiet_writes.py): under a slow API server the
trigger's path pays for its own calls only.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, cast

from opsctl.automation.delivery_protocol import Deliveries
from opsctl.automation.idempotency import NewEvent, alert_event_key, webhook_event_key
from opsctl.automation.metrics import ServeMetrics
from opsctl.automation.payloads import AlertmanagerMessage, PagerDutyEvent
from opsctl.automation.policy import matching
from opsctl.automation.queue import WorkQueue
from opsctl.errors import OpsctlError

if TYPE_CHECKING:
    from opsctl.automation.delivery_store import SharedDeliveryLog
    from opsctl.automation.policy_engine import PolicyEngine
    from opsctl.automation.quiet_writes import QuietWrites

log = logging.getLogger("opsctl.automation")


@dataclass(frozen=True)
class Answer:
    status: int
    body: dict[str, Any]


class Admission:
    """What AutomationService receives deliveries with; its __init__ sets these."""

    engine: "PolicyEngine"
    shared: bool
    clock: Callable[[], float]
    queue: WorkQueue
    deliveries: Deliveries
    metrics: ServeMetrics
    _accept_lock: threading.Lock
    _hot: set[str]
    _hot_lock: threading.Lock
    _arriving: int  # actionable deliveries being recorded here, until their events are queued (team mode)
    _quiet: "QuietWrites | None"  # team mode: quiet deliveries held back while urgent work acts

    if TYPE_CHECKING:
        def acting(self) -> bool: ...  # AutomationService's: whether this replica acts

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


__all__ = ["Admission", "Answer"]
