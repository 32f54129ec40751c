"""A loopback PagerDuty Events API v2 endpoint, the drill's stand-in for PagerDuty.

Alertmanager's pagerduty receiver posts to `POST /v2/enqueue` as it would to
events.pagerduty.com. The sink checks what PagerDuty checks (a known routing key, an event action,
a trigger's summary, source and severity), answers 202 or 400 the way PagerDuty does, and opens,
acknowledges and resolves incidents by dedup key. Every event is kept with its arrival time: the
drill's evidence of the page hop. The simulated on-call acknowledges through `acknowledge()`.
"""

from __future__ import annotations

import json
import secrets
import threading
import time

from opsctl.drills.chain.serving import QuietHandler, ThreadedServer

SEVERITIES = ("critical", "error", "warning", "info")
ACTIONS = ("trigger", "acknowledge", "resolve")


def new_routing_key() -> str:
    return secrets.token_hex(16)  # 32 characters, like a PagerDuty integration key


class PagerDutySink:
    def __init__(self, routing_key: str, clock=time.time):
        self.routing_key = routing_key
        self.clock = clock
        self.events: list[dict] = []
        self.incidents: dict[str, dict] = {}
        self._lock = threading.Lock()
        self._http = ThreadedServer("chain-pd-sink")

    # -- the Events API -----------------------------------------------------------------------

    def enqueue(self, body: bytes) -> tuple[int, dict]:
        now = self.clock()
        try:
            event = json.loads(body)
        except ValueError:
            return self._reject(now, None, "Event object is invalid", ["body is not JSON"])
        if not isinstance(event, dict):
            return self._reject(now, None, "Event object is invalid", ["body is not a JSON object"])
        errors = []
        if event.get("routing_key") != self.routing_key:
            errors.append("Invalid routing key")
        action = event.get("event_action")
        if action not in ACTIONS:
            errors.append("'event_action' is invalid (must be one of trigger, acknowledge, resolve)")
        payload = event.get("payload")
        if not isinstance(payload, dict):
            payload = {}
        if action == "trigger":
            for key in ("summary", "source"):
                if not isinstance(payload.get(key), str) or not payload.get(key):
                    errors.append(f"'payload.{key}' is missing or blank")
            if payload.get("severity") not in SEVERITIES:
                errors.append("'payload.severity' is invalid (must be critical, error, warning or info)")
        elif not event.get("dedup_key"):
            errors.append("'dedup_key' is required to acknowledge or resolve")
        if errors:
            return self._reject(now, event, "Event object is invalid", errors)
        key = event.get("dedup_key") or secrets.token_hex(16)
        with self._lock:
            self.events.append({"at": now, "action": action, "dedup_key": key, "accepted": True,
                                "summary": payload.get("summary"), "details": payload.get("custom_details") or {},
                                "client": event.get("client")})
            incident = self.incidents.get(key)
            if action == "trigger" and (incident is None or incident["status"] == "resolved"):
                self.incidents[key] = {"id": f"PDRILL{len(self.incidents) + 1:03d}", "dedup_key": key,
                                       "status": "triggered", "created_at": now, "acknowledged_at": None,
                                       "acknowledged_by": None, "resolved_at": None,
                                       "summary": payload.get("summary"), "severity": payload.get("severity"),
                                       "details": payload.get("custom_details") or {}}
            elif incident is not None and action == "acknowledge" and incident["status"] == "triggered":
                incident.update(status="acknowledged", acknowledged_at=now)
            elif incident is not None and action == "resolve" and incident["status"] != "resolved":
                incident.update(status="resolved", resolved_at=now)
        return 202, {"status": "success", "message": "Event processed", "dedup_key": key}

    def _reject(self, now: float, event, message: str, errors: list[str]) -> tuple[int, dict]:
        with self._lock:
            self.events.append({"at": now, "action": (event or {}).get("event_action"), "accepted": False,
                                "dedup_key": (event or {}).get("dedup_key"), "errors": errors})
        return 400, {"status": "invalid event", "message": message, "errors": errors}

    # -- the on-call --------------------------------------------------------------------------

    def acknowledge(self, dedup_key: str, by: str) -> dict | None:
        with self._lock:
            incident = self.incidents.get(dedup_key)
            if incident is None or incident["status"] != "triggered":
                return None
            incident.update(status="acknowledged", acknowledged_at=self.clock(), acknowledged_by=by)
            return dict(incident)

    def resolve_all(self) -> list[str]:
        done = []
        with self._lock:
            for incident in self.incidents.values():
                if incident["status"] != "resolved":
                    incident.update(status="resolved", resolved_at=self.clock())
                    done.append(incident["id"])
        return done

    def snapshot(self) -> tuple[list[dict], list[dict]]:
        with self._lock:
            return [dict(e) for e in self.events], [dict(i) for i in self.incidents.values()]

    # -- HTTP ---------------------------------------------------------------------------------

    def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        sink = self

        class Handler(QuietHandler):
            def do_POST(self):
                if self.path.split("?")[0] != "/v2/enqueue":
                    self.send_error(404)
                    return
                length = int(self.headers.get("Content-Length") or 0)
                if length > 512 * 1024:  # PagerDuty's limit on an event
                    status, reply = 413, {"status": "invalid event", "message": "event too large"}
                else:
                    status, reply = sink.enqueue(self.rfile.read(length))
                self.reply(status, json.dumps(reply).encode(), "application/json")

        self._http.start(Handler, host, port)
        return self.url

    @property
    def url(self) -> str:
        return f"{self._http.url}/v2/enqueue"

    def stop(self) -> None:
        self._http.stop()
