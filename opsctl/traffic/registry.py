"""Actuator name -> factory. An unknown name is an error, never a fallback to some other target."""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Callable

from opsctl.errors import UsageError
from opsctl.traffic.base import Actuator
from opsctl.traffic.split import Split

if TYPE_CHECKING:
    from opsctl.config import Config, KubernetesSettings
    from opsctl.traffic.kube import Kube


@lru_cache(maxsize=4)
def kube_for(settings: "KubernetesSettings", base_dir: str) -> "Kube":
    """One Kubernetes client per settings in a process (the actuator and capacity share it)."""
    from opsctl.traffic.kube import Kube

    return Kube(settings, base_dir)


def _kube(cfg: "Config") -> "Kube":
    return kube_for(cfg.traffic.kubernetes, cfg.base_dir)


def _namespace(cfg: "Config", own: str | None) -> str:
    return own or cfg.traffic.kubernetes.namespace


def _file(cfg: "Config") -> Actuator:
    from opsctl.traffic.file import FileActuator

    t = cfg.traffic
    default = Split.of(t.default_split) if t.default_split else None
    path = cfg.path(t.file.path) if t.file.path.startswith(("/", "~")) else cfg.state_path / t.file.path
    return FileActuator(path, default=default, backends=list(cfg.backends))


def _configmap(cfg: "Config") -> Actuator:
    from opsctl.traffic.configmap import ConfigMapActuator

    s = cfg.traffic.configmap
    return ConfigMapActuator(_kube(cfg), namespace=_namespace(cfg, s.namespace), name=s.name, key=s.key,
                             backends=list(cfg.backends))


def _istio(cfg: "Config") -> Actuator:
    from opsctl.traffic.istio import IstioActuator

    s = cfg.traffic.istio
    return IstioActuator(_kube(cfg), namespace=_namespace(cfg, s.namespace), name=s.name, route=s.route,
                         api_version=s.api_version, destinations=cfg.traffic.destinations, backends=list(cfg.backends))


def _gateway_api(cfg: "Config") -> Actuator:
    from opsctl.traffic.gateway_api import GatewayApiActuator

    s = cfg.traffic.gateway_api
    return GatewayApiActuator(_kube(cfg), namespace=_namespace(cfg, s.namespace), name=s.name, rule=s.rule,
                              api_version=s.api_version, destinations=cfg.traffic.destinations,
                              backends=list(cfg.backends))


def _flagd(cfg: "Config") -> Actuator:
    from opsctl.traffic.flagd import FlagdConfigMapActuator, FlagdFileActuator

    t, s = cfg.traffic, cfg.traffic.flagd
    default = Split.of(t.default_split) if t.default_split else None
    if s.configmap is not None:
        return FlagdConfigMapActuator(_kube(cfg), namespace=_namespace(cfg, s.configmap.namespace),
                                      name=s.configmap.name, key=s.configmap.key, flag=s.flag, default=default,
                                      backends=list(cfg.backends))
    path = cfg.path(s.file_path) if s.file_path.startswith(("/", "~")) else cfg.state_path / s.file_path
    return FlagdFileActuator(path, flag=s.flag, default=default, backends=list(cfg.backends))


ACTUATORS: dict[str, Callable[["Config"], Actuator]] = {
    "file": _file,
    "configmap": _configmap,
    "istio": _istio,
    "gateway-api": _gateway_api,
    "flagd": _flagd,
}
# Targets whose API server validates a dry run (dryRun=All); the others get the no-op actuator.
SERVER_DRY_RUN = {"configmap", "istio", "gateway-api"}


def open_actuator(cfg: "Config", *, dry_run: bool = False, name: str | None = None) -> Actuator:
    """The configured actuator, or the one `name`d (each kind reads its own section of traffic:)."""
    name = name or cfg.traffic.actuator
    factory = ACTUATORS.get(name)
    if factory is None:
        raise UsageError(f"unknown traffic actuator {name!r} (known: {', '.join(sorted(ACTUATORS))})")
    actuator = factory(cfg)
    if dry_run and name not in SERVER_DRY_RUN:
        from opsctl.traffic.noop import DryRunActuator

        return DryRunActuator(actuator)
    return actuator


def open_shadow_actuator(cfg: "Config", *, dry_run: bool = False) -> Actuator | None:
    """`traffic.shadow_actuator`: the mesh object carrying a rollout's mirror share (None: unset)."""
    name = cfg.traffic.shadow_actuator
    return None if name is None else open_actuator(cfg, dry_run=dry_run, name=name)
