"""Which incident an alert joins, and the names every replica derives from it alike.

Grouping (docs/decisions/0200-incident-record.md): at most one open incident per service. A firing
alert of the service joins the open incident whatever its class (availability, latency, auth,
capacity, quality, absent); its backend joins the incident's backends. An incident closes when every
alert in it resolved, the traffic it moved is restored (or it moved none), and the correlation
window (`automation.incident.quiet`, 15 minutes by default) passed with no new firing alert; an
alert that starts inside the window joins it again (reopens it when it was resolved).

Names: the incident's id from its opening alert (`incident_id`), the PagerDuty dedup key from the
paging route's group key as Alertmanager's PagerDuty notifier derives it (`dedup_key`: sha256 of the
group key, hex; notify/util.go `Key.Hash`, sent as `dedup_key` by notify/pagerduty/pagerduty.go),
the group key Alertmanager gives a service's group on a route grouped by `service`
(`service_group_key`: `<route key>:{service="NAME"}`, dispatch.go `aggrGroup.GroupKey`), and a
ticket's idempotency key (`ticket_key`).
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timezone

from opsctl.incident.record import Incident

DEFAULT_QUIET = 15 * 60.0  # seconds: the correlation window

# The most specific cause names the ticket's category: auth before capacity before the rest.
SPECIFICITY = ("auth", "capacity")


def incident_id(service: str, opened_at: float, fingerprint: str, starts_at: str) -> str:
    """`<service>-<UTC opening instant YYYYMMDDTHHMMSSZ>-<4 hex of fingerprint + startsAt>`."""
    stamp = datetime.fromtimestamp(opened_at, tz=timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    tail = hashlib.sha256(f"{fingerprint}\x00{starts_at}".encode()).hexdigest()[:4]
    return f"{service}-{stamp}-{tail}"


def document_name(incident: str, service: str) -> str:
    """The state document holding it (a DNS label: lowercase, the service prefix dropped, since the
    store's object names carry the service already)."""
    own = incident[len(service) + 1:] if incident.startswith(service + "-") else incident
    return f"incident-{own.lower()}"[:63].rstrip("-")


def dedup_key(group_key: str) -> str:
    """Alertmanager's PagerDuty dedup key for a notification's group key: sha256 hex."""
    return hashlib.sha256(group_key.encode()).hexdigest()


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def service_group_key(route_key: str, service: str, *, label: str = "service") -> str:
    """The group key of a service's group on a route grouped by `[label]` (its route key as
    Alertmanager writes it, e.g. `{}/{opsctl_page="true"}`)."""
    return f'{route_key}:{{{label}="{_escape(service)}"}}'


def page_key(route_key: str, service: str) -> str:
    """The incident's PagerDuty dedup key: the one Alertmanager's PagerDuty receiver sends for the
    service's group on the paging route (sha256 of `<route key>:{service="NAME"}`). The automation
    pages with it, and the embedded drill's stand-in for Alertmanager's own page does too."""
    return dedup_key(service_group_key(route_key, service))


def response_key(policy: str, target: str, fingerprint: str, starts_at: str) -> str:
    """A response's name from the alert that opened it, the same on every replica (never a counter):
    operation ids derive from it (as the per-policy episode's key did, with the same derivation)."""
    return hashlib.sha256("\x1f".join(("episode", policy, target, fingerprint, starts_at)).encode()).hexdigest()[:20]


def ticket_key(incident: str, vendor: str) -> str:
    return f"{incident}:{vendor}"  # the ticket desks take letters, digits and . _ : -


def most_specific(causes: tuple[str, ...] | list[str]) -> str | None:
    """The cause that names the ticket's category: auth, else capacity, else the first seen."""
    for cause in SPECIFICITY:
        if cause in causes:
            return cause
    return causes[0] if causes else None


def joins(incident: Incident | None, now: float, quiet: float = DEFAULT_QUIET) -> bool:
    """Whether a firing alert arriving at `now` joins `incident` (else it opens a new one)."""
    if incident is None or not incident.is_open:
        return False
    if incident.state == "resolved" and now - incident.last_alert_at >= quiet:
        return False
    return True


def may_close(incident: Incident, now: float, quiet: float = DEFAULT_QUIET) -> bool:
    """Every alert resolved, nothing left moved, and the correlation window passed."""
    return (incident.is_open and not incident.firing() and not incident.moved()
            and now - incident.last_alert_at >= quiet)


def resolved_state(incident: Incident) -> str:
    """The state an incident with no firing alert takes: restoring while its traffic is moved."""
    return "restoring" if incident.moved() else "resolved"


__all__ = ["DEFAULT_QUIET", "dedup_key", "document_name", "incident_id", "joins", "may_close", "most_specific",
           "page_key", "resolved_state", "response_key", "service_group_key", "ticket_key"]
