"""`opsctl init [DIR]`: a commented config, its SLOs and drill scenarios that run as they are."""

from __future__ import annotations

import click

from opsctl.cli.output import emit, output_option

HEADER = """\
# Written by `opsctl init`: the embedded default, runnable as it is (no Prometheus, cluster or
# PagerDuty needed). Relative paths below resolve against this file's directory, so the SLOs
# (slos/), the drill scenarios (chaos/) and the state (.opsctl/) live next to it.
#
# Try it:
#   opsctl --config {config} config validate
#   opsctl --config {config} sim generate --days 3 --ahead 1d && opsctl --config {config} slo report
#   opsctl --config {config} drill run vendor-outage
# Then make it yours: name your backends, point metrics.prometheus.url at your Prometheus and set
# metrics.source: prometheus, choose traffic.actuator, paging.provider and tickets.provider.
# `export OPSCTL_CONFIG={config}` saves the --config.
#
"""


def yaml_service(config_text: str) -> str:
    """The `service:` of the shipped default."""
    import yaml

    return str(yaml.safe_load(config_text)["service"])


def unprefixed(slo_text: str, service: str) -> str:
    """A shipped SLO file as init writes it: named without the service (`databricks-availability`,
    not `llm-inference-databricks-availability`), so that the config's `service:` is the one place
    naming the service (the rules' `service` label comes from it; scenarios name SLOs either way)."""
    return slo_text.replace(f"\n  name: {service}-", "\n  name: ", 1)


@click.command()
@click.argument("directory", default=".", type=click.Path(file_okay=False))
@click.option("--force", is_flag=True, help="Overwrite files that already exist.")
@click.option("--dry-run", is_flag=True, help="List the files that would be written; write nothing.")
@output_option
@click.pass_obj
def init(app, directory, force, dry_run, output):
    """Write a commented opsctl.yaml, its SLOs (slos/), drill scenarios (chaos/) and the
    Alertmanager routing its policies generate (alertmanager.yml, `opsctl slo routes`) into DIRECTORY.

    What is written runs as it is on the embedded store: `config validate`, `sim generate`
    then `slo report`, and `drill run vendor-outage` pass. The service is named in one place, the
    config's `service:` (the SLO files name none), so a rename is one edit. Existing files are never overwritten
    without --force (exit 2, naming them).

    \b
    Examples:
      opsctl init ops/ && cd ops && opsctl config validate
      opsctl init --dry-run
    """
    from pathlib import Path

    from opsctl.config.loading import BUILTIN_CONFIG, DEFAULTS_DIR
    from opsctl.errors import UsageError
    from opsctl.statefile import atomic_file

    root = Path(directory)
    if root.exists() and not root.is_dir():
        raise UsageError(f"{directory}: not a directory")
    config_path = root / "opsctl.yaml"
    shown = config_path if root != Path(".") else Path("opsctl.yaml")
    config_text = BUILTIN_CONFIG.read_text("utf-8")
    files: list[tuple[Path, str]] = [(config_path, HEADER.format(config=shown) + config_text)]
    service = yaml_service(config_text)
    for sub, pattern in (("slos", "*.yaml"), ("chaos", "*.yaml"), ("chaos", "README.md")):
        for source in sorted((DEFAULTS_DIR / sub).glob(pattern)):
            if source.is_file():
                text = source.read_text("utf-8")
                files.append((root / sub / source.name, unprefixed(text, service) if sub == "slos" else text))
    # The Alertmanager routing `opsctl slo routes` generates from that config (shipped as package data).
    files.append((root / "alertmanager.yml", (DEFAULTS_DIR / "alertmanager.yaml").read_text("utf-8")))
    existing = [str(p) for p, _ in files if p.exists()]
    if existing and not force:
        raise UsageError(f"would overwrite {len(existing)} file(s): {', '.join(existing[:5])}"
                         + (", ..." if len(existing) > 5 else ""),
                         hint="pass --force to overwrite, or give another directory: opsctl init DIR")
    if not dry_run:
        for path, text in files:
            with atomic_file(path, mode=0o644) as handle:
                handle.write(text)
    data = {"directory": str(root), "config": str(config_path), "dry_run": dry_run,
            "files": [str(p) for p, _ in files]}

    def table(d):
        verb = "would write" if d["dry_run"] else "wrote"
        slos = sum(1 for f in d["files"] if "/slos/" in f or f.startswith("slos/"))
        scenarios = sum(1 for f in d["files"] if f.endswith(".yaml") and ("/chaos/" in f or f.startswith("chaos/")))
        lines = [f"{verb} {d['config']}, {slos} SLO files, {scenarios} drill scenarios and alertmanager.yml"
                 f" under {d['directory']}"]
        if not d["dry_run"]:
            lines.append(f"next: opsctl --config {shown} config validate   (or export OPSCTL_CONFIG={shown})")
        return "\n".join(lines)

    emit(data, output, table=table)
