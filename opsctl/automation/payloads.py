"""Webhook payloads: Alertmanager's version 4 message and PagerDuty's webhooks v3 event, validated strictly.

Every field opsctl reads is required and type-checked, and every problem is listed in the error
(the server answers 400 with them). Keys this version does not define are tolerated: a sender
upgrade that adds a field must not turn every page into a 400, which Alertmanager never retries.

Alertmanager's per-alert `status` is authoritative: a group notification says "firing" while some
of its alerts have already resolved.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Mapping

ALERT_STATUSES = ("firing", "resolved")
_FINGERPRINT = re.compile(r"[0-9a-f]{1,64}")
_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?([Zz]|[+-]\d{2}:\d{2})"
)
_EVENT_TYPE = re.compile(r"[a-z][a-z_]*\.[a-z][a-z_.]*")
MAX_LABELS = 128
MAX_STRING = 8192
# Identifiers (label values, event and incident ids) end up in ids, records and log lines: no CR, LF
# or other control character. Annotations (free text) may hold newlines.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


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


class _Fields:
    """Reads typed fields from one JSON object, collecting problems under a path prefix."""

    def __init__(self, data: Any, path: str, problems: list[str]):
        self.path = path
        self.problems = problems
        self.ok = isinstance(data, dict)
        self.data = data if self.ok else {}
        if not self.ok:
            problems.append(f"{path or 'body'}: expected a JSON object, got {_kind(data)}")

    def _where(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def get(self, key: str, required: bool = True) -> Any:
        if key not in self.data:
            if required and self.ok:
                self.problems.append(f"{self._where(key)}: required field is missing")
            return None
        return self.data[key]

    def ident(self, key: str, *, required: bool = True, nonempty: bool = False) -> str | None:
        """A string used as an identifier: no control characters."""
        value = self.string(key, required=required, nonempty=nonempty)
        if value is not None and _CONTROL.search(value):
            self.problems.append(f"{self._where(key)}: must not contain control characters (CR, LF, ...)")
            return None
        return value

    def string(self, key: str, *, required: bool = True, nonempty: bool = False, choices=None) -> str | None:
        value = self.get(key, required)
        if value is None and not required:
            return None
        if not isinstance(value, str):
            if key in self.data:
                self.problems.append(f"{self._where(key)}: expected a string, got {_kind(value)}")
            return None
        if len(value) > MAX_STRING:
            self.problems.append(f"{self._where(key)}: longer than {MAX_STRING} characters")
            return None
        if nonempty and not value:
            self.problems.append(f"{self._where(key)}: must not be empty")
        if choices and value not in choices:
            self.problems.append(f"{self._where(key)}: must be one of {', '.join(choices)}, got {value[:40]!r}")
            return None
        return value

    def labels(self, key: str, *, nonempty: bool = False, idents: bool = False) -> dict[str, str]:
        value = self.get(key)
        if value is None:
            if key in self.data:
                self.problems.append(f"{self._where(key)}: expected an object of strings, got null")
            return {}
        if not isinstance(value, dict):
            self.problems.append(f"{self._where(key)}: expected an object of strings, got {_kind(value)}")
            return {}
        if len(value) > MAX_LABELS:
            self.problems.append(f"{self._where(key)}: more than {MAX_LABELS} entries")
            return {}
        bad = [k for k, v in value.items() if not isinstance(v, str) or len(v) > MAX_STRING or len(k) > 256]
        if bad:
            self.problems.append(f"{self._where(key)}: values must be strings ({', '.join(map(repr, bad[:5]))})")
            return {}
        if idents:
            bad = [k for k, v in value.items() if _CONTROL.search(k) or _CONTROL.search(v)]
            if bad:
                self.problems.append(f"{self._where(key)}: must not contain control characters (CR, LF, ...)"
                                     f" ({', '.join(repr(k)[:40] for k in bad[:5])})")
                return {}
        if nonempty and not value:
            self.problems.append(f"{self._where(key)}: must not be empty")
        return dict(value)

    def timestamp(self, key: str) -> Timestamp | None:
        value = self.string(key)
        if value is None:
            return None
        try:
            return parse_timestamp(value)
        except ValueError as exc:
            self.problems.append(f"{self._where(key)}: {exc}")
            return None


def _kind(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number" if isinstance(value, (int, float)) else type(value).__name__
    )


# ---------------------------------------------------------------------------------------------
# Alertmanager webhook, version 4


@dataclass(frozen=True)
class Alert:
    status: str  # firing | resolved: this alert's own status, not the group's
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    starts_at: Timestamp
    ends_at: Timestamp
    generator_url: str
    fingerprint: str

    @property
    def name(self) -> str:
        return self.labels.get("alertname", "")


@dataclass(frozen=True)
class AlertmanagerMessage:
    receiver: str
    status: str
    group_key: str
    group_labels: Mapping[str, str]
    common_labels: Mapping[str, str]
    common_annotations: Mapping[str, str]
    external_url: str
    truncated_alerts: int
    alerts: tuple[Alert, ...]

    @classmethod
    def parse(cls, data: Any) -> "AlertmanagerMessage":
        problems: list[str] = []
        top = _Fields(data, "", problems)
        if not top.ok:
            raise PayloadError("an Alertmanager webhook message", problems)
        version = top.get("version")
        if version is not None and version != "4":
            problems.append(f"version: expected \"4\" (Alertmanager webhook payload version 4), got {version!r:.40}")
        receiver = top.string("receiver")
        status = top.string("status", choices=ALERT_STATUSES)
        group_key = top.string("groupKey", nonempty=True)
        group_labels = top.labels("groupLabels", idents=True)
        common_labels = top.labels("commonLabels", idents=True)
        common_annotations = top.labels("commonAnnotations")
        external_url = top.string("externalURL")
        truncated = top.get("truncatedAlerts", required=False)
        if truncated is None:
            truncated = 0
        elif isinstance(truncated, bool) or not isinstance(truncated, int) or truncated < 0:
            problems.append(f"truncatedAlerts: expected a whole number >= 0, got {_kind(truncated)}")
            truncated = 0
        raw_alerts = top.get("alerts")
        alerts: list[Alert] = []
        if "alerts" in top.data and not isinstance(raw_alerts, list):  # null too: a message carries alerts
            problems.append(f"alerts: expected an array, got {_kind(raw_alerts)}")
        elif isinstance(raw_alerts, list):
            if not raw_alerts:
                problems.append("alerts: must hold at least one alert")
            for i, raw in enumerate(raw_alerts):
                alert = _parse_alert(raw, f"alerts[{i}]", problems)
                if alert is not None:
                    alerts.append(alert)
        if problems:
            raise PayloadError("an Alertmanager webhook message (version 4)", problems)
        return cls(receiver, status, group_key, group_labels, common_labels, common_annotations, external_url,
                   truncated, tuple(alerts))


def _parse_alert(raw: Any, path: str, problems: list[str]) -> Alert | None:
    before = len(problems)
    f = _Fields(raw, path, problems)
    if not f.ok:
        return None
    status = f.string("status", choices=ALERT_STATUSES)
    labels = f.labels("labels", nonempty=True, idents=True)
    annotations = f.labels("annotations")
    starts_at = f.timestamp("startsAt")
    ends_at = f.timestamp("endsAt")
    generator_url = f.string("generatorURL")
    fingerprint = f.string("fingerprint", nonempty=True)
    if fingerprint and not _FINGERPRINT.fullmatch(fingerprint):
        problems.append(f"{path}.fingerprint: expected lower-case hex, got {fingerprint[:40]!r}")
    if starts_at is not None and starts_at.is_zero:
        problems.append(f"{path}.startsAt: must be a real instant, not the zero time")
    if len(problems) > before:
        return None
    return Alert(status, labels, annotations, starts_at, ends_at, generator_url, fingerprint)


# ---------------------------------------------------------------------------------------------
# PagerDuty webhooks v3


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
        problems: list[str] = []
        top = _Fields(data, "", problems)
        if not top.ok:
            raise PayloadError("a PagerDuty webhooks v3 payload", problems)
        event = _Fields(top.get("event"), "event", problems)
        if not event.ok:
            raise PayloadError("a PagerDuty webhooks v3 payload", problems)
        event_id = event.ident("id", nonempty=True)
        event_type = event.string("event_type", nonempty=True)
        if event_type and not _EVENT_TYPE.fullmatch(event_type):
            problems.append(f"event.event_type: expected RESOURCE.ACTION such as incident.triggered, got {event_type[:40]!r}")
        resource_type = event.string("resource_type", nonempty=True)
        occurred_at = event.timestamp("occurred_at")
        agent_raw = event.get("agent", required=False)
        agent = None
        if agent_raw is not None:
            if not isinstance(agent_raw, dict):
                problems.append(f"event.agent: expected an object or null, got {_kind(agent_raw)}")
            else:
                agent = _short(agent_raw.get("summary")) or _short(agent_raw.get("id"))
        payload = _Fields(event.get("data"), "event.data", problems)
        data_id = payload.ident("id", required=False) if payload.ok else None
        incident_key = payload.ident("incident_key", required=False) if payload.ok else None
        status = payload.string("status", required=False) if payload.ok else None
        title = payload.string("title", required=False) if payload.ok else None
        html_url = payload.string("html_url", required=False) if payload.ok else None
        if problems:
            raise PayloadError("a PagerDuty webhooks v3 payload", problems)
        return cls(event_id, event_type, resource_type, occurred_at, agent, data_id, incident_key, status, title,
                   html_url)


def _short(value: Any) -> str | None:
    return value[:200] if isinstance(value, str) and value else None
