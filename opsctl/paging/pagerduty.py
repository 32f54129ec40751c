"""PagerDuty through the official `pagerduty` client: Events API v2 (trigger, acknowledge, resolve,
change events) and REST API v2 (incident and log entries, on-call, maintenance windows).

The client retries 429 forever and backs off without a cap. Here every client call is a single
attempt (see `_one_attempt_only`) and opsctl's own loop (`opsctl.retry`) bounds attempts, caps the
jittered backoff and enforces one deadline. Trigger/ack/resolve are safe to retry: they carry the
same dedup key, so PagerDuty folds a repeat into the open incident.

Secrets: keys are resolved only when a real request is about to be sent, never in `--dry-run`
(placeholders describe where they live), and every error text is scrubbed of them. Library error
messages are not passed on: they quote the tail of the key.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Callable

from opsctl.clock import WallClock, format_rfc3339, parse_rfc3339
from opsctl.errors import NoDataError, OpsctlError, UsageError
from opsctl.paging.base import (
    ChangeEvent,
    Incident,
    LogEntry,
    MaintenanceWindow,
    OnCall,
    PageEvent,
    PageResult,
    prepared,
    prepared_change,
)
from opsctl.remote import (
    Redactor,
    RemoteAuthError,
    RemoteUnavailable,
    error_for_status,
    network_error,
    parse_retry_after,
    short,
    tls_context,
)
from opsctl.retry import RetryPolicy, call_with_retry

# The client's own log lines describe its retry settings, which opsctl overrides; keep them out of
# the terminal (opsctl.retry logs the retries that actually happen).
_LIB_LOG = logging.getLogger("opsctl.paging.pagerduty.client")
_LIB_LOG.addHandler(logging.NullHandler())
_LIB_LOG.propagate = False

MAX_LOG_PAGES = 20  # 20 x 100 log entries: far beyond any real incident, and a bound on the loop

NEEDS = {
    "routing_key": "paging, acknowledging and resolving need the Integration Key of an Events API v2 "
                   "integration on the service",
    "change_routing_key": "change events need a routing key (defaults to routing_key)",
    "api_token": "reading incidents, on-call and maintenance windows needs a REST API key",
}
PERM_EVENTS = ("send events to the service (the routing key must be the Integration Key of an Events API v2 "
               "integration on that service)")
PERM_READ_INCIDENTS = "read incidents and their log entries (a REST API key that can see the service)"
PERM_ONCALL = "read on-calls and escalation policies"
PERM_UPDATE_INCIDENT = ("update the service's incidents (a full-access REST API key, and a From user who may edit"
                        " them: paging.pagerduty.from_email)")
PERM_MAINTENANCE = ("create and delete maintenance windows on the service (a full-access, not read-only, REST API "
                    "key, and a From user with the Manager role or above on that service)")


class PagerDutyPager:
    name = "pagerduty"

    def __init__(self, settings, *, service: str, ca_file: Path | None = None, dry_run: bool = False,
                 clock=None, on_retry: Callable | None = None):
        self.settings = settings
        self.service = service
        self.ca_file = ca_file
        self.dry_run = dry_run
        self.clock = clock or WallClock()
        self.on_retry = on_retry
        self.policy = RetryPolicy.from_settings(settings.retry)
        self.redactor = Redactor()
        self._clients: dict[str, Any] = {}
        self._transport = None
        if dry_run:
            from opsctl.paging.noop import make_dry_run_transport

            self._transport = make_dry_run_transport(self.redactor, {"authorization": self._auth_note()})

    # -- Events API v2 ------------------------------------------------------------------------

    def trigger(self, event: PageEvent) -> PageResult:
        event = prepared(self.service, event)
        now = self.clock.now()
        payload: dict[str, Any] = {
            "summary": event.summary[:1024],
            "source": event.source,
            "severity": event.severity,
            "timestamp": _iso(now),
        }
        if event.component:
            payload["component"] = event.component
        if event.group:
            payload["group"] = event.group
        payload["custom_details"] = dict(event.custom_details)
        props: dict[str, Any] = {"payload": payload}
        if event.links:
            props["links"] = [link.to_dict() for link in event.links]
        client = self._client("events")
        key = self._call(client, "trigger", lambda: client.send_event("trigger", dedup_key=event.dedup_key, **props),
                         permission=PERM_EVENTS, credential=self._where("routing_key"))
        requests = self._take_requests()
        detail = self._retitle(key or event.dedup_key or "", event) if event.title else None
        return PageResult(action="trigger", provider=self.name, at=now, dry_run=self.dry_run,
                          requests=requests + self._take_requests(), dedup_key=key, summary=event.summary,
                          drill=event.drill, detail=detail)

    def _retitle(self, key: str, event: PageEvent) -> str | None:
        """Set the open incident's title to `event.title` and raise its urgency to the severity's
        (REST API v2 `PUT /incidents/{id}`): an Events API trigger on an open incident's dedup key
        changes neither. Never opens, resolves or re-triggers anything. The page itself went out:
        a title that could not be set is said in the result's detail, not raised."""
        from opsctl.paging.title import URGENCY

        s = self.settings
        if self.dry_run:
            return "dry run: the open incident's title would be set through the REST API"
        if s.api_token is None or not s.from_email:
            return ("title not updated: the incident's title follows its state through the REST API, which needs"
                    " paging.pagerduty.api_token and from_email")
        client = self._client("rest")
        try:
            body = self._call(client, "find the incident to retitle", lambda: client.jget(
                "/incidents", params={"incident_key": key, "statuses[]": ["triggered", "acknowledged"], "limit": 25}),
                permission=PERM_READ_INCIDENTS, credential=self._where("api_token"))
            found = [i for i in body.get("incidents") or [] if i.get("status") in ("triggered", "acknowledged")
                     and i.get("incident_key") == key]
            if not found:
                return "title not updated: no open incident with this dedup key yet (PagerDuty opens it from the event)"
            incident = max(found, key=lambda i: parse_rfc3339(i["created_at"]))
            change: dict[str, Any] = {"type": "incident_reference"}
            if (incident.get("title") or "") != event.title:
                change["title"] = event.title
            if URGENCY.get(event.severity) == "high" and incident.get("urgency") != "high":
                change["urgency"] = "high"  # raised, never lowered
            if len(change) == 1:
                return None
            self._call(client, "update incident", lambda: client.rput(f"/incidents/{incident['id']}", json=change),
                       permission=PERM_UPDATE_INCIDENT, credential=self._where("api_token"))
        except OpsctlError as exc:
            return f"title not updated: {exc.message}"
        said = [f"title set to {event.title!r}" if "title" in change else "", "urgency raised to high"
                if "urgency" in change else ""]
        return f"incident {incident['id']}: " + "; ".join(x for x in said if x)

    def acknowledge(self, dedup_key: str) -> PageResult:
        return self._event_action("acknowledge", dedup_key)

    def resolve(self, dedup_key: str) -> PageResult:
        return self._event_action("resolve", dedup_key)

    def _event_action(self, action: str, dedup_key: str) -> PageResult:
        now = self.clock.now()
        client = self._client("events")
        key = self._call(client, action, lambda: client.send_event(action, dedup_key=dedup_key),
                         permission=PERM_EVENTS, credential=self._where("routing_key"))
        return self._result(action, now, dedup_key=key)

    def change_event(self, change: ChangeEvent) -> PageResult:
        change = prepared_change(change)
        now = self.clock.now()
        client = self._client("change")
        # submit() without timestamp= raises AttributeError in pagerduty 7.1-7.2: always pass it.
        self._call(
            client, "change event",
            lambda: client.submit(change.summary[:1024], source=change.source, custom_details=dict(change.custom_details),
                                  links=[link.to_dict() for link in change.links] or None,
                                  timestamp=_iso(change.timestamp)),
            permission=PERM_EVENTS, credential=self._where("change_routing_key"),
        )
        return self._result("change", now, summary=change.summary, drill=change.drill)

    # -- REST API v2 --------------------------------------------------------------------------

    def get_incident(self, key: str) -> Incident:
        client = self._client("rest")
        cred = self._where("api_token")

        def get(path, params=None):
            return self._call(client, "read incident", lambda: client.jget(path, params=params),
                              permission=PERM_READ_INCIDENTS, credential=cred)

        found = get("/incidents", {"incident_key": key, "date_range": "all", "limit": 25}).get("incidents") or []
        if not found and _looks_like_incident_id(key):
            try:
                found = [get(f"/incidents/{key}")["incident"]]
            except NoDataError:
                found = []
        if not found:
            raise NoDataError(f"PagerDuty: no incident with dedup key or id {key!r}",
                              hint="the key is printed by `opsctl page trigger`; `opsctl page status` lists recent pages")
        incident = max(found, key=lambda i: parse_rfc3339(i["created_at"]))
        log: list[LogEntry] = []
        offset = 0
        for _ in range(MAX_LOG_PAGES):
            page = get(f"/incidents/{incident['id']}/log_entries",
                       {"limit": 100, "offset": offset, "is_overview": "false"})
            entries = page.get("log_entries") or []
            for entry in entries:
                log.extend(_log_entries(entry))
            if not page.get("more") or not entries:
                break
            offset += len(entries)
        return Incident(
            id=incident["id"],
            dedup_key=incident.get("incident_key"),
            title=incident.get("title") or incident.get("summary") or "",
            status=incident["status"],
            created_at=parse_rfc3339(incident["created_at"]),
            provider=self.name,
            url=incident.get("html_url"),
            log=tuple(sorted(log, key=lambda e: e.at)),
        )

    def open_incidents(self) -> list[Incident]:
        """The service's triggered and acknowledged incidents (without their logs), oldest first."""
        client = self._client("rest")
        params: dict[str, Any] = {"statuses[]": ["triggered", "acknowledged"], "limit": 100}
        if self.settings.service_id:
            params["service_ids[]"] = [self.settings.service_id]
        body = self._call(client, "list open incidents", lambda: client.jget("/incidents", params=params),
                          permission=PERM_READ_INCIDENTS, credential=self._where("api_token"))
        found = [
            Incident(id=i["id"], dedup_key=i.get("incident_key"), title=i.get("title") or i.get("summary") or "",
                     status=i["status"], created_at=parse_rfc3339(i["created_at"]), provider=self.name,
                     url=i.get("html_url"))
            for i in body.get("incidents") or []
        ]
        # Filter again: a server (or proxy) that ignores statuses[] must not make resolved ones look open.
        return sorted((i for i in found if i.status in ("triggered", "acknowledged")), key=lambda i: i.created_at)

    def oncall(self) -> list[OnCall]:
        policy_id = self.settings.escalation_policy_id
        if not policy_id:
            raise UsageError("paging.pagerduty.escalation_policy_id is not set: the on-call lookup needs it")
        client = self._client("rest")
        body = self._call(
            client, "read on-calls",
            lambda: client.jget("/oncalls", params={"escalation_policy_ids": [policy_id], "limit": 100,
                                                    "earliest": "true"}),
            permission=PERM_ONCALL, credential=self._where("api_token"),
        )
        out = [
            OnCall(
                user=(o.get("user") or {}).get("summary") or (o.get("user") or {}).get("id", "?"),
                escalation_level=int(o.get("escalation_level", 0)),
                schedule=(o.get("schedule") or {}).get("summary"),
                start=o.get("start"),
                end=o.get("end"),
            )
            for o in body.get("oncalls") or []
        ]
        return sorted(out, key=lambda o: (o.escalation_level, o.user))

    def create_maintenance_window(self, start: float, end: float, description: str) -> MaintenanceWindow:
        service_id = self._need("service_id", "a maintenance window covers the service")
        self._need("from_email", "REST writes need the email of a valid PagerDuty user (sent as the From header)")
        if end <= start:
            raise UsageError("a maintenance window must end after it starts")
        client = self._client("rest")
        body = {"type": "maintenance_window", "start_time": _iso(start), "end_time": _iso(end),
                "description": description, "services": [{"id": service_id, "type": "service_reference"}]}
        window = self._call(client, "create maintenance window",
                            lambda: client.rpost("/maintenance_windows", json=body),
                            permission=PERM_MAINTENANCE, credential=self._where("api_token"), retry_ambiguous=False)
        return MaintenanceWindow(
            id=window["id"], start=start, end=end, description=description,
            services=tuple(s.get("id", "") for s in window.get("services", [])), provider=self.name,
            dry_run=self.dry_run, requests=self._take_requests(),
        )

    def delete_maintenance_window(self, window_id: str) -> PageResult:
        self._need("from_email", "REST writes need the email of a valid PagerDuty user (sent as the From header)")
        now = self.clock.now()
        client = self._client("rest")
        self._call(client, "delete maintenance window", lambda: client.rdelete(f"/maintenance_windows/{window_id}"),
                   permission=PERM_MAINTENANCE, credential=self._where("api_token"))
        return self._result("maintenance-delete", now, incident_id=None, detail=f"maintenance window {window_id}")

    # -- plumbing -----------------------------------------------------------------------------

    def _client(self, kind: str):
        if kind in self._clients:
            return self._clients[kind]
        import pagerduty

        s = self.settings
        kwargs: dict[str, Any] = {}
        client: Any
        if self.ca_file:
            kwargs["verify"] = tls_context(self.ca_file)
        if self._transport is not None:
            kwargs["transport"] = self._transport
        if kind == "events":
            client = pagerduty.EventsApiV2Client(self._secret("routing_key"), base_url=s.events_url, **kwargs)
        elif kind == "change":
            if s.change_routing_key is None:
                return self._client("events")
            client = pagerduty.EventsApiV2Client(self._secret("change_routing_key"), base_url=s.events_url, **kwargs)
        else:
            client = pagerduty.RestApiV2Client(self._secret("api_token"), default_from=s.from_email,
                                               base_url=s.api_url, **kwargs)
        _one_attempt_only(client)
        self._clients[kind] = client
        return client

    def _secret(self, key: str) -> str:
        ref = getattr(self.settings, key)
        if ref is None:
            raise UsageError(f"paging.pagerduty.{key} is not set: {NEEDS[key]}",
                             hint=f"add paging.pagerduty.{key}: {{env: NAME}} or {{file: PATH}} to the config")
        if self.dry_run:
            return f"<redacted:{ref.describe()}>"
        value = ref.resolve()
        self.redactor.add(value)
        return value

    def _need(self, key: str, why: str) -> str:
        value = getattr(self.settings, key)
        if not value:
            raise UsageError(f"paging.pagerduty.{key} is not set: {why}")
        return value

    def _where(self, key: str) -> str:
        ref = getattr(self.settings, key)
        if key == "change_routing_key" and ref is None:
            key, ref = "routing_key", self.settings.routing_key
        return f"paging.pagerduty.{key} ({ref.describe()})" if ref else f"paging.pagerduty.{key}"

    def _auth_note(self) -> str:
        ref = self.settings.api_token
        return f"Token token=<redacted:{ref.describe()}>" if ref else "<redacted>"

    def _call(self, client, what: str, fn: Callable[[], Any], *, permission: str, credential: str,
              retry_ambiguous: bool = True) -> Any:
        import pagerduty

        def attempt(timeout: float):
            client.timeout = timeout
            try:
                return fn()
            except pagerduty.HttpError as exc:
                err = self._http_error(exc.response, what, permission, credential)
            except pagerduty.Error as exc:
                err = network_error("PagerDuty", what, client.url, exc, self.redactor)
            except pagerduty.UrlError as exc:
                err = UsageError(f"PagerDuty: {what}: {exc}")
            if isinstance(err, RemoteUnavailable) and err.maybe_sent and not retry_ambiguous:
                err = OpsctlError(err.message, hint="the request may have reached PagerDuty: check there before "
                                                    "running the command again")
            # `from None`: the library's messages quote the last characters of the key.
            raise err from None

        return call_with_retry(attempt, self.policy, f"PagerDuty {what}", on_retry=self.on_retry)

    def _http_error(self, response, what: str, permission: str, credential: str) -> OpsctlError:
        status = response.status_code
        detail = self._detail(response)
        if status == 400 and "routing key" in detail.lower():
            return RemoteAuthError(
                f"PagerDuty refused {what} (HTTP 400): {detail}", status=status, permission=permission,
                hint=f"check {credential}: it must be the Integration Key of an Events API v2 integration",
            )
        return error_for_status("PagerDuty", what, status, credential=credential, permission=permission,
                                detail=detail, retry_after=parse_retry_after(response.headers.get("retry-after")))

    def _detail(self, response) -> str:
        try:
            body = json.loads(response.text)
        except ValueError:
            return self.redactor.scrub(short(response.text))
        parts: list[str] = []
        if isinstance(body, dict):
            err: dict = body["error"] if isinstance(body.get("error"), dict) else body
            for k in ("message", "errors"):
                v = err.get(k)
                if v:
                    parts.append("; ".join(map(str, v)) if isinstance(v, list) else str(v))
        return self.redactor.scrub(short(": ".join(parts) if parts else response.text))

    def _take_requests(self) -> tuple[dict, ...]:
        if self._transport is None:
            return ()
        taken = tuple(self._transport.requests)
        self._transport.requests.clear()
        return taken

    def _result(self, action: str, at: float, **kw) -> PageResult:
        return PageResult(action=action, provider=self.name, at=at, dry_run=self.dry_run,
                          requests=self._take_requests(), **kw)


