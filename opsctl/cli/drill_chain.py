"""`opsctl drill run --chain`: the command's body (kept apart so drill_cmd only dispatches)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from opsctl.drills.chain.runner import ChainDrill


def default_routing(cfg) -> Path:
    """deploy/alertmanager.yml next to the config; for the built-in config, the working directory's."""
    base = Path(cfg.base_dir) if cfg.source_path != "<built-in>" else Path.cwd()
    return base / "deploy" / "alertmanager.yml"


def run_chain(app, scenario, *, live: bool, dry_run: bool, quiet: bool, routing, timeout: str | None, output: str,
              progress, show_plan, finish) -> None:
    """`show_plan(plan, output, text)` renders a dry run, `finish(result, output)` a finished drill:
    the drill command's own, so a chain drill ends as every drill does."""
    from opsctl.clock import parse_duration
    from opsctl.errors import OpsctlError, UsageError

    cfg = app.config
    seconds = None  # not given: derived from the burn-rate prediction once the drill's rules are known
    if timeout is not None:
        try:
            seconds = parse_duration(timeout)
        except (ValueError, OpsctlError) as exc:
            raise UsageError(f"--chain-timeout: {exc}") from None
        if not 30 <= seconds <= 3600:
            raise UsageError("--chain-timeout must be between 30s and 1h")
    routing_path = Path(routing) if routing else default_routing(cfg)
    drill: ChainDrill  # the live one is a ChainDrill too
    if live or dry_run:
        from opsctl.drills.chain.plan import chain_plan, plan_text

        plan = chain_plan(scenario, cfg, live=live, routing=routing_path, timeout=seconds)
        if dry_run:
            show_plan(plan, output, plan_text)
            return
        from opsctl.drills.chain.live import LiveChainDrill

        drill = LiveChainDrill(scenario, cfg, timeout=seconds, progress=None if quiet else progress)
    else:
        if not routing_path.is_file():
            raise UsageError(f"{routing_path}: no Alertmanager routing to rehearse",
                             hint="pass --routing FILE (your Alertmanager config)")
        from opsctl.drills.chain.runner import ChainDrill

        drill = ChainDrill(scenario, cfg, routing=routing_path, timeout=seconds, progress=None if quiet else progress)
    finish(drill.run(), output)
