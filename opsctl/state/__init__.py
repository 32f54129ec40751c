"""Shared state: the one place state that several actors must agree on lives (docs/decisions/0033-the-record-lives-on-the-actuated-object.md).

`open_state_store(cfg)` picks the backend by name from a registry that fails closed."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from opsctl.errors import UsageError
from opsctl.state.base import Document, StateStore

if TYPE_CHECKING:
    from opsctl.config import Config

__all__ = ["Document", "StateStore", "open_state_store", "BACKENDS"]


def _local(cfg: "Config") -> StateStore:
    from opsctl.state.local import LocalStateStore

    return LocalStateStore(cfg.state_path / "state")


def _kubernetes(cfg: "Config") -> StateStore:
    from opsctl.state.kubernetes import KubernetesStateStore
    from opsctl.traffic.registry import kube_for

    settings = cfg.state_kubernetes
    return KubernetesStateStore(kube_for(settings, cfg.base_dir), namespace=cfg.state.namespace or settings.namespace,
                                service=cfg.service)


BACKENDS: dict[str, Callable[["Config"], StateStore]] = {"local": _local, "kubernetes": _kubernetes}


def open_state_store(cfg: "Config") -> StateStore:
    name = cfg.state.backend
    factory = BACKENDS.get(name)
    if factory is None:
        raise UsageError(f"unknown state backend {name!r} (known: {', '.join(sorted(BACKENDS))})")
    return factory(cfg)
