"""Shared state in the Kubernetes API server: one ConfigMap per document.

`opsctl-<service>-<name>` in the configured namespace, JSON in data key `state.json`, labelled for
the app. Every write is compare-and-swap on `metadata.resourceVersion`: a create that finds the
object (409 AlreadyExists), a replace that finds it moved (409 Conflict) or deleted (404) raise
ConflictError and the caller re-reads. A ConfigMap holds at most 1 MiB, so documents are bounded
(MAX_DOCUMENT_BYTES) and writers cap their history. The connection is the actuators' own (kubeconfig,
in-cluster or an explicit host); RBAC: `create` on configmaps, `get` and `update` on the named ones
(an update always carries the metadata.resourceVersion read, so it is never unconditional).

Read your own write: transient failures are retried by `Kube.call` under its deadline, and a write
whose answer was lost may have been applied; when its retry (or the next attempt) meets 409, the
document is read back, and if it carries this write's id (annotation `opsctl.io/write-id`, a nonce
chosen per write: two writers computing the same content stay two writes), the write is taken as done
rather than re-planned from a state that already includes it (a claim recorded but not answered
would otherwise look taken by someone else until its lease ran out). `now()` is the API server's
clock, the one time base every replica shares.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Callable

from opsctl.errors import ConflictError, NoDataError, OpsctlError
from opsctl.state.base import Document, check_name, encode, update_loop
from opsctl.traffic.kube import FIELD_MANAGER

if TYPE_CHECKING:
    from opsctl.traffic.kube import Kube

KEY = "state.json"
WRITE_ID = "opsctl.io/write-id"
APP_LABELS = {"app.kubernetes.io/name": "opsctl", "app.kubernetes.io/managed-by": "opsctl",
              "app.kubernetes.io/component": "state"}


def safe_service(service: str) -> str:
    """The service name as a DNS label fragment (object names and label values)."""
    return ("".join(c if c.isalnum() else "-" for c in service.lower()).strip("-") or "service")[:40].strip("-")


def object_name(service: str, name: str) -> str:
    return f"opsctl-{safe_service(service)}-{name}"


class KubernetesStateStore:
    backend = "kubernetes"

    def __init__(self, kube: "Kube", *, namespace: str, service: str):
        self.kube = kube
        self.namespace = namespace
        self.service = service
        self.where = f"ConfigMaps {object_name(service, '*')} in namespace {namespace}"
        self.own_writes = 0  # writes recognised as applied after their answer was lost

    def _object(self, name: str) -> str:
        return object_name(self.service, check_name(name))

    def _document(self, name: str, cm: Any) -> Document:
        raw = (cm.data or {}).get(KEY)
        if raw is None:
            return Document(name, {}, cm.metadata.resource_version)
        try:
            data = json.loads(raw)
        except ValueError as exc:
            raise NoDataError(f"ConfigMap {self.namespace}/{cm.metadata.name} key {KEY}: not JSON: {exc}") from exc
        if not isinstance(data, dict):
            raise NoDataError(f"ConfigMap {self.namespace}/{cm.metadata.name} key {KEY}: not a JSON object")
        return Document(name, data, cm.metadata.resource_version)

    def get(self, name: str) -> Document | None:
        obj = self._object(name)
        try:
            cm = self.kube.call(f"read state ConfigMap {self.namespace}/{obj}",
                                self.kube.core().read_namespaced_config_map, obj, self.namespace)
        except OpsctlError as exc:
            if getattr(exc, "status", None) == 404:
                return None
            raise
        return self._document(name, cm)

    def put(self, name: str, data: dict[str, Any], *, version: str | None, encoded: str | None = None,
            owned: bool = False) -> Document:
        text = encode(name, data) if encoded is None else encoded
        obj = self._object(name)
        labels = {**APP_LABELS, "opsctl.io/service": safe_service(self.service), "opsctl.io/document": name}
        import os

        write_id = os.urandom(8).hex()
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": obj, "namespace": self.namespace, "labels": labels,
                             "annotations": {WRITE_ID: write_id}},
                "data": {KEY: text}}
        what = f"write state ConfigMap {self.namespace}/{obj}"
        try:
            if version is None:
                cm = self.kube.call(what, self.kube.core().create_namespaced_config_map, self.namespace, body,
                                    field_manager=FIELD_MANAGER)
            else:  # a replace carrying the version read: the API server answers 409 if it moved
                body["metadata"]["resourceVersion"] = version
                cm = self.kube.call(what, self.kube.core().replace_namespaced_config_map, obj, self.namespace, body,
                                    field_manager=FIELD_MANAGER)
        except ConflictError:
            mine = self._own_write(name, write_id)
            if mine is not None:
                return mine
            raise
        except OpsctlError as exc:
            if getattr(exc, "status", None) == 404:  # deleted since it was read: a concurrent change
                raise ConflictError(f"{what}: the document was deleted since it was read") from exc
            raise
        if owned:  # the API server stores the text as sent: no parse of its echo (issue 22)
            return Document(name, data, cm.metadata.resource_version)
        return self._document(name, cm)

    def _own_write(self, name: str, write_id: str) -> Document | None:
        """The document as stored, when it carries `write_id`: this write was applied already."""
        obj = self._object(name)
        try:
            cm = self.kube.call(f"read state ConfigMap {self.namespace}/{obj}",
                                self.kube.core().read_namespaced_config_map, obj, self.namespace)
        except OpsctlError:
            return None
        if ((cm.metadata.annotations or {}).get(WRITE_ID)) == write_id:
            self.own_writes += 1
            return self._document(name, cm)
        return None

    def now(self) -> float:
        return self.kube.server_now()

    def update(self, name: str, change: Callable[[dict[str, Any] | None], dict[str, Any] | None], *, attempts: int = 5) -> Document | None:
        return update_loop(self, name, change, attempts)
