"""`opsctl drill run --chain` before the drill runs: the deadline (`--chain-timeout`, bounded, or
None to derive it from the burn-rate prediction), the Alertmanager routing rehearsed, and either a
dry run's plan or the drill to run (local or live). The command renders the plan or runs the drill
and ends as every drill does."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from opsctl.config import Config
    from opsctl.drills.chain.plan import ChainPlan
    from opsctl.drills.chain.runner import ChainDrill
    from opsctl.drills.scenario import Scenario

MIN_TIMEOUT, MAX_TIMEOUT = 30, 3600


def default_routing(cfg: Config, *, write: bool = True) -> Path:
    """Without --routing: the routing `opsctl slo routes` generates from the config in use (its
    automation.policies), written to <state_dir>/drills/alertmanager.yml (not with `write=False`,
    a dry run's). So a chain drill runs from any directory, the built-in config's too."""
    from opsctl.slo.routing import render
    from opsctl.statefile import write_text_atomic

    path = cfg.drills_path / "alertmanager.yml"
    if write:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(path, render(cfg), mode=0o644)
    return path


def chain_timeout(text: str | None) -> int | None:
    """`--chain-timeout` in seconds, 30s to 1h; None when not given (derived once the drill's rules are known)."""
    from opsctl.clock import parse_duration
    from opsctl.errors import OpsctlError, UsageError

    if text is None:
        return None
    try:
        seconds = parse_duration(text)
    except (ValueError, OpsctlError) as exc:
        raise UsageError(f"--chain-timeout: {exc}") from None
    if not MIN_TIMEOUT <= seconds <= MAX_TIMEOUT:
        raise UsageError("--chain-timeout must be between 30s and 1h")
    return seconds


@dataclass
class ChainLaunch:
    """A dry run's `plan` (its `text()` and `to_dict()` rendered by the CLI), or the `drill` to run."""

    plan: ChainPlan | None = None
    drill: ChainDrill | None = None


def launch_chain(scenario: Scenario, cfg: Config, *, live: bool, dry_run: bool, routing: str | None,
                 timeout: str | None, progress: Callable[[str], None] | None) -> ChainLaunch:
    """The plan (`dry_run`) or the chain drill, local or `live` (a LiveChainDrill is a ChainDrill)."""
    from opsctl.errors import UsageError

    seconds = chain_timeout(timeout)
    routing_path = Path(routing) if routing else default_routing(cfg, write=not (live or dry_run))
    if live or dry_run:
        from opsctl.drills.chain.plan import chain_plan

        plan = chain_plan(scenario, cfg, live=live, routing=routing_path, timeout=seconds, generated=not routing)
        if dry_run:
            return ChainLaunch(plan=plan)
        from opsctl.drills.chain.live import LiveChainDrill

        return ChainLaunch(drill=LiveChainDrill(scenario, cfg, timeout=seconds, progress=progress))
    if not routing_path.is_file():
        raise UsageError(f"{routing_path}: no Alertmanager routing to rehearse",
                         hint="pass --routing FILE (your Alertmanager config)")
    from opsctl.drills.chain.runner import ChainDrill

    return ChainLaunch(drill=ChainDrill(scenario, cfg, routing=routing_path, timeout=seconds, progress=progress))
