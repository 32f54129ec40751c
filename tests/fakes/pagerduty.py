"""A loopback fake of PagerDuty's Events API v2 and the parts of REST API v2 opsctl uses.

It checks what the real service checks (routing key in the body, `Authorization: Token token=`,
the REST Accept header, the From header on writes, read-only keys refused on writes) and keeps
PagerDuty's dedup semantics: a trigger whose dedup key has an open incident adds an alert to it
instead of opening another; after resolve the same key opens a new incident.
"""

from __future__ import annotations

import itertools
import re
import time
import uuid
from datetime import datetime, timezone

from tests.fakes.https import FakeHTTPSServer, Request

EVENT_SEVERITIES = ("critical", "error", "warning", "info")
REST_ACCEPT = "application/vnd.pagerduty+json;version=2"


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class FakePagerDuty(FakeHTTPSServer):
    service = "pagerduty"

    def __init__(self, ca, *, routing_keys=(), api_tokens=None, service_id="PSVC001"):
        super().__init__(ca)
        self.routing_keys = set(routing_keys)
        self.api_tokens = dict(api_tokens or {})  # token -> "full" | "read"
        self.service_id = service_id
        self.incidents: list[dict] = []
        self.change_events: list[dict] = []
        self.updates: list[dict] = []  # every PUT /incidents/{id} body, unwrapped, with the incident's id
        self.maintenance_windows: dict[str, dict] = {}
        self.oncalls: list[dict] = []
        self._ids = itertools.count(1)

    # -- helpers for tests ----------------------------------------------------------------------

    def incidents_with_key(self, key: str) -> list[dict]:
        with self.lock:
            return [i for i in self.incidents if i["incident_key"] == key]

    def add_log_entry(self, incident_id: str, type_: str, at: float, **fields):
        with self.lock:
            incident = next(i for i in self.incidents if i["id"] == incident_id)
            incident["log_entries"].append({"id": f"R{next(self._ids):06d}", "type": type_, "created_at": iso(at),
                                            "summary": fields.pop("summary", type_), **fields})

    # -- routing --------------------------------------------------------------------------------

    def route(self, req: Request):
        if req.path == "/v2/enqueue" and req.method == "POST":
            return self._enqueue(req)
        if req.path == "/v2/change/enqueue" and req.method == "POST":
            return self._change(req)
        return self._rest(req)

    def _event_checks(self, req: Request):
        if not req.headers.get("content-type", "").startswith("application/json"):
            return 400, {"status": "invalid event", "message": "Content-Type must be application/json"}, {}
        if not req.headers.get("user-agent", "").startswith("python-pagerduty/"):
            return 400, {"status": "invalid event", "message": "expected the python-pagerduty client"}, {}
        body = req.json
        if not isinstance(body, dict) or body.get("routing_key") not in self.routing_keys:
            return 400, {"status": "invalid event", "message": "Event object is invalid",
                         "errors": ["Invalid routing key"]}, {}
        return None

    def _enqueue(self, req: Request):
        bad = self._event_checks(req)
        if bad:
            return bad
        body = req.json
        action = body.get("event_action")
        key = body.get("dedup_key")
        if action not in ("trigger", "acknowledge", "resolve"):
            return 400, {"status": "invalid event", "message": "Event object is invalid",
                         "errors": ["'event_action' is missing or blank"]}, {}
        if action != "trigger" and not key:
            return 400, {"status": "invalid event", "message": "Event object is invalid",
                         "errors": ["'dedup_key' is missing or blank"]}, {}
        now = time.time()
        if action == "trigger":
            payload = body.get("payload") or {}
            errors = [f"'payload.{f}' is missing or blank" for f in ("summary", "source", "severity") if not payload.get(f)]
            if payload.get("severity") and payload["severity"] not in EVENT_SEVERITIES:
                errors.append("'payload.severity' is invalid")
            if errors:
                return 400, {"status": "invalid event", "message": "Event object is invalid", "errors": errors}, {}
            key = key or uuid.uuid4().hex
            incident = self._open(key)
            if incident is None:
                incident = {
                    "id": f"Q{next(self._ids):06d}ABC", "incident_key": key, "title": payload["summary"],
                    "status": "triggered", "created_at": iso(now), "alerts": [],
                    # a service whose urgency follows the alert's severity (PagerDuty's dynamic urgency)
                    "urgency": "high" if payload["severity"] in ("critical", "error") else "low",
                    "html_url": f"{self.url}/incidents/Q", "service": {"id": self.service_id},
                    "log_entries": [{"id": f"R{next(self._ids):06d}", "type": "trigger_log_entry",
                                     "created_at": iso(now), "summary": "Triggered through the API."}],
                }
                self.incidents.append(incident)
            incident["alerts"].append(body)
        else:
            incident = self._open(key)
            if incident is not None:
                incident["status"] = "acknowledged" if action == "acknowledge" else "resolved"
                incident["log_entries"].append({"id": f"R{next(self._ids):06d}", "type": f"{action}_log_entry",
                                                "created_at": iso(now), "summary": f"{action} through the API.",
                                                "agent": {"type": "service_reference", "summary": "opsctl"}})
        return 202, {"status": "success", "message": "Event processed", "dedup_key": key}, {}

    def _open(self, key):
        for incident in reversed(self.incidents):
            if incident["incident_key"] == key and incident["status"] != "resolved":
                return incident
        return None

    def _change(self, req: Request):
        bad = self._event_checks(req)
        if bad:
            return bad
        payload = req.json.get("payload") or {}
        errors = [f"'payload.{f}' is missing or blank" for f in ("summary", "timestamp") if not payload.get(f)]
        if errors:
            return 400, {"status": "invalid event", "message": "Event object is invalid", "errors": errors}, {}
        self.change_events.append(req.json)
        return 202, {"status": "success", "message": "Change event processed"}, {}

    # -- REST API v2 ----------------------------------------------------------------------------

    def _rest(self, req: Request):
        auth = req.headers.get("authorization", "")
        m = re.fullmatch(r"Token token=(.+)", auth)
        if not m or m.group(1) not in self.api_tokens:
            return 401, {"error": {"message": "Invalid Credentials", "code": 2006}}, {}
        if req.headers.get("accept") != REST_ACCEPT:
            return 400, {"error": {"message": f"expected Accept: {REST_ACCEPT}", "code": 2001}}, {}
        access = self.api_tokens[m.group(1)]
        if req.method in ("POST", "PUT", "DELETE"):
            if access != "full":
                return 403, {"error": {"message": "Access Denied", "code": 2010,
                                       "errors": ["The access level of this API key is read-only."]}}, {}
            if "@" not in req.headers.get("from", ""):
                return 400, {"error": {"message": "Invalid Input Provided", "code": 2001,
                                       "errors": ["A valid From header is required."]}}, {}
        path = req.path
        if req.method == "GET" and path == "/incidents":
            found = self.incidents
            key = req.q("incident_key")
            if key is not None:
                found = [i for i in found if i["incident_key"] == key]
            statuses = req.query.get("statuses[]", [])
            if statuses:
                found = [i for i in found if i["status"] in statuses]
            return 200, {"incidents": [self._public(i) for i in found], "limit": 25, "offset": 0, "more": False,
                         "total": None}, {}
        m = re.fullmatch(r"/incidents/([A-Z0-9]+)(/log_entries)?", path)
        if req.method == "GET" and m:
            incident = next((i for i in self.incidents if i["id"] == m.group(1)), None)
            if incident is None:
                return 404, {"error": {"message": "Not Found", "code": 2100}}, {}
            if not m.group(2):
                return 200, {"incident": self._public(incident)}, {}
            limit, offset = int(req.q("limit", "25")), int(req.q("offset", "0"))
            entries = incident["log_entries"][offset: offset + limit]
            return 200, {"log_entries": entries, "limit": limit, "offset": offset,
                         "more": offset + limit < len(incident["log_entries"]), "total": None}, {}
        if req.method == "PUT" and m and not m.group(2):  # Update an incident: REST API v2, wrapped in "incident"
            incident = next((i for i in self.incidents if i["id"] == m.group(1)), None)
            if incident is None:
                return 404, {"error": {"message": "Not Found", "code": 2100}}, {}
            change = (req.json or {}).get("incident")
            if not isinstance(change, dict) or change.get("type") not in ("incident", "incident_reference"):
                return 400, {"error": {"message": "Invalid Input Provided", "code": 2001,
                                       "errors": ["Incident type must be incident or incident_reference."]}}, {}
            if "urgency" in change and change["urgency"] not in ("high", "low"):
                return 400, {"error": {"message": "Invalid Input Provided", "code": 2001,
                                       "errors": ["Urgency must be high or low."]}}, {}
            if "title" in change and not (isinstance(change["title"], str) and change["title"].strip()):
                return 400, {"error": {"message": "Invalid Input Provided", "code": 2001,
                                       "errors": ["Title cannot be empty."]}}, {}
            self.updates.append({"id": incident["id"], **change})
            for field in ("title", "urgency"):
                if field in change and change[field] != incident.get(field):
                    if field == "urgency":
                        incident["log_entries"].append({"id": f"R{next(self._ids):06d}",
                                                        "type": "urgency_change_log_entry", "created_at": iso(time.time()),
                                                        "summary": f"Urgency changed to {change[field]}."})
                    incident[field] = change[field]
            return 200, {"incident": self._public(incident)}, {}
        if req.method == "GET" and path == "/oncalls":
            policies = req.query.get("escalation_policy_ids[]", [])
            found = [o for o in self.oncalls if not policies or o["escalation_policy"]["id"] in policies]
            return 200, {"oncalls": found, "limit": 100, "offset": 0, "more": False, "total": None}, {}
        if req.method == "POST" and path == "/maintenance_windows":
            window = (req.json or {}).get("maintenance_window") or {}
            if not window.get("services") or not window.get("start_time") or not window.get("end_time"):
                return 400, {"error": {"message": "Invalid Input Provided", "code": 2001}}, {}
            window = dict(window, id=f"PMW{next(self._ids):04d}")
            self.maintenance_windows[window["id"]] = window
            return 201, {"maintenance_window": window}, {}
        m = re.fullmatch(r"/maintenance_windows/([A-Z0-9]+)", path)
        if req.method == "DELETE" and m:
            if self.maintenance_windows.pop(m.group(1), None) is None:
                return 404, {"error": {"message": "Not Found", "code": 2100}}, {}
            return 204, None, {}
        return 404, {"error": {"message": "Not Found", "code": 2100}}, {}

    @staticmethod
    def _public(incident: dict) -> dict:
        return {k: v for k, v in incident.items() if k not in ("log_entries", "alerts")}
