"""Problems a scenario has only against a config: backends, vendors, SLO names, live targets."""

from __future__ import annotations

from opsctl.drills.scenario.model import (FAULT_BACKEND_KIND, LIVE_ROUTE_KINDS, LIVE_SCALE_KINDS, Fault,
                                          LiveRouteFault, Scenario)
from opsctl.errors import ConfigError

def check_against_config(scenario: Scenario, cfg, slo_names: list[str] | None = None, *, live: bool = False) -> list[str]:
    """Backends, vendors, categories, SLO names and live targets the config must know. Returns
    problems as `file: key: message` lines (empty when the scenario fits the config)."""
    problems: list[str] = []
    p = scenario.path
    backends = cfg.backends

    def need_backend(where: str, name: str | None, kind: str | None = None) -> None:
        if name is None:
            return
        if name not in backends:
            problems.append(f"{p}: {where}: unknown backend {name!r} (known: {', '.join(sorted(backends))})")
        elif kind and backends[name].kind != kind:
            problems.append(f"{p}: {where}: {name!r} is a {backends[name].kind} backend; this needs a {kind} one")

    def need_vendor(where: str, name: str | None) -> None:
        if name is not None and name not in cfg.tickets.vendors:
            known = ", ".join(sorted(cfg.tickets.vendors)) or "none configured"
            problems.append(f"{p}: {where}: unknown vendor {name!r} (tickets.vendors: {known})")

    def need_slo(where: str, name: str | None) -> None:
        if name is None or slo_names is None:
            return
        if resolve_slo(name, slo_names, cfg.service) is None:
            problems.append(f"{p}: {where}: unknown SLO {name!r} (known: {', '.join(sorted(slo_names))})")

    for i, a in enumerate(scenario.method):
        where = f"method[{i}]"
        if a.fault is not None:
            kind = FAULT_BACKEND_KIND[a.fault.kind]
            backend = a.fault.backend or default_backend(a.fault.kind, cfg)
            if backend is None:
                problems.append(f"{p}: {where}.fault.backend: name the backend ({a.fault.kind} has no default here)")
            need_backend(f"{where}.fault.backend", backend, kind)
            if live:
                problems.extend(_live_problems(p, f"{where}.fault", a.fault, cfg))
        if a.action == "failover":
            need_backend(f"{where}.from", a.backend)
        if a.action == "traffic-set":
            for b in a.weights:
                need_backend(f"{where}.weights", b)
        if a.action == "file-ticket":
            need_vendor(f"{where}.vendor", a.vendor)
    for i, a in enumerate(scenario.on_call.actions):
        where = f"responders.on-call.actions[{i}]"
        if a.action == "failover":
            need_backend(f"{where}.from", a.backend)
        if a.action == "file-ticket":
            need_vendor(f"{where}.vendor", a.vendor)
    for i, probe in enumerate(scenario.probes):
        where = f"steady-state-hypothesis.probes[{i}]"
        need_backend(f"{where}.backend", probe.backend)
        for name in probe.slos:
            need_slo(f"{where}.slos", name)
        if probe.probe == "traffic-split" and isinstance(probe.tolerance, dict):
            for b in probe.tolerance:
                need_backend(f"{where}.tolerance", b)
    for i, s in enumerate(scenario.stop_conditions):
        where = f"stop-conditions[{i}]"
        need_slo(f"{where}.slo", s.slo)
        need_backend(f"{where}.backend", s.backend)
    for i, e in enumerate(scenario.expectations):
        where = f"expectations[{i}]"
        need_slo(f"{where}.slo", e.slo)
        need_backend(f"{where}.{'from' if e.expect == 'failover-applied' else 'backend'}", e.backend)
        need_vendor(f"{where}.vendor", e.vendor)
    return problems


def _live_problems(p: str, where: str, fault: Fault, cfg) -> list[str]:
    if fault.kind not in LIVE_ROUTE_KINDS + LIVE_SCALE_KINDS:
        return [f"{p}: {where}.kind: {fault.kind} cannot be injected live (no route or scale fault changes a"
                " model's answers): run this drill embedded"]
    if fault.live is None:
        return [f"{p}: {where}.live: a live drill needs to know where to inject {fault.kind}"
                f" ({'namespace, deployment' if fault.kind in LIVE_SCALE_KINDS else 'namespace, virtual-service'})"]
    allowed = cfg.drills.live.fault_namespaces
    if fault.live.namespace not in allowed:
        return [f"{p}: {where}.live.namespace: {fault.live.namespace!r} is not in drills.live.fault_namespaces"
                f" ({', '.join(allowed) or 'empty'}): live faults go to staging namespaces listed there"]
    if isinstance(fault.live, LiveRouteFault):
        ns = cfg.traffic.istio.namespace or cfg.traffic.kubernetes.namespace
        if fault.live.virtual_service == cfg.traffic.istio.name and fault.live.namespace == ns:
            return [f"{p}: {where}.live.virtual-service: {ns}/{cfg.traffic.istio.name} is the traffic split's"
                    " VirtualService; a fault there hits every backend. Name the backend's own route"]
    return []


def default_backend(kind: str, cfg) -> str | None:
    want = FAULT_BACKEND_KIND.get(kind) or "vendor"
    names = [n for n, b in cfg.backends.items() if b.kind == want]
    return names[0] if len(names) == 1 else None


def resolve_slo(name: str, known: list[str], service: str) -> str | None:
    """An SLO by its full name, or without the service prefix (`databricks-availability`)."""
    if name in known:
        return name
    prefixed = f"{service}-{name}"
    return prefixed if prefixed in known else None


def raise_problems(problems: list[str], what: str) -> None:
    if problems:
        raise ConfigError(what, problems=problems)

