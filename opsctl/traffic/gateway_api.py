"""The split as a Gateway API HTTPRoute: `backendRefs` weights of one rule, `RequestMirror` for shadow.

Weights are relative in Gateway API (a missing weight is 1); opsctl always writes integer weights
that sum to 100, and reads any weights as percentages rounded by largest remainder. Each shadow
backend gets its own `RequestMirror` filter with `percent` (Gateway API v1.2+); filters of other
types and mirrors to unmapped services are kept as they are. As with Istio, the merge patch carries
the whole `spec.rules` list recomputed from the object as read, plus its resourceVersion.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from opsctl.errors import NoDataError, UsageError
from opsctl.traffic.base import ChangeNotice, StoredSplit, WriteResult
from opsctl.traffic.kube import CustomObject, Kube
from opsctl.traffic.split import Split, largest_remainder

if TYPE_CHECKING:
    from opsctl.traffic.record import ChangeRecord
    from opsctl.config import Destination

GROUP = "gateway.networking.k8s.io"
PLURAL = "httproutes"
MIRROR = "RequestMirror"


class GatewayApiActuator:
    kind = "gateway-api"

    def __init__(self, kube: Kube, *, namespace: str, name: str, rule: int, api_version: str,
                 destinations: "dict[str, Destination]", backends: list[str]):
        self.namespace = namespace
        self.rule = rule
        self.destinations = destinations
        self.backends = backends
        self.target = f"HTTPRoute {namespace}/{name} rule {rule}"
        self.object = CustomObject(kube, group=GROUP, version=api_version, plural=PLURAL, kind="HTTPRoute",
                                   namespace=namespace, name=name, target=self.target)

    def _backend_of(self, ref: dict[str, Any]) -> str | None:
        if ref.get("kind", "Service") != "Service" or ref.get("group", "") not in ("", "core"):
            return None
        for backend, d in self.destinations.items():
            if d.host == ref.get("name") and (d.namespace or self.namespace) == (ref.get("namespace") or self.namespace):
                return backend
        return None

    def _ref(self, backend: str) -> dict[str, Any]:
        d = self.destinations[backend]
        ref: dict[str, Any] = {"name": d.host}
        if d.namespace:
            ref["namespace"] = d.namespace
        if d.port:
            ref["port"] = d.port
        return ref

    def _rules(self, obj: dict[str, Any]) -> list[dict[str, Any]]:
        rules = (obj.get("spec") or {}).get("rules") or []
        if self.rule >= len(rules):
            raise UsageError(f"{self.target}: the route has {len(rules)} rule(s)", hint="fix traffic.gateway_api.rule")
        listed: list[dict[str, Any]] = rules
        return listed

    def read(self) -> StoredSplit:
        obj = self.object.get()
        self._rules(obj)
        rule = obj["spec"]["rules"][self.rule]
        refs = rule.get("backendRefs") or []
        version = obj["metadata"]["resourceVersion"]
        if not refs:
            return StoredSplit(None, version, "the rule has no backendRefs", record=self.object.record(obj))
        raw: dict[str, int] = {}
        for ref in refs:
            backend = self._backend_of(ref)
            if backend is None:
                raise UsageError(f"{self.target}: backendRef {ref.get('name')!r} maps to no backend",
                                 hint="add it to traffic.destinations")
            raw[backend] = raw.get(backend, 0) + int(ref.get("weight", 1))
        total = sum(raw.values())
        if total == 0:
            raise NoDataError(f"{self.target}: every backendRef has weight 0 (the route answers 500 to everything)")
        weights = largest_remainder({b: 100 * w / total for b, w in raw.items()})
        shadow: dict[str, int] = {}
        for f in rule.get("filters") or []:
            if f.get("type") != MIRROR:
                continue
            mirror = f.get("requestMirror") or {}
            backend = self._backend_of(mirror.get("backendRef") or {})
            if backend is None:
                continue
            if "percent" in mirror:
                shadow[backend] = int(mirror["percent"])
            elif "fraction" in mirror:
                fraction = mirror["fraction"]
                shadow[backend] = int(round(100 * fraction["numerator"] / fraction.get("denominator", 100)))
            else:
                shadow[backend] = 100
        try:
            split = Split.from_dict({"weights": weights, "shadow": shadow}, self.backends, self.target)
        except UsageError as exc:
            why = f"the rule's split is not valid: {exc.message}"
            return StoredSplit(None, version, f"corrupt: {why}", record=self.object.record(obj), corrupt=why)
        return StoredSplit(split, version, record=self.object.record(obj))

    def _rewrite_rule(self, rule: dict[str, Any], split: Split) -> dict[str, Any]:
        rule = copy.deepcopy(rule)
        existing = {self._backend_of(r): r for r in rule.get("backendRefs") or []}
        refs = []
        for backend in self.backends:
            if backend not in existing and split.weight(backend) == 0:
                continue
            ref = copy.deepcopy(existing.get(backend) or self._ref(backend))
            ref["weight"] = split.weight(backend)
            refs.append(ref)
        rule["backendRefs"] = refs
        kept = [
            f for f in rule.get("filters") or []
            if not (f.get("type") == MIRROR and self._backend_of((f.get("requestMirror") or {}).get("backendRef") or {}))
        ]
        for backend, percent in split.shadow.items():
            kept.append({"type": MIRROR, "requestMirror": {"backendRef": self._ref(backend), "percent": percent}})
        if kept:
            rule["filters"] = kept
        else:
            rule.pop("filters", None)
        return rule

    def write(self, split: Split, expected_version: str, *, dry_run: bool, record: ChangeRecord | None = None) -> WriteResult:
        rules = copy.deepcopy(self._rules(self.object.at_version(expected_version)))
        rules[self.rule] = self._rewrite_rule(rules[self.rule], split)
        result = self.object.patch_spec({"rules": rules}, expected_version, dry_run=dry_run, record=record)
        return WriteResult(result["metadata"]["resourceVersion"], dry_run,
                           "server dry run (dryRun=All) accepted" if dry_run else "")

    def record_event(self, notice: ChangeNotice) -> str | None:
        return self.object.record_event(notice.message(self.backends), warning=notice.emergency)
