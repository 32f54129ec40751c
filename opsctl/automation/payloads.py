"""Webhook payloads: Alertmanager's version 4 message and PagerDuty's webhooks v3 event, validated strictly.

Every field opsctl reads is required and type-checked, and every problem is listed in the error
(the server answers 400 with them). Keys this version does not define are tolerated: a sender
upgrade that adds a field must not turn every page into a 400, which Alertmanager never retries.
The payloads are models of the typed-model engine (opsctl.model) read with its JSON wording; the
limits (sizes, counts, identifiers without control characters) are the checks their fields carry.

Alertmanager's per-alert `status` is authoritative: a group notification says "firing" while some
of its alerts have already resolved.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Annotated, Any, Literal, TypeVar

from opsctl.model import Model, build_into, field
from opsctl.model.build import JSON
from opsctl.model.checks import Count, Labels, NonEmpty, Text

ALERT_STATUSES = ("firing", "resolved")
_FINGERPRINT = re.compile(r"[0-9a-f]{1,64}")
_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?([Zz]|[+-]\d{2}:\d{2})"
)
_EVENT_TYPE = re.compile(r"[a-z][a-z_]*\.[a-z][a-z_.]*")
MAX_LABELS = 128
MAX_STRING = 8192


class PayloadError(ValueError):
    """The body is JSON but not the payload this endpoint takes; `problems` names every bad field."""

    def __init__(self, what: str, problems: list[str]):
        self.problems = problems
        super().__init__(f"not {what}: " + "; ".join(problems[:20]))


@dataclass(frozen=True)
class Timestamp:
    """An RFC 3339 instant kept to the nanosecond: `canonical` is the idempotency form (UTC, 9 digits)."""

    seconds: float
    canonical: str

    @classmethod
    def from_text(cls, value: str) -> "Timestamp":
        return parse_timestamp(value)

    @property
    def is_zero(self) -> bool:
        """Alertmanager's "no end yet" is Go's zero time, 0001-01-01T00:00:00Z."""
        return self.canonical.startswith("0001-01-01T00:00:00")


def parse_timestamp(value: str) -> Timestamp:
    m = _RFC3339.fullmatch(value)
    if not m:
        raise ValueError(f"not an RFC 3339 timestamp: {value[:60]!r}")
    year, month, day, hour, minute, second, frac, zone = m.groups()
    nanos = int((frac or "").ljust(9, "0"))
    tz = timezone.utc
    if zone not in ("Z", "z"):
        sign = 1 if zone[0] == "+" else -1
        from datetime import timedelta

        tz = timezone(sign * timedelta(hours=int(zone[1:3]), minutes=int(zone[4:6])))
    try:
        moment = datetime(int(year), int(month), int(day), int(hour), int(minute), int(second), tzinfo=tz)
        utc = moment.astimezone(timezone.utc)
    except (ValueError, OverflowError) as exc:
        raise ValueError(f"not a valid instant: {value[:60]!r} ({exc})") from None
    canonical = (f"{utc.year:04d}-{utc.month:02d}-{utc.day:02d}T{utc.hour:02d}:{utc.minute:02d}:{utc.second:02d}"
                 f".{nanos:09d}Z")
    seconds = utc.timestamp() + nanos / 1e9 if utc.year > 1 else float("-inf")
    return Timestamp(seconds, canonical)


class _RealInstant:
    def __call__(self, value: Timestamp) -> Timestamp:
        if value.is_zero:
            raise ValueError("must be a real instant, not the zero time")
        return value


class _AgentSummary:
    """PagerDuty's `agent` (who acted): its summary, else its id, at most 200 characters."""

    def __call__(self, value: Any) -> str | None:
        if value is None:
            return None
        if not isinstance(value, dict):
            raise ValueError(f"expected an object or null, got {JSON.show(value)}")
        return _short(value.get("summary")) or _short(value.get("id"))


M = TypeVar("M")


def _parse(cls: type[M], data: Any, what: str) -> M:
    problems: list[str] = []
    built = build_into(cls, data, "", problems, JSON)
    if problems:
        raise PayloadError(what, problems)
    model: M = built  # build_into builds a `cls` when it records no problem
    return model


String = Annotated[str, Text(max_len=MAX_STRING)]
Ident = Annotated[str, Text(max_len=MAX_STRING, nonempty=True, ident=True)]
OptionalIdent = Annotated[str | None, Text(max_len=MAX_STRING, ident=True)]
OptionalString = Annotated[str | None, Text(max_len=MAX_STRING)]
Status = Literal["firing", "resolved"]


