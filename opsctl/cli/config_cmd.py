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
@click.pass_obj
def validate(app):
    """Check the config file: types, ranges, unknown keys. Exit 2 with every problem listed."""
    cfg = app.config
    click.echo(f"{cfg.source_path}: ok ({len(cfg.backends)} backends, metric source {cfg.metrics.source})")


@config.command()
@output_option
@click.pass_obj
def show(app, output):
    """Print the effective configuration; secrets show where they live, never their value."""
    from opsctl.config import to_dict

    data = to_dict(app.config)
    emit(data, output if output != "table" else "yaml")
