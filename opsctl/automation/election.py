"""Which elector `opsctl serve` runs, from the config (`open_elector`): none with local state (the only
replica), else the Lease elector (leader.py) with this replica's identity (`identity_for`: the
configured one, the pod's name, the host's) and the Lease's own client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from opsctl.automation.leader import LeaseElector

if TYPE_CHECKING:
    from opsctl.config import Config


def identity_for(cfg: "Config") -> str:
    import os
    import socket

    configured = cfg.automation.leader_election.identity
    return configured or os.environ.get("POD_NAME", "").strip() or socket.gethostname()


def election_enabled(cfg: "Config") -> bool:
    """On with shared state (unless turned off); never with local state, which replicas cannot share."""
    from opsctl.errors import ConfigError

    setting = cfg.automation.leader_election.enabled
    shared = cfg.state.backend == "kubernetes"
    if setting and not shared:
        raise ConfigError(f"{cfg.source_path}: automation.leader_election.enabled needs state.backend: kubernetes"
                          " (replicas elect a leader to act on deliveries they all record in the shared state)")
    return shared if setting is None else setting


def open_elector(cfg: "Config", on_change: Callable[[bool], None] | None = None) -> LeaseElector | None:
    """The elector `opsctl serve` runs, or None when it runs as the only replica."""
    if not election_enabled(cfg):
        return None
    settings = cfg.automation.leader_election
    duration, deadline, retry = settings.seconds
    connection = cfg.state_kubernetes
    namespace = settings.namespace or cfg.state.namespace or connection.namespace
    from opsctl.traffic.kube import Kube

    # The Lease's own client and connection pool (never queued behind the state writers), never
    # re-sending a timed-out write on its own (see the module's docstring).
    return LeaseElector(Kube(connection, cfg.base_dir, resend=False), name=settings.lease_name, namespace=namespace,
                        identity=identity_for(cfg),
                        lease_duration=duration, renew_deadline=deadline, retry_period=retry, on_change=on_change)


__all__ = ["election_enabled", "identity_for", "open_elector"]
