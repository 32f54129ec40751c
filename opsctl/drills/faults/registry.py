"""Injector name -> factory. An unknown name is an error, never a fallback to another injector."""

from __future__ import annotations

from typing import Callable

from opsctl.errors import UsageError


def _simulated(cfg, run_id: str, world=None):
    from opsctl.drills.faults.simulated import SimulatedFault

    return SimulatedFault(world)


def _kube(cfg):
    from opsctl.traffic.registry import kube_for

    return kube_for(cfg.traffic.kubernetes, cfg.base_dir)


def _istio(cfg, run_id: str, world=None):
    from opsctl.drills.faults.istio import IstioRouteFault

    return IstioRouteFault(_kube(cfg), api_version=cfg.traffic.istio.api_version, run_id=run_id)


def _scale(cfg, run_id: str, world=None):
    from opsctl.drills.faults.scale import DeploymentScaleFault

    return DeploymentScaleFault(_kube(cfg), run_id=run_id)


# chain-exporter: a local chain drill's fault lives in its exporter and ends with the drill's process.
INJECTORS: dict[str, Callable] = {"simulated": _simulated, "istio-route": _istio, "deployment-scale": _scale,
                                  "chain-exporter": _simulated}


def injector(name: str, cfg, run_id: str, world=None):
    factory = INJECTORS.get(name)
    if factory is None:
        raise UsageError(f"unknown fault injector {name!r} (known: {', '.join(sorted(INJECTORS))})")
    return factory(cfg, run_id, world)


def injector_for_fault(fault, *, live: bool) -> str:
    """Which injector a scenario fault uses in a mode."""
    from opsctl.drills.scenario import LiveScaleFault

    if not live:
        return "simulated"
    return "deployment-scale" if isinstance(fault.live, LiveScaleFault) else "istio-route"
