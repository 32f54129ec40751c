"""The split as an Istio VirtualService: route weights of one HTTP route, `mirror` for shadow traffic.

One shadow backend is written as `mirror` + `mirrorPercentage` (every Istio version); several as
`mirrors` (Istio 1.18+). The write sends the complete `spec.http` list recomputed from the object as
read, with its resourceVersion (see kube.CustomObject): other routes and fields are kept as they are.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from opsctl.errors import NoDataError, UsageError
from opsctl.traffic.base import ChangeNotice, StoredSplit, WriteResult
from opsctl.traffic.kube import CustomObject, Kube
from opsctl.traffic.split import Split

if TYPE_CHECKING:
    from opsctl.traffic.record import ChangeRecord
    from opsctl.config import Destination

GROUP = "networking.istio.io"
PLURAL = "virtualservices"


class IstioActuator:
    kind = "istio"

    def __init__(self, kube: Kube, *, namespace: str, name: str, route: str | None, api_version: str,
                 destinations: "dict[str, Destination]", backends: list[str]):
        self.route_name = route
        self.destinations = destinations  # backend -> config.Destination
        self.backends = backends
        self.target = f"VirtualService {namespace}/{name}" + (f" route {route}" if route else "")
        self.object = CustomObject(kube, group=GROUP, version=api_version, plural=PLURAL, kind="VirtualService",
                                   namespace=namespace, name=name, target=self.target)

    # -- mapping between Istio destinations and backends ---------------------------------------

    def _backend_of(self, destination: dict[str, Any]) -> str | None:
        host = destination.get("host")
        subset = destination.get("subset")
        for backend, d in self.destinations.items():
            if d.host == host and (d.subset is None or d.subset == subset):
                return backend
        return None

    def _destination(self, backend: str) -> dict[str, Any]:
        d = self.destinations[backend]
        out: dict[str, Any] = {"host": d.host}
        if d.subset:
            out["subset"] = d.subset
        if d.port:
            out["port"] = {"number": d.port}
        return out

    def _route_index(self, obj: dict[str, Any]) -> int:
        http = (obj.get("spec") or {}).get("http") or []
        if not http:
            raise UsageError(f"{self.target}: spec.http has no routes")
        if self.route_name is None:
            return 0
        for i, route in enumerate(http):
            if route.get("name") == self.route_name:
                return i
        names = ", ".join(repr(r.get("name")) for r in http)
        raise UsageError(f"{self.target}: no HTTP route named {self.route_name!r} (routes: {names})",
                         hint="set traffic.istio.route to one of them")

    # -- Actuator ---------------------------------------------------------------------------------

    def read(self) -> StoredSplit:
        obj = self.object.get()
        route = obj["spec"]["http"][self._route_index(obj)]
        entries = route.get("route") or []
        if not entries:
            return StoredSplit(None, obj["metadata"]["resourceVersion"], "the route has no destinations",
                               record=self.object.record(obj))
        weights: dict[str, int] = {}
        for entry in entries:
            backend = self._backend_of(entry.get("destination") or {})
            if backend is None:
                raise UsageError(
                    f"{self.target}: destination {entry.get('destination')} maps to no backend",
                    hint="add it to traffic.destinations",
                )
            weight = entry.get("weight", 100 if len(entries) == 1 else None)
            if weight is None:
                raise NoDataError(f"{self.target}: destinations without weights; cannot tell the split")
            weights[backend] = weights.get(backend, 0) + int(weight)
        shadow: dict[str, int] = {}
        mirrors = []
        if route.get("mirror"):
            mirrors.append((route["mirror"], (route.get("mirrorPercentage") or {}).get("value", 100.0)))
        for m in route.get("mirrors") or []:
            mirrors.append((m.get("destination") or {}, (m.get("percentage") or {}).get("value", 100.0)))
        for destination, percent in mirrors:
            backend = self._backend_of(destination)
            if backend is not None:
                shadow[backend] = int(round(float(percent)))
        try:
            split = Split.from_dict({"weights": weights, "shadow": shadow}, self.backends, self.target)
        except UsageError as exc:
            why = f"the route's split is not valid: {exc.message}"
            return StoredSplit(None, obj["metadata"]["resourceVersion"], f"corrupt: {why}",
                               record=self.object.record(obj), corrupt=why)
        return StoredSplit(split, obj["metadata"]["resourceVersion"], record=self.object.record(obj))

    def _rewrite_route(self, route: dict[str, Any], split: Split) -> dict[str, Any]:
        route = copy.deepcopy(route)
        existing = {}
        present = []
        for entry in route.get("route") or []:
            backend = self._backend_of(entry.get("destination") or {})
            existing[backend] = entry
            present.append(backend)
        entries = []
        for backend in self.backends:
            if backend not in present and split.weight(backend) == 0:
                continue
            entry = copy.deepcopy(existing.get(backend) or {"destination": self._destination(backend)})
            entry["weight"] = split.weight(backend)
            entries.append(entry)
        route["route"] = entries
        for key in ("mirror", "mirrorPercentage", "mirrors"):
            route.pop(key, None)
        shadows = [(b, p) for b, p in split.shadow.items() if p]
        if len(shadows) == 1:
            backend, percent = shadows[0]
            route["mirror"] = self._destination(backend)
            route["mirrorPercentage"] = {"value": float(percent)}
        elif shadows:
            route["mirrors"] = [
                {"destination": self._destination(b), "percentage": {"value": float(p)}} for b, p in shadows
            ]
        return route

    def write(self, split: Split, expected_version: str, *, dry_run: bool, record: ChangeRecord | None = None) -> WriteResult:
        obj = self.object.at_version(expected_version)
        http = copy.deepcopy(obj["spec"]["http"])
        index = self._route_index(obj)
        http[index] = self._rewrite_route(http[index], split)
        result = self.object.patch_spec({"http": http}, expected_version, dry_run=dry_run, record=record)
        return WriteResult(result["metadata"]["resourceVersion"], dry_run,
                           "server dry run (dryRun=All) accepted" if dry_run else "")

    def record_event(self, notice: ChangeNotice) -> str | None:
        return self.object.record_event(notice.message(self.backends), warning=notice.emergency)
