"""What an incident's one page is titled now. PagerDuty titles an incident with its first alert's
summary and keeps it: a later trigger on the same dedup key joins the incident as a deduplicated
event and changes neither its title nor its urgency. So the title follows the incident's state
here, from one place, and the pager sets it on the open incident (`PageEvent.title`; PagerDuty:
REST API v2 `PUT /incidents/{id}`, decisions/0252)."""

from __future__ import annotations

from typing import Sequence

TITLE_LIMIT = 1024  # PagerDuty's summary limit; the title is kept to the same


def incident_title(summary: str, backends: Sequence[str], causes: Sequence[str]) -> str:
    """The latest page's `summary` as is while the incident concerns one backend and one cause;
    once a second backend or a second cause has joined, led by all of them (first seen first), so
    on-call reads what the incident is now: `internal and databricks degraded (timeouts, latency):
    <latest summary>`. The service-wide SLOs' backend `all` is not a backend."""
    from opsctl.slo.conventions import cause_text

    named = list(dict.fromkeys(b for b in backends if b and b != "all"))
    seen = list(dict.fromkeys(c for c in causes if c))
    if len(named) <= 1 and len(seen) <= 1:
        return summary[:TITLE_LIMIT]
    who = " and ".join(named) if named else "the service"
    why = ", ".join(cause_text(c) for c in seen)
    head = f"{who} degraded" + (f" ({why})" if why else "")
    return f"{head}: {summary}"[:TITLE_LIMIT]


def widened(backends: Sequence[str], causes: Sequence[str]) -> bool:
    """More than one backend or more than one cause: the first page's title no longer says it all."""
    return len({b for b in backends if b and b != "all"}) > 1 or len({c for c in causes if c}) > 1


def names_all(title: str, backends: Sequence[str], causes: Sequence[str]) -> bool:
    """Whether `title` already names every backend and cause of the incident."""
    from opsctl.slo.conventions import cause_text

    text = title.lower()
    return (all(b.lower() in text for b in backends if b and b != "all")
            and all(cause_text(c).lower() in text for c in causes if c))


URGENCY = {"critical": "high", "error": "high", "warning": "low", "info": "low"}  # PagerDuty's default mapping


__all__ = ["TITLE_LIMIT", "URGENCY", "incident_title", "names_all", "widened"]
