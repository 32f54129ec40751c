"""Leader election for `opsctl serve` on a coordination.k8s.io/v1 Lease, so one replica acts at a time.

Written here rather than taken from the kubernetes client's leaderelection module, which neither
releases the Lease on shutdown nor returns (it calls sys.exit when leadership is lost).

    acquire   the Lease is absent (created), released (no holder), or expired: its record has not
              changed for leaseDurationSeconds *as this replica observed it* (a local monotonic
              clock, so clock skew between nodes does not matter)
    renew     the holder rewrites renewTime every retry_period
    step down the holder that could not renew for renew_deadline (< lease_duration) stops acting,
              before any other replica may consider the Lease expired
    release   on SIGTERM the holder clears holderIdentity, so a successor takes over at once

Every write is a replace carrying the resourceVersion that was read: two replicas racing for the
Lease meet 409 Conflict and only one wins.

The leader's term (`term`, opsctl/fencing.py) is this replica's identity and the Lease's
`spec.leaseTransitions` as it stood right after this replica acquired it: every record the leader
writes carries it, and a write finding a newer term stored is refused, so a leader that was paused
cannot overwrite what its successor wrote. `term` is None whenever `is_leader` is False.

A slow API server (issue 22: every call 5 s) must not make a healthy leader stand down. So:

  - a renewal is one write carrying the resourceVersion of this replica's own last write (no read
    first); only a 409 (somebody else wrote the Lease) costs a read and a normal round;
  - the leader's time is measured from when its last successful write was *sent* (the server
    applied it later, and a follower measures expiry from when it *received* the changed record,
    later still), so the margin never depends on how long an answer took;
  - each call's deadline is what is left before the leader must step down, and a round that took
    longer than retry_period is followed at once by the next.

Renewals back to back leave at most 2 x latency between two confirmed sends, so the leader keeps
its Lease while the API's latency stays under renew_deadline / 2 (the default 15 s: 7.5 s).

What made a leader lose its Lease every 10-12 s at 5 s a call (measured, issue 22), and the answers:

  - `on_change` ran on the renewal thread: a new leader's recovery of what its predecessor held
    (several state reads and writes, 5 s each) kept it from renewing, so it stood down, re-acquired
    and recovered again, for ever. Callbacks now run in order on a thread of their own (`start()`).
  - a write's deadline was what was left before the step-down point, so after a 409 (renewal 409,
    read, write: 15 s at 5 s a call) the write had 0.5 s and was sure to time out, while the server
    applied it, so the next renewal met 409 too. A write's deadline is now renew_deadline from its own
    send: an answer that arrives late still counts from the send, and `is_leader` stops the leader at
    the step-down point meanwhile, whatever is in flight.
  - urllib3 sent a timed-out renewal once more under the same timeout (the client's `retries`), so
    a call took twice its deadline and the copy met 409. The Lease has its own client (its own
    connection pool, never queued behind the state writers) that never re-sends.
  - a renewal whose answer was lost was applied: the read after the 409 finds this replica's own
    renewTime and term, and the leader counts from that write's send instead of standing down.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Callable

from opsctl.errors import ConflictError, OpsctlError
from opsctl.fencing import Term

if TYPE_CHECKING:
    from opsctl.traffic.kube import Kube

log = logging.getLogger("opsctl.automation")


def _micro(moment: datetime) -> str:
    """A MicroTime as the API server writes it: RFC 3339 with microseconds."""
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaseElector:
    def __init__(self, kube: "Kube", *, name: str, namespace: str, identity: str, lease_duration: float,
                 renew_deadline: float, retry_period: float, on_change: Callable[[bool], None] | None = None,
                 monotonic: Callable[[], float] = time.monotonic):
        if not 0 < retry_period < renew_deadline < lease_duration:
            raise ValueError("need 0 < retry_period < renew_deadline < lease_duration")
        self.kube = kube
        self.name, self.namespace, self.identity = name, namespace, identity
        self.lease_duration, self.renew_deadline, self.retry_period = lease_duration, renew_deadline, retry_period
        self.on_change = on_change
        self.monotonic = monotonic
        self._renewed_at: float | None = None  # monotonic time of our last successful acquire/renew
        self._observed: tuple[str, str, str | None] | None = None  # (holder, renewTime, resourceVersion) last read
        self._observed_at = 0.0
        self._leader = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.holder: str | None = None  # who holds the Lease, as last read
        self._epoch: int | None = None  # leaseTransitions right after this replica acquired the Lease
        self._written: tuple[str, datetime] | None = None  # (resourceVersion, acquireTime) of this replica's last Lease write
        self.call_deadline = renew_deadline / 2  # a follower's call (read, take over), transient retries included
        self.rounds = {"renew": 0, "read": 0}  # single-write renewals and read rounds (for tests)
        self.write_deadline = renew_deadline  # a write counts from its send: worth waiting for until then
        self._sent: dict[str, float] = {}  # renewTime -> monotonic send time of this replica's recent writes
        self._changes: queue.Queue[bool | None] | None = None  # on_change calls, off the renewal thread while it runs
        self._notifier: threading.Thread | None = None

    # -- state --------------------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        """True while this replica holds the Lease and renewed it within renew_deadline."""
        with self._lock:
            return (self._leader and self._renewed_at is not None
                    and self.monotonic() - self._renewed_at < self.renew_deadline)

    @property
    def term(self) -> Term | None:
        """This replica's term while it leads (holder@leaseTransitions at acquisition), else None."""
        with self._lock:
            leading = (self._leader and self._renewed_at is not None and self._epoch is not None
                       and self.monotonic() - self._renewed_at < self.renew_deadline)
            return Term(holder=self.identity, epoch=self._epoch) if leading and self._epoch is not None else None

    def _set_leader(self, leader: bool) -> None:
        with self._lock:
            changed = leader != self._leader
            self._leader = leader
            if not leader:
                self._renewed_at = None
                self._epoch = None
                self._written = None
        if changed:
            log.info("leader election: %s %s Lease %s/%s", self.identity, "acquired" if leader else "lost",
                     self.namespace, self.name)
            if self.on_change:
                changes = self._changes
                if changes is not None:
                    changes.put(leader)  # the renewal loop never waits on what a change sets off
                else:
                    self.on_change(leader)

    def _notify(self) -> None:
        changes = self._changes
        assert changes is not None
        while True:
            leader = changes.get()
            if leader is None:
                return
            try:
                if self.on_change:
                    self.on_change(leader)
            except Exception:  # a callback's failure must not stop the next ones
                log.exception("leader election: on_change failed")

    # -- one round ------------------------------------------------------------------------------

    def _api(self) -> Any:  # a kubernetes CoordinationV1Api (the client is untyped)
        from kubernetes.client import CoordinationV1Api

        return CoordinationV1Api(self.kube.client)

    def _read(self, api: Any, what: str) -> Any:
        """The Lease, or None when there is none (404)."""
        from kubernetes.client.exceptions import ApiException

        def read(**kwargs: Any) -> Any:
            try:
                return api.read_namespaced_lease(self.name, self.namespace, **kwargs)
            except ApiException as exc:
                if exc.status == 404:
                    return None
                raise

        return self.kube.call(f"read {what}", read, _deadline=self.call_deadline)

    def _spec(self, *, acquire: datetime, transitions: int) -> dict[str, Any]:
        now = datetime.now(timezone.utc)
        return {"holderIdentity": self.identity, "leaseDurationSeconds": max(1, int(round(self.lease_duration))),
                "acquireTime": _micro(acquire), "renewTime": _micro(now), "leaseTransitions": transitions}

    def _sending(self, body: dict[str, Any]) -> float:
        """The send time of a write of `body`, remembered by its renewTime (to recognise it if applied
        with its answer lost)."""
        sent = self.monotonic()
        with self._lock:
            self._sent[body["spec"]["renewTime"]] = sent
            while len(self._sent) > 8:
                self._sent.pop(next(iter(self._sent)))
        return sent

    def _own_write(self, spec: Any) -> float | None:
        """The send time of this replica's write the Lease shows, under its current term, if it is one."""
        if spec is None or (spec.holder_identity or "") != self.identity:
            return None
        with self._lock:
            if self._epoch is None or (spec.lease_transitions or 0) != self._epoch:
                return None
            renew = spec.renew_time
            key = _micro(renew) if isinstance(renew, datetime) else str(renew)
            return self._sent.get(key)

    def _renew(self, api: Any, what: str) -> bool | None:
        """The leader's renewal: one write carrying the resourceVersion of its own last write.
        True when renewed, None when it must fall back to a read (somebody else wrote the Lease)."""
        with self._lock:
            written, epoch = self._written, self._epoch
            leading = self._leader
        if not leading or written is None or epoch is None:
            return None
        version, acquire = written
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace, "resourceVersion": version},
                "spec": self._spec(acquire=acquire, transitions=epoch)}
        sent = self._sending(body)
        self.rounds["renew"] += 1
        try:
            lease = self.kube.call(f"renew {what}", api.replace_namespaced_lease, self.name, self.namespace, body,
                                   _deadline=self.write_deadline)
        except ConflictError:  # written since (a takeover, or our own write whose answer was lost)
            with self._lock:
                self._written = None
            return None
        self._wrote(lease, acquire)
        self.holder = self.identity
        self._won(sent, epoch)
        return True

    def _wrote(self, lease: Any, acquire: datetime) -> None:
        version = getattr(getattr(lease, "metadata", None), "resource_version", None)
        with self._lock:
            self._written = (version, acquire) if version else None

    def try_acquire_or_renew(self) -> bool:
        """One round: create, renew or take over the Lease. True when this replica holds it now."""
        api = self._api()
        what = f"Lease {self.namespace}/{self.name}"
        if self._renew(api, what):
            return True
        self.rounds["read"] += 1
        lease = self._read(api, what)
        now = self.monotonic()  # the record as received now: it changed at the latest by this moment
        if lease is None:
            acquire = datetime.now(timezone.utc)
            body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": self.name, "namespace": self.namespace},
                    "spec": self._spec(acquire=acquire, transitions=0)}
            sent = self._sending(body)
            try:
                created = self.kube.call(f"create {what}", api.create_namespaced_lease, self.namespace, body,
                                         _deadline=self.write_deadline)
            except ConflictError:  # another replica created it first (409 AlreadyExists)
                return False
            self._wrote(created, acquire)
            self._won(sent, 0)
            return True
        spec = lease.spec
        holder = (spec.holder_identity or "") if spec else ""
        record = (holder, str(spec.renew_time if spec else None), lease.metadata.resource_version)
        if self._observed is None or record[:2] != self._observed[:2]:
            self._observed, self._observed_at = record, now
        self.holder = holder or None
        own = self._own_write(spec)
        if own is not None:  # our own renewal, applied with its answer lost or late: it counts from its send
            with self._lock:
                if self._leader and self._renewed_at is not None and own > self._renewed_at:
                    self._renewed_at = own
        duration = (spec.lease_duration_seconds if spec and spec.lease_duration_seconds else self.lease_duration)
        mine = holder == self.identity
        if holder and not mine and now - self._observed_at < duration:
            return False  # held by a live replica
        transitions = (spec.lease_transitions or 0) if spec else 0
        epoch = transitions if mine else transitions + 1
        acquire = spec.acquire_time if mine and spec and spec.acquire_time else datetime.now(timezone.utc)
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace,
                             "resourceVersion": lease.metadata.resource_version},
                "spec": self._spec(acquire=acquire, transitions=epoch)}
        sent = self._sending(body)
        try:
            written = self.kube.call(f"{'renew' if mine else 'take over'} {what}", api.replace_namespaced_lease,
                                     self.name, self.namespace, body, _deadline=self.write_deadline)
        except ConflictError:  # somebody else wrote it since we read it
            return False
        self._wrote(written, acquire)
        self.holder = self.identity
        self._won(sent, epoch)
        return True

    def _won(self, at: float, epoch: int) -> None:
        with self._lock:
            if self._epoch is not None and self._epoch != epoch:
                # The Lease moved on while this replica believed it still led: a new term, so what
                # the old one started is the old term's (a leader resuming under it is fenced).
                self._leader = False
            self._renewed_at = at
            self._epoch = epoch
        self._set_leader(True)

    def release(self) -> bool:
        """Give the Lease up (holder cleared) if this replica holds it; True when released."""
        was = self._leader
        self._set_leader(False)
        if not was:
            return False
        api = self._api()
        what = f"Lease {self.namespace}/{self.name}"
        try:
            lease = self._read(api, what)
            if lease is None or (lease.spec.holder_identity or "") != self.identity:
                return False
            body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": self.name, "namespace": self.namespace,
                                 "resourceVersion": lease.metadata.resource_version},
                    "spec": {"holderIdentity": None, "leaseDurationSeconds": 1,
                             "acquireTime": None, "renewTime": _micro(datetime.now(timezone.utc)),
                             "leaseTransitions": lease.spec.lease_transitions or 0}}
            self.kube.call(f"release {what}", api.replace_namespaced_lease, self.name, self.namespace, body,
                           _deadline=self.call_deadline)
        except OpsctlError as exc:  # it expires on its own within the lease duration
            log.warning("leader election: could not release %s: %s", what, exc)
            return False
        log.info("leader election: %s released Lease %s/%s", self.identity, self.namespace, self.name)
        return True

    # -- the loop -----------------------------------------------------------------------------

    def start(self) -> None:
        if self.on_change is not None:
            self._changes = queue.Queue()
            self._notifier = threading.Thread(target=self._notify, name="opsctl-leader-changes", daemon=True)
            self._notifier.start()
        self._thread = threading.Thread(target=self._run, name="opsctl-leader-election", daemon=True)
        self._thread.start()

    def stop(self, *, release: bool = True, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None and self._thread.is_alive():
            self._thread.join(timeout)
        changes, notifier = self._changes, self._notifier
        if changes is not None and notifier is not None:  # the changes so far, then the last ones here
            changes.put(None)
            notifier.join(timeout)
            self._changes = self._notifier = None
        if release:
            self.release()
        else:
            self._set_leader(False)

    def _run(self) -> None:
        while not self._stop.is_set():
            started = self.monotonic()
            try:
                held = self.try_acquire_or_renew()
            except OpsctlError as exc:
                log.warning("leader election: %s", exc)
                held = False
            except Exception:  # keep electing; the next round retries
                log.exception("leader election round failed")
                held = False
            if not held and self._leader:
                # Not renewed this round: still leader until renew_deadline passes since the last renewal.
                with self._lock:
                    stale = self._renewed_at is None or self.monotonic() - self._renewed_at >= self.renew_deadline
                if stale or (self.holder and self.holder != self.identity):
                    self._set_leader(False)
            # retry_period from this round's start: a round slowed by the API server is followed at once.
            self._stop.wait(max(0.0, self.retry_period - (self.monotonic() - started)))
