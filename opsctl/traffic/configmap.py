"""The split as JSON in one key of a ConfigMap that the grammar service reads.

A write is a strategic-merge patch that touches only that key and carries the resourceVersion it
was planned against (`metadata.resourceVersion` in the body), so the API server answers 409 when
the ConfigMap changed since it was read. The change record (opsctl/traffic/record.py) rides in the
same patch as annotation `opsctl.io/traffic-record`, so the split and its record are one write.
"""

from __future__ import annotations

import json
from typing import Any

from opsctl.errors import UsageError
from opsctl.traffic import record as records
from opsctl.traffic.base import ChangeNotice, StoredSplit, WriteResult
from opsctl.traffic.kube import FIELD_MANAGER, STRATEGIC_MERGE_PATCH, Kube
from opsctl.traffic.split import Split


class ConfigMapActuator:
    kind = "configmap"

    def __init__(self, kube: Kube, *, namespace: str, name: str, key: str, backends: list[str]):
        self.kube = kube
        self.namespace = namespace
        self.name = name
        self.key = key
        self.backends = backends
        self.target = f"ConfigMap {namespace}/{name} key {key}"
        self._ref: dict[str, Any] | None = None

    def read(self) -> StoredSplit:
        cm = self.kube.call(f"read {self.target}", self.kube.core().read_namespaced_config_map, self.name, self.namespace)
        meta = cm.metadata
        self._ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": meta.name, "namespace": meta.namespace,
                     "uid": meta.uid, "resourceVersion": meta.resource_version}
        try:
            record = records.parse((meta.annotations or {}).get(records.ANNOTATION), self.target)
        except Exception:  # a damaged record must not block a repair
            record = records.empty()
        raw = (cm.data or {}).get(self.key)
        if raw is None:
            return StoredSplit(None, meta.resource_version, f"key {self.key} is not set", record=record)
        try:
            split = Split.from_dict(json.loads(raw), self.backends, self.target)
        except (ValueError, UsageError) as exc:
            why = f"the stored split is not valid: {getattr(exc, 'message', exc)}"
            from opsctl.traffic.file import repair_hint

            return StoredSplit(None, meta.resource_version, f"corrupt: {why}; {repair_hint(None, self.backends)}",
                               record=record, corrupt=why)
        return StoredSplit(split, meta.resource_version, record=record)

    def write(self, split: Split, expected_version: str, *, dry_run: bool, record: records.ChangeRecord | None = None) -> WriteResult:
        body: dict[str, dict[str, object]] = {
            "metadata": {"resourceVersion": expected_version},
            "data": {self.key: json.dumps(split.to_dict(self.backends), sort_keys=True)},
        }
        if record is not None:
            body["metadata"]["annotations"] = {records.ANNOTATION: record.encode()}
        cm = self.kube.call(
            f"patch {self.target}", self.kube.core().patch_namespaced_config_map, self.name, self.namespace, body,
            field_manager=FIELD_MANAGER, dry_run="All" if dry_run else None, _content_type=STRATEGIC_MERGE_PATCH,
        )
        version = cm.metadata.resource_version
        if self._ref is not None and not dry_run:
            self._ref = {**self._ref, "resourceVersion": version}
        return WriteResult(version, dry_run, "server dry run (dryRun=All) accepted" if dry_run else "")

    def record_event(self, notice: ChangeNotice) -> str | None:
        if self._ref is None:
            return None
        return self.kube.record_event(
            involved=self._ref, reason="TrafficSplitChanged", message=notice.message(self.backends),
            warning=notice.emergency,
        )
