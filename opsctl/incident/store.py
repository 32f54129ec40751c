"""The incident store: `IncidentStore`, what the automation asks of it, and `StateIncidentStore`,
its one implementation on a state store (`opsctl.state`): the file store under the state dir in
local mode and drills (file.py), one ConfigMap per incident in team mode (kubernetes.py).

Documents: `incident-<instant>-<hex>` per incident (the `Incident` record), and `incidents`, the
service's index (`open`: the open incident's id, `recent`: the last ids, `resolved`: the alerts
known resolved that no open incident holds, so a late firing copy of one opens nothing). Every write is
compare-and-swap on the version read and fenced by the writer's term (`opsctl.fencing`): a write
under a term older than the one stored on the document is refused (`FencedError`, exit 5). A write
whose answer was lost is recognised by its write id (the kubernetes state store). Opening is
serialised by the index: an incident's document is written first, then the index is pointed at
it; a replica that loses that race marks its own document closed ("merged") and joins the winner,
so at most one incident of a service is open.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Protocol, Sequence, TypeVar

from opsctl.errors import ConflictError, NoDataError
from opsctl.incident.grouping import DEFAULT_QUIET, document_name, incident_id, joins, may_close, resolved_state
from opsctl.incident.record import Incident, IncidentAlert, IncidentPage, IncidentTakeover

if TYPE_CHECKING:
    from opsctl.fencing import Term
    from opsctl.state.base import Document, StateStore

INDEX = "incidents"
RECENT = 50  # ids the index remembers
RESOLVED = 500  # resolved alerts (fingerprint@startsAt) the index remembers beyond an open incident
ATTEMPTS = 8  # compare-and-swap rounds before a write gives up (ConflictError, retried by the caller)


@dataclass(frozen=True)
class Joined:
    """An alert taken into its incident: the incident as written, and what the alert added."""

    incident: Incident
    opened: bool  # the alert opened it
    new_alert: bool  # the alert (fingerprint, startsAt, status) was not in it yet
    new_cause: str | None = None
    new_backend: str | None = None
    reopened: bool = False


@dataclass(frozen=True)
class Taken:
    """A notification's alerts taken into their incident: each alert's `Joined` (None: nothing to
    do, a resolve no open incident holds or a late firing copy) and whether anything was written."""

    joined: tuple[Joined | None, ...]
    wrote: bool


# Changes the incident in the same write as the alerts (the responses taking them in); None: no change.
Then = Callable[[Incident, list[Joined | None]], Incident | None]


class IncidentStore(Protocol):
    where: str
    service: str
    quiet: float  # seconds: the correlation window

    def now(self) -> float: ...
    def get(self, ident: str) -> Incident | None: ...
    def open_incident(self) -> Incident | None: ...
    def incidents(self, *, open_only: bool = False) -> list[Incident]: ...
    def take_alert(self, alert: IncidentAlert, *, page_key: str = "") -> Joined | None: ...
    def take_alerts(self, alerts: Sequence[IncidentAlert], *, page_key: str = "",
                    then: Then | None = None) -> Taken: ...
    def change(self, ident: str, change: Callable[[Incident], Incident | None]) -> Incident: ...
    def close_due(self) -> list[Incident]: ...
    def take_over(self, ident: str, *, by: str, reason: str = "") -> Incident: ...
    def fence_open(self) -> Incident | None: ...
    def check(self) -> None: ...


class StateIncidentStore:
    """Incidents of one service on a state store, fenced by `term` (None: one writer, unfenced)."""

    def __init__(self, state: "StateStore", *, service: str, quiet: float = DEFAULT_QUIET,
                 term: "Callable[[], Term | None] | None" = None, clock: Callable[[], float] | None = None):
        self.state = state
        self.service = service
        self.quiet = float(quiet)
        self.term = term
        self.clock = clock or state.now
        self.where = f"incidents of {service} in {state.where}"

    def now(self) -> float:
        return self.clock()

    # -- reading -----------------------------------------------------------------------------

    def _doc(self, ident: str) -> tuple[Incident | None, "Document | None"]:
        doc = self.state.get(document_name(ident, self.service))
        if doc is None:
            return None, None
        return Incident.from_data(doc.data, f"{self.state.where}: {doc.name}"), doc

    def get(self, ident: str) -> Incident | None:
        return self._doc(ident)[0]

    def _index(self) -> "Document | None":
        doc = self.state.get(INDEX)
        if doc is not None and not isinstance(doc.data.get("recent", []), list):
            raise NoDataError(f"{self.state.where}: {INDEX}: 'recent' is not a list", hint="repair or delete it")
        return doc

    def check(self) -> None:
        """Raises when the store cannot be read (readiness): one read of the index."""
        self._index()

    def open_incident(self) -> Incident | None:
        index = self._index()
        ident = index.data.get("open") if index else None
        incident = self.get(ident) if isinstance(ident, str) and ident else None
        return incident if incident is not None and incident.is_open else None

    def incidents(self, *, open_only: bool = False) -> list[Incident]:
        index = self._index()
        ids = list(index.data.get("recent", [])) if index else []
        found = [i for i in (self.get(str(x)) for x in ids) if i is not None]
        return [i for i in found if i.is_open] if open_only else found

    # -- writing -----------------------------------------------------------------------------

    def _fenced(self, stored: str | None, what: str) -> str | None:
        from opsctl.fencing import FencedError, fence

        if self.term is None:  # one writer (local mode, a drill) or a person: only compare-and-swapped
            return fence(None, stored, what)
        term = self.term()
        if term is None:  # a replica of several that does not lead (any more) writes nothing
            raise FencedError(f"{what}: this replica no longer leads; it does not write")
        return fence(term, stored, what)

    def _put(self, incident: Incident, doc: "Document | None") -> Incident:
        name = document_name(incident.id, self.service)
        kept = self._fenced(doc.data.get("term") if doc else None, f"incident {incident.id}")
        incident = incident.changed(term=kept)
        self.state.put(name, incident.to_data(), version=doc.version if doc else None)
        return incident

    def change(self, ident: str, change: Callable[[Incident], Incident | None]) -> Incident:
        def attempt() -> Incident:
            incident, doc = self._doc(ident)
            if incident is None:
                raise NoDataError(f"incident {ident}: not in {self.state.where}")
            new = change(incident)
            if new is None or new == incident:
                return incident
            return self._put(new, doc)

        return _retried(attempt, f"incident {ident}", "another replica keeps changing it; the event is retried")

    def _point(self, index: "Document | None", ident: str | None, *, add: str | None = None,
               resolved: tuple[str, ...] = ()) -> None:
        data: dict[str, Any] = dict(index.data) if index else {"version": 1, "recent": []}
        data["term"] = self._fenced(data.get("term"), INDEX)
        data["open"] = ident
        if add is not None:
            data["recent"] = [x for x in data.get("recent", []) if x != add][-(RECENT - 1):] + [add]
        if resolved:
            known = [x for x in data.get("resolved", []) if x not in resolved]
            data["resolved"] = (known + list(resolved))[-RESOLVED:]
        self.state.put(INDEX, data, version=index.version if index else None)

    def take_alert(self, alert: IncidentAlert, *, page_key: str = "") -> Joined | None:
        """A firing alert joins the open incident, or opens one (its page's dedup key `page_key`,
        not sent yet); a resolved one updates the open incident that holds it (None: no open
        incident holds it, nothing to do)."""
        return self.take_alerts([alert], page_key=page_key).joined[0]

    def take_alerts(self, alerts: Sequence[IncidentAlert], *, page_key: str = "",
                    then: "Then | None" = None) -> Taken:
        """Every alert of a notification taken as `take_alert` takes one, in order, and written
        together: one compare-and-swap write of the incident (and of the index when it opens or a
        resolve no open incident holds is remembered). `then(incident, joined)` changes the incident
        in the same write (the policies' responses taking the alerts in). A copy that changes nothing
        writes nothing (`Taken.wrote` False)."""
        return _retried(lambda: self._take(list(alerts), page_key, then), self.where,
                        "another replica keeps changing them; the event is retried")

    def _take(self, alerts: list[IncidentAlert], page_key: str, then: "Then | None") -> Taken:
        now = self.now()
        index = self._index()
        raw_open = index.data.get("open") if index else None
        open_id = raw_open if isinstance(raw_open, str) and raw_open else None
        current, doc = self._doc(open_id) if open_id else (None, None)
        stored = current  # as read (None: nothing to replace at `doc`)
        known = index.data.get("resolved", []) if index else []
        resolved_before = set(known) if isinstance(known, list) else set()
        remember: list[str] = []  # resolves no open incident holds: the index remembers them
        closing: Incident | None = None  # the open incident, resolved and quiet past the window
        closing_doc: "Document | None" = None
        opened: str | None = None  # the id this batch opened (or found another replica had created)
        fresh_doc = False  # `current` is a new document (a create)
        joined: list[Joined | None] = []
        for alert in alerts:
            ref = f"{alert.fingerprint}@{alert.starts_at}"
            if alert.status != "firing":
                held = current.alert(alert.fingerprint, alert.starts_at) if current is not None else None
                if current is None or not current.is_open or held is None:
                    if ref not in resolved_before:  # remembered: a late firing copy opens nothing
                        remember.append(ref)
                        resolved_before.add(ref)
                    joined.append(None)
                    continue
                new = current.with_alert(alert, now)
                if not new.firing() and new.state in ("open", "mitigated"):
                    new = new.changed(state=resolved_state(new))
                if new == current:
                    joined.append(Joined(current, opened=False, new_alert=False))
                    continue
                current = new
                joined.append(Joined(new, opened=False, new_alert=held.status != alert.status))
                continue
            if ref in resolved_before:
                joined.append(None)  # resolved is final for one startsAt: a late firing copy
                continue
            if current is not None and (opened is not None or joins(current, now, self.quiet)):
                held = current.alert(alert.fingerprint, alert.starts_at)
                if held is not None and held.status == "resolved":  # resolved is final for one startsAt
                    joined.append(Joined(current, opened=False, new_alert=False))
                    continue
                new = current.with_alert(alert, now)
                reopened = current.state in ("resolved", "restoring") and (held is None or held.status != "firing")
                if reopened:
                    new = new.changed(state="open")
                if new == current:
                    joined.append(Joined(current, opened=False, new_alert=False))
                    continue
                joined.append(Joined(new, opened=False, new_alert=held is None or held.status != "firing",
                                     new_cause=alert.cause if alert.cause and alert.cause not in current.causes else None,
                                     new_backend=(alert.backend if alert.backend and alert.backend not in current.backends
                                                  else None), reopened=reopened))
                current = new
                continue
            if current is not None and current.is_open:  # resolved and quiet past the window: it closes first
                closing, closing_doc = current.changed(state="closed", closed_at=now), doc
            ident = incident_id(self.service, now, alert.fingerprint, alert.starts_at)
            existing, existing_doc = self._doc(ident)
            if existing is None:
                page = IncidentPage(dedup_key=page_key) if page_key else None
                current = Incident(id=ident, service=self.service, opened_at=now, last_alert_at=now,
                                   page=page).with_alert(alert, now)
                fresh_doc, stored, doc = True, None, None
            else:  # another replica created it (the same alert at the same instant): joined, the
                # index pointed at it if that replica has not yet
                current, stored, doc, fresh_doc = existing, existing, existing_doc, False
                opened = ident
                held = existing.alert(alert.fingerprint, alert.starts_at)
                if held == alert:
                    joined.append(Joined(current, opened=False, new_alert=False))
                    continue
                current = existing.with_alert(alert, now)
                joined.append(Joined(current, opened=False, new_alert=True,
                                     new_cause=alert.cause if alert.cause and alert.cause not in existing.causes else None,
                                     new_backend=(alert.backend if alert.backend and alert.backend not in existing.backends
                                                  else None)))
                continue
            opened = ident
            joined.append(Joined(current, opened=True, new_alert=True, new_cause=alert.cause or None,
                                 new_backend=alert.backend or None))
        if then is not None and current is not None:
            changed = then(current, joined)
            if changed is not None:
                current = changed
        wrote = False
        if closing is not None:
            self._put(closing, closing_doc)
            wrote = True
        written = current
        if current is not None and (fresh_doc or current != stored):
            written = self._put(current, None if fresh_doc else doc)  # a create: 409 when another replica made it
            wrote = True
        if opened is not None or remember:
            try:
                self._point(index, opened or open_id, add=opened, resolved=tuple(remember))
            except ConflictError:
                # Another replica opened one meanwhile: this one never existed for anyone else,
                # unless the other found this very document and pointed the index at it first.
                now_open = (self._index() or index)
                if opened is not None and fresh_doc and (now_open is None or now_open.data.get("open") != opened):
                    self.change(opened, lambda i: i.changed(state="closed", closed_at=now,
                                                            extra={**i.extra, "merged": True}))
                raise
            wrote = True
        if written is not None:
            joined = [dataclasses.replace(j, incident=written) if j is not None else None for j in joined]
        return Taken(tuple(joined), wrote)

    def close_due(self) -> list[Incident]:
        """Close the open incident whose alerts all resolved, traffic restored, window passed."""
        now = self.now()
        closed: list[Incident] = []
        current = self.open_incident()
        if current is not None and may_close(current, now, self.quiet):
            done = self.change(current.id, lambda i: i.changed(state="closed", closed_at=now)
                               if may_close(i, now, self.quiet) else None)
            if not done.is_open:
                index = self._index()
                if index is not None and index.data.get("open") == done.id:
                    try:  # its resolved alerts remembered: a late firing copy of one opens nothing
                        self._point(index, None, resolved=tuple(f"{a.fingerprint}@{a.starts_at}" for a in done.alerts
                                                                if a.status == "resolved"))
                    except ConflictError:
                        pass  # someone opened another meanwhile: it stays
                closed.append(done)
        return closed

    def fence_open(self) -> Incident | None:
        """A new leader's first write: the open incident and the index rewritten under its term, so
        a paused predecessor's next write to either is refused (FencedError) before it acts."""
        def attempt() -> Incident | None:
            index = self._index()
            ident = index.data.get("open") if index else None
            incident, doc = self._doc(ident) if isinstance(ident, str) and ident else (None, None)
            if index is not None:
                self._point(index, ident if isinstance(ident, str) else None)
            if incident is None or not incident.is_open:
                return None
            return self._put(incident, doc)

        return _retried(attempt, self.where, "another replica keeps changing them; retried at the next election")

    def take_over(self, ident: str, *, by: str, reason: str = "") -> Incident:
        """On-call takes the incident over: the automation stops acting on it (notes only). A
        person's write: compare-and-swapped, never fenced, never erasing the leader's term."""
        now = self.now()
        return self.change(ident, lambda i: None if i.takeover else i.changed(
            takeover=IncidentTakeover(by=by, at=now, reason=reason)))


__all__ = ["INDEX", "IncidentStore", "Joined", "StateIncidentStore", "Taken", "Then"]


_T = TypeVar("_T")


def _retried(attempt: Callable[[], _T], where: str, hint: str) -> _T:
    """`attempt` again after a compare-and-swap conflict, at most ATTEMPTS times; a fenced write
    (a newer leader's term) is never retried."""
    from opsctl.fencing import FencedError

    last: ConflictError | None = None
    for _ in range(ATTEMPTS):
        try:
            return attempt()
        except FencedError:
            raise
        except ConflictError as exc:
            last = exc
    raise ConflictError(f"{where}: every write met a concurrent one ({last.message if last else ''})", hint=hint)