# ---------------------------------------------------------------------------------------------
# Alertmanager webhook, version 4


class Alert(Model):
    unknown_keys = "ignore"

    status: Status  # firing | resolved: this alert's own status, not the group's
    labels: Annotated[Any, Labels(max_entries=MAX_LABELS, nonempty=True, idents=True)]
    annotations: Annotated[Any, Labels(max_entries=MAX_LABELS)]
    starts_at: Annotated[Timestamp, _RealInstant()] = field(metadata={"alias": "startsAt"})
    ends_at: Timestamp = field(metadata={"alias": "endsAt"})
    generator_url: String = field(metadata={"alias": "generatorURL"})
    fingerprint: Annotated[str, Text(max_len=MAX_STRING, nonempty=True, pattern=_FINGERPRINT,
                                     expected="lower-case hex")]

    @property
    def name(self) -> str:
        name: str = self.labels.get("alertname", "")  # labels are checked idents (Labels(idents=True))
        return name


class _Version:
    def __call__(self, value: Any) -> Any:
        if value is not None and value != "4":
            raise ValueError(f"expected \"4\" (Alertmanager webhook payload version 4), got {value!r:.40}")
        return value


class AlertmanagerMessage(Model):
    unknown_keys = "ignore"

    receiver: String
    status: Status
    group_key: Annotated[str, Text(max_len=MAX_STRING, nonempty=True)] = field(metadata={"alias": "groupKey"})
    group_labels: Annotated[Any, Labels(max_entries=MAX_LABELS, idents=True)] = field(metadata={"alias": "groupLabels"})
    common_labels: Annotated[Any, Labels(max_entries=MAX_LABELS, idents=True)] = field(
        metadata={"alias": "commonLabels"})
    common_annotations: Annotated[Any, Labels(max_entries=MAX_LABELS)] = field(metadata={"alias": "commonAnnotations"})
    external_url: String = field(metadata={"alias": "externalURL"})
    alerts: Annotated[tuple[Alert, ...], NonEmpty("alert")]
    version: Annotated[Any, _Version()]  # "4" (null tolerated)
    truncated_alerts: Annotated[Any, Count()] = field(default=0, metadata={"alias": "truncatedAlerts"})

    @classmethod
    def parse(cls, data: Any) -> "AlertmanagerMessage":
        return _parse(cls, data, "an Alertmanager webhook message (version 4)")


# ---------------------------------------------------------------------------------------------
# PagerDuty webhooks v3


class _PagerDutyData(Model):
    unknown_keys = "ignore"

    id: OptionalIdent = None  # the incident (or other resource) id
    incident_key: OptionalIdent = None  # the dedup key the incident was opened with
    status: OptionalString = None
    title: OptionalString = None
    html_url: OptionalString = None


class _PagerDutyEventBody(Model):
    unknown_keys = "ignore"

    id: Ident
    event_type: Annotated[str, Text(max_len=MAX_STRING, nonempty=True, pattern=_EVENT_TYPE,
                                    expected="RESOURCE.ACTION such as incident.triggered")]
    resource_type: Annotated[str, Text(max_len=MAX_STRING, nonempty=True)]
    occurred_at: Timestamp
    data: _PagerDutyData
    agent: Annotated[Any, _AgentSummary()] = None


class _PagerDutyEnvelope(Model):
    unknown_keys = "ignore"

    event: _PagerDutyEventBody


@dataclass(frozen=True)
class PagerDutyEvent:
    id: str
    event_type: str  # e.g. incident.triggered, incident.acknowledged, incident.resolved
    resource_type: str
    occurred_at: Timestamp
    agent: str | None  # summary of who acted (a user, a service), when PagerDuty says
    data_id: str | None  # the incident (or other resource) id
    incident_key: str | None  # the dedup key the incident was opened with
    status: str | None
    title: str | None
    html_url: str | None

    @classmethod
    def parse(cls, data: Any) -> "PagerDutyEvent":
        e = _parse(_PagerDutyEnvelope, data, "a PagerDuty webhooks v3 payload").event
        d = e.data
        return cls(e.id, e.event_type, e.resource_type, e.occurred_at, e.agent, d.id, d.incident_key, d.status,
                   d.title, d.html_url)


def _short(value: Any) -> str | None:
    return value[:200] if isinstance(value, str) and value else None
