"""`opsctl drill run --chain`: the command's body (kept apart so drill_cmd only dispatches)."""

from __future__ import annotations

from pathlib import Path

import click

from opsctl.cli.output import emit


def default_routing(cfg) -> Path:
    """deploy/alertmanager.yml next to the config; for the built-in config, the working directory's."""
    base = Path(cfg.base_dir) if cfg.source_path != "<built-in>" else Path.cwd()
    return base / "deploy" / "alertmanager.yml"


def run_chain(app, scenario, *, live: bool, dry_run: bool, quiet: bool, routing, timeout: str, output: str,
              progress, summary, rel) -> None:
    from opsctl.clock import parse_duration
    from opsctl.errors import GuardRefused, OpsctlError, UsageError

    cfg = app.config
    try:
        seconds = parse_duration(timeout)
    except (ValueError, OpsctlError) as exc:
        raise UsageError(f"--chain-timeout: {exc}") from None
    if not 30 <= seconds <= 3600:
        raise UsageError("--chain-timeout must be between 30s and 1h")
    routing_path = Path(routing) if routing else default_routing(cfg)
    if live or dry_run:
        from opsctl.drills.chain.plan import chain_plan, plan_text

        plan = chain_plan(scenario, cfg, live=live, routing=routing_path, timeout=seconds)
        if dry_run:
            emit(plan, output, table=plan_text)
            if plan["would_refuse"]:
                raise GuardRefused("preflight would refuse this drill: " + "; ".join(
                    c["message"] for c in plan["preflight"] if not c["ok"]))
            return
        from opsctl.drills.chain.live import LiveChainDrill

        drill = LiveChainDrill(scenario, cfg, timeout=seconds, progress=None if quiet else progress)
    else:
        if not routing_path.is_file():
            raise UsageError(f"{routing_path}: no Alertmanager routing to rehearse",
                             hint="pass --routing FILE (your Alertmanager config)")
        from opsctl.drills.chain.runner import ChainDrill

        drill = ChainDrill(scenario, cfg, routing=routing_path, timeout=seconds, progress=None if quiet else progress)
    result = drill.run()
    emit(result.report, output, table=lambda d: summary(d, result.paths))
    if output != "table":
        click.echo(f"report: {rel(result.paths['md'])} (also .json, .html)", err=True)
    if result.exit_code == 4:
        raise GuardRefused(f"drill refused: {result.report.get('refusal')}")
    if result.exit_code:
        raise OpsctlError(f"drill {result.outcome}: " + "; ".join(result.failures[:5]),
                          hint=f"see the report: {rel(result.paths['md'])}")
