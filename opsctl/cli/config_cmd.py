"""`opsctl config validate|show`."""

from __future__ import annotations

import click

from opsctl.cli.output import emit, output_option


@click.group()
def config():
    """Validate and show the configuration.

    \b
    Examples:
      opsctl config validate
      opsctl --config prod.yaml config show -o yaml
    """


@config.command()
@output_option
@click.pass_obj
def validate(app, output):
    """Check the config file and the SLO files it points at: types, ranges, unknown keys, SLOs of
    another service (as `slo validate`). Exit 2 with every problem listed.

    A config that is valid but cannot run yet (no SLO file where `slos.dir` points, no split
    stored or configured) is still ok (exit 0), with a warning naming what is missing.
    """
    cfg = app.config
    warnings = readiness_warnings(cfg)
    slo_files = check_slo_files(cfg)
    data = {"config": cfg.source_path, "ok": True, "service": cfg.service, "backends": list(cfg.backends),
            "metric_source": cfg.metrics.source, "state_dir": str(cfg.state_path), "slos": slo_files,
            "warnings": warnings}
    emit(data, output, table=lambda d: "\n".join(
        [f"{d['config']}: ok ({len(d['backends'])} backends, {d['slos']} SLOs, metric source {d['metric_source']})"]
        + [f"warning: {w}" for w in d["warnings"]]))


def check_slo_files(cfg) -> int:
    """How many SLOs `slos.dir` holds, checked as `slo validate` checks them (exit 2 naming each
    problem); 0 when it holds no SLO file (a readiness warning says so)."""
    slo_dir = cfg.slo_dir
    if not slo_dir.is_dir() or not any(p.suffix in (".yaml", ".yml") for p in slo_dir.iterdir()):
        return 0
    from opsctl.slo.loading import load_slos
    from opsctl.slo.service_matcher import check_other_service, check_service_matchers

    slos = load_slos([slo_dir], cfg.backends, config=cfg)
    check_other_service(slos, cfg)
    if cfg.requires_service_matcher:
        check_service_matchers(slos, cfg)
    return len(slos)


def readiness_warnings(cfg) -> list[str]:
    """What a valid config still lacks before the commands can run: each with what to do."""
    warnings = []
    slo_dir = cfg.slo_dir
    if not slo_dir.exists():
        warnings.append(f"slos.dir: {slo_dir} does not exist, so `slo report`, `slo rules` and the budget guard"
                        " have no SLOs (create it, point slos.dir at your SLO files, or run `opsctl init`)")
    elif slo_dir.is_dir() and not any(p.suffix in (".yaml", ".yml") for p in slo_dir.iterdir()):
        warnings.append(f"slos.dir: {slo_dir} holds no *.yaml SLO files")
    if not cfg.traffic.default_split:
        warnings.append("traffic.default_split: not set, so until a split is stored `traffic status` says the split"
                        " is unknown and a failover has nothing to move (set it, e.g. {databricks: 80, internal: 20})")
    return warnings


@config.command()
@output_option
@click.pass_obj
def show(app, output):
    """Print the effective configuration; secrets show where they live, never their value."""
    from opsctl.config import to_dict

    data = to_dict(app.config)
    emit(data, output if output != "table" else "yaml")
