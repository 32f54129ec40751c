"""What keeps a drill from becoming an outage: the real world's state before and during the drill.

Preflight refuses to start while a real (non-drill) incident is open on the configured pager or a
burn-rate alert fires on the configured metrics; `real-incident-open` stop conditions poll the same
pager during the drill. "Real" always means the user's configuration, never the drill's own ledgers.
In live mode a check that cannot be made refuses the drill (no data is never healthy); an embedded
drill touches nothing real, so there a metric store that does not exist yet is noted, not fatal.
"""

from __future__ import annotations

from dataclasses import dataclass

from opsctl.errors import NoDataError, OpsctlError
from opsctl.paging.base import DRILL_PREFIX


@dataclass
class Check:
    """One preflight check. `skipped`: it could not run and does not refuse (shown as such, never "ok")."""

    name: str
    ok: bool
    message: str
    skipped: bool = False

    @property
    def status(self) -> str:
        return "skipped" if self.skipped else "ok" if self.ok else "REFUSED"

    def to_dict(self) -> dict:
        return {"name": self.name, "ok": self.ok, "status": self.status, "message": self.message}


def is_drill_incident(incident) -> bool:
    return (incident.dedup_key or "").startswith("opsctl-drill-") or (incident.title or "").startswith(DRILL_PREFIX)


def real_incidents(user_cfg) -> list:
    """Open incidents on the configured pager that are not drills."""
    from opsctl.paging.registry import open_pager

    pager = open_pager(user_cfg)
    listing = getattr(pager, "open_incidents", None)
    if listing is None:
        raise OpsctlError(f"pager {pager.name} cannot list open incidents")
    return [i for i in listing() if not is_drill_incident(i)]


def check_real_incidents(user_cfg) -> Check:
    try:
        found = real_incidents(user_cfg)
    except OpsctlError as exc:
        return Check("no real incident open", False, f"cannot tell whether a real incident is open: {exc.message}")
    if found:
        names = "; ".join(f"{i.id} {i.title!r} ({i.status})" for i in found[:3])
        return Check("no real incident open", False, f"{len(found)} real incident(s) open: {names}")
    return Check("no real incident open", True, f"no open incident on the {user_cfg.paging.provider} pager")


def check_real_alerts(user_cfg, *, strict: bool) -> Check:
    """No burn-rate alert firing on the configured metrics, at the source's evaluation instant."""
    from opsctl.metrics.base import open_source
    from opsctl.slo.alerts import evaluate_alerts
    from opsctl.slo.loading import load_slos
    from opsctl.slo.rule_plan import RuleSettings

    name = "no burn-rate alert firing"
    try:
        source = open_source(user_cfg)
        source.check()
        at = source.default_time()
    except NoDataError as exc:
        if strict:
            return Check(name, False, f"cannot tell whether burn-rate alerts fire: {exc.message}")
        return Check(name, True, f"not checked: {exc.message} (an embedded drill touches no real traffic)",
                     skipped=True)
    try:
        slos = load_slos([user_cfg.slo_dir], user_cfg.backends, config=user_cfg)
        result = evaluate_alerts(slos, source, at, RuleSettings.from_config(user_cfg))
    except OpsctlError as exc:
        return Check(name, False, f"cannot evaluate burn-rate alerts on {source.description}: {exc.message}")
    if result.firing:
        names = "; ".join(f"{a.alertname} {a.slo} {a.long_window}/{a.short_window}" for a in result.firing[:3])
        return Check(name, False, f"{len(result.firing)} burn-rate alert(s) firing on {source.description}: {names}")
    if strict and result.unknown:
        return Check(name, False, f"no data for {', '.join(sorted(result.unknown))} on {source.description}")
    return Check(name, True, f"none firing on {source.description}")
