"""Live drills: the internal Deployment scaled down (lost GPU pods), in a staging namespace.

The original replica count is recorded before the scale; removal scales back only if the
Deployment still has the replicas the drill set, so an autoscaler's or a person's change since is
left alone and reported. Writes go through the scale subresource with the resourceVersion in the
patch (409 -> re-read, bounded attempts).
"""

from __future__ import annotations

import math

from opsctl.errors import ConflictError, OpsctlError

ATTEMPTS = 5


class DeploymentScaleFault:
    name = "deployment-scale"

    def __init__(self, kube, *, run_id: str):
        self.kube = kube
        self.run_id = run_id

    def _target(self, record: dict) -> str:
        return f"Deployment {record['namespace']}/{record['deployment']}"

    def _scale(self, record: dict):
        return self.kube.call(f"read the scale of {self._target(record)}",
                              self.kube.apps().read_namespaced_deployment_scale, record["deployment"],
                              record["namespace"])

    def _set(self, record: dict, replicas: int, expect: int | None) -> tuple[bool, int]:
        """Scale to `replicas` if the current count is `expect` (None: any). (changed, count seen)."""
        from opsctl.traffic.kube import FIELD_MANAGER, MERGE_PATCH

        last = None
        for _ in range(ATTEMPTS):
            scale = self._scale(record)
            current = (scale.spec.replicas if scale.spec else None) or 0
            if expect is not None and current != expect:
                return False, current
            body = {"metadata": {"resourceVersion": scale.metadata.resource_version}, "spec": {"replicas": replicas}}
            try:
                self.kube.call(f"scale {self._target(record)}", self.kube.apps().patch_namespaced_deployment_scale,
                               record["deployment"], record["namespace"], body, field_manager=FIELD_MANAGER,
                               _content_type=MERGE_PATCH)
            except ConflictError as exc:
                last = exc
                continue
            self._event(record, f"scaled {current} -> {replicas} replicas")
            return True, current
        raise ConflictError(f"could not scale {self._target(record)}: {ATTEMPTS} attempts met concurrent changes ({last})")

    def _event(self, record: dict, message: str) -> None:
        try:
            self.kube.record_event(
                involved={"apiVersion": "apps/v1", "kind": "Deployment", "name": record["deployment"],
                          "namespace": record["namespace"]},
                reason="DrillFault", message=f"[DRILL] {self.run_id}: {message}", warning=True, action="Scale")
        except OpsctlError:
            pass

    def prepare(self, fault, backend: str, at: float) -> dict:
        live = fault.live
        record = {"injector": self.name, "kind": fault.kind, "backend": backend, "params": dict(fault.params),
                  "start": at, "end": at + fault.duration, "namespace": live.namespace, "deployment": live.deployment}
        scale = self._scale(record)
        original = (scale.spec.replicas if scale.spec else None) or 0
        target = live.replicas if live.replicas is not None else math.floor(original * (1 - fault.params.get("rate", 0)))
        record.update(original_replicas=original, target_replicas=min(int(target), original))
        return record

    def apply(self, record: dict) -> str:
        changed, seen = self._set(record, record["target_replicas"], None)
        return f"{self._target(record)} scaled {seen} -> {record['target_replicas']} replicas"

    def remove(self, record: dict, at: float) -> str:
        changed, seen = self._set(record, record["original_replicas"], record["target_replicas"])
        if changed:
            return f"{self._target(record)} scaled back {seen} -> {record['original_replicas']} replicas"
        if seen == record["original_replicas"]:
            return f"{self._target(record)} already has its {seen} replicas back"
        return (f"{self._target(record)} has {seen} replicas, not the {record['target_replicas']} the drill set;"
                " left as is: check who scaled it")
