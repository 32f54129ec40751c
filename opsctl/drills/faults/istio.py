"""Live drills: an Istio fault (abort or delay, for a percentage of requests) on the HTTP route of the
VirtualService that carries one backend's traffic, e.g. the Databricks egress route in staging.

The fault goes into that route's `fault` field with a JSON merge patch carrying the object's
resourceVersion (409 -> re-read, bounded attempts), and the object is annotated with the drill's
run id. Removal puts back the route's original `fault` (usually none) only if the drill's fault is
still the one there: a fault someone else set since is left alone and reported.
"""

from __future__ import annotations

import copy

from opsctl.drills.faults.base import DRILL_ANNOTATION
from opsctl.errors import ConflictError, OpsctlError, UsageError

GROUP = "networking.istio.io"
ABORT_STATUS = {"vendor-5xx": 503, "auth-throttling": 429, "vendor-throttling": 503, "oauth-token-failure": 503}
DELAY_SHARE = {"latency-spike": None, "latency-tail": "share", "vendor-timeout": "rate", "slow-token-endpoint": "share"}
ATTEMPTS = 5


class IstioRouteFault:
    name = "istio-route"

    def __init__(self, kube, *, api_version: str, run_id: str):
        self.kube = kube
        self.api_version = api_version
        self.run_id = run_id

    # -- plumbing -----------------------------------------------------------------------------------

    def _target(self, record: dict) -> str:
        return f"VirtualService {record['namespace']}/{record['virtual_service']}"

    def _get(self, record: dict) -> dict:
        return self.kube.call(f"read {self._target(record)}", self.kube.custom().get_namespaced_custom_object,
                              GROUP, record["api_version"], record["namespace"], "virtualservices",
                              record["virtual_service"])

    def _patch(self, record: dict, body: dict) -> dict:
        from opsctl.traffic.kube import FIELD_MANAGER, MERGE_PATCH

        return self.kube.call(f"patch {self._target(record)}", self.kube.custom().patch_namespaced_custom_object,
                              GROUP, record["api_version"], record["namespace"], "virtualservices",
                              record["virtual_service"], body, field_manager=FIELD_MANAGER,
                              _content_type=MERGE_PATCH)

    @staticmethod
    def _route_index(obj: dict, route: str | None, target: str) -> int:
        http = (obj.get("spec") or {}).get("http") or []
        if not http:
            raise UsageError(f"{target}: spec.http has no routes to inject a fault into")
        if route is None:
            return 0
        for i, r in enumerate(http):
            if r.get("name") == route:
                return i
        raise UsageError(f"{target}: no HTTP route named {route!r} (routes: {', '.join(repr(r.get('name')) for r in http)})")

    def _event(self, obj: dict, message: str) -> None:
        from opsctl.traffic.kube import object_ref

        try:
            self.kube.record_event(involved=object_ref(obj, f"{GROUP}/{self.api_version}", "VirtualService"),
                                   reason="DrillFault", message=f"[DRILL] {self.run_id}: {message}", warning=True)
        except OpsctlError:
            pass  # the fault is in place; a missing Event is not worth failing the drill over

    # -- FaultInjector ------------------------------------------------------------------------------

    def prepare(self, fault, backend: str, at: float) -> dict:
        live = fault.live
        record = {"injector": self.name, "kind": fault.kind, "backend": backend, "params": dict(fault.params),
                  "start": at, "end": at + fault.duration, "namespace": live.namespace,
                  "virtual_service": live.virtual_service, "route": live.route, "api_version": self.api_version}
        obj = self._get(record)
        index = self._route_index(obj, live.route, self._target(record))
        if fault.kind in DELAY_SHARE:  # a tail or a timeout: delay only its share of the requests
            key = DELAY_SHARE[fault.kind]
            share = 100.0 if key is None else round(fault.params[key] * 100, 4)
            spec = {"delay": {"percentage": {"value": float(live.percentage or share)}, "fixedDelay": live.fixed_delay}}
        else:
            percent = live.percentage if live.percentage is not None else round(fault.params["rate"] * 100, 4)
            spec = {"abort": {"percentage": {"value": float(percent)},
                              "httpStatus": int(live.http_status or ABORT_STATUS[fault.kind])}}
        route = obj["spec"]["http"][index]
        record.update(route_index=index, original_fault=copy.deepcopy(route.get("fault")), injected_fault=spec)
        return record

    def apply(self, record: dict) -> str:
        last = None
        for _ in range(ATTEMPTS):
            obj = self._get(record)
            index = self._route_index(obj, record["route"], self._target(record))
            http = copy.deepcopy(obj["spec"]["http"])
            http[index]["fault"] = record["injected_fault"]
            body = {"metadata": {"resourceVersion": obj["metadata"]["resourceVersion"],
                                 "annotations": {DRILL_ANNOTATION: self.run_id}},
                    "spec": {"http": http}}
            try:
                written = self._patch(record, body)
            except ConflictError as exc:
                last = exc
                continue
            what = f"{self._target(record)} route {index}: fault {record['injected_fault']}"
            self._event(written, f"fault injected: {record['injected_fault']}")
            return what
        raise ConflictError(f"could not inject the fault into {self._target(record)}: {ATTEMPTS} attempts met"
                            f" concurrent changes ({last})")

    def remove(self, record: dict, at: float) -> str:
        last = None
        for _ in range(ATTEMPTS):
            obj = self._get(record)
            index = self._route_index(obj, record["route"], self._target(record))
            http = copy.deepcopy(obj["spec"]["http"])
            current = http[index].get("fault")
            if current != record["injected_fault"]:
                if current == record["original_fault"]:
                    return f"{self._target(record)}: the drill's fault is not there (already removed)"
                return (f"{self._target(record)}: the route's fault changed since the drill set it (now {current});"
                        " left as is: check who changed it")
            if record["original_fault"] is None:
                http[index].pop("fault", None)
            else:
                http[index]["fault"] = record["original_fault"]
            body = {"metadata": {"resourceVersion": obj["metadata"]["resourceVersion"],
                                 "annotations": {DRILL_ANNOTATION: None}},
                    "spec": {"http": http}}
            try:
                written = self._patch(record, body)
            except ConflictError as exc:
                last = exc
                continue
            self._event(written, "fault removed")
            return f"{self._target(record)} route {index}: fault removed"
        raise ConflictError(f"could not remove the fault from {self._target(record)}: {ATTEMPTS} attempts met"
                            f" concurrent changes ({last})")
