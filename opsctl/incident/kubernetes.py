"""Incidents on the Kubernetes API: one ConfigMap per incident (`opsctl-<service>-incident-...`)
and the service's index (`opsctl-<service>-incidents`), each write a replace carrying the
resourceVersion read (409 on a concurrent change), fenced by the leader's term, a lost answer
recognised by its write id (the kubernetes state store, opsctl/state/kubernetes.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from opsctl.incident.grouping import DEFAULT_QUIET
from opsctl.incident.store import StateIncidentStore

if TYPE_CHECKING:
    from opsctl.fencing import Term
    from opsctl.traffic.kube import Kube


def kubernetes_incident_store(kube: "Kube", *, namespace: str, service: str, quiet: float = DEFAULT_QUIET,
                              term: "Callable[[], Term | None] | None" = None,
                              clock: Callable[[], float] | None = None) -> StateIncidentStore:
    from opsctl.state.kubernetes import KubernetesStateStore

    return StateIncidentStore(KubernetesStateStore(kube, namespace=namespace, service=service), service=service,
                              quiet=quiet, term=term, clock=clock)


__all__ = ["kubernetes_incident_store"]