def _one_attempt_only(client) -> None:
    """Make each client call a single HTTP attempt; opsctl.retry does the bounded retrying.

    With retry[status] >= 1 and max_http_attempts = -1 the client hands back the first 429/5xx
    response instead of sleeping (it would otherwise retry 429 forever with uncapped backoff), and
    max_network_attempts = 0 raises on the first network error. tests/paging count the requests
    the fake receives, so a change of this behaviour in a new client version fails loudly.
    """
    client.retry = {status: 1 for status in (429, 500, 502, 503, 504)}
    client.max_http_attempts = -1
    client.max_network_attempts = 0
    client.log = _LIB_LOG


def _iso(ts: float) -> str:
    return format_rfc3339(ts)


def _looks_like_incident_id(key: str) -> bool:
    """PagerDuty ids are short upper-case alphanumerics (PT4KHLK); opsctl dedup keys contain dashes."""
    return key.isalnum() and key.upper() == key and 5 <= len(key) <= 20


def _log_entries(entry: dict) -> list[LogEntry]:
    kind = entry.get("type", "").removesuffix("_reference").removesuffix("_log_entry")
    at = parse_rfc3339(entry["created_at"])
    summary = entry.get("summary") or ""
    if kind == "notify":
        return [LogEntry(kind, at, (entry.get("user") or {}).get("summary"), summary)]
    if kind == "assign":
        people = [a.get("summary") for a in entry.get("assignees") or [] if a.get("summary")]
        return [LogEntry(kind, at, p, summary) for p in people] or [LogEntry(kind, at, None, summary)]
    if kind in ("acknowledge", "resolve", "unacknowledge", "annotate", "snooze"):
        agent = entry.get("agent") or {}
        return [LogEntry(kind, at, agent.get("summary") if agent.get("type", "").startswith("user") else None, summary)]
    if kind == "escalate":
        people = [a.get("summary") for a in entry.get("assignees") or [] if a.get("summary")]
        return [LogEntry(kind, at, ", ".join(people) or None, summary)]
    return [LogEntry(kind, at, None, summary)]
