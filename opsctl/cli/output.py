"""Render results as a table (for people) or JSON / YAML (a stable interface for scripts)."""

from __future__ import annotations

import json
from typing import Any, Callable, Sequence

import click

from opsctl.cli.params import choice

FORMATS = ("table", "json", "yaml")

output_option = click.option(
    "-o", "--output", "output", type=choice(FORMATS), default="table", show_default=True,
    help="Output format; json and yaml are stable for scripts.",
)


def emit(data: Any, fmt: str, table: Callable[[Any], str] | None = None) -> None:
    if fmt == "json":
        click.echo(json.dumps(data, indent=2, sort_keys=False, default=str))
    elif fmt == "yaml":
        import yaml

        from opsctl.model.types import yaml_safe

        yaml_safe(yaml.SafeDumper)  # a config read from the parse cache never loaded the YAML module's setup
        click.echo(yaml.safe_dump(data, sort_keys=False, default_flow_style=False).rstrip())
    else:
        click.echo(table(data) if table else _generic(data))


def render_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _generic(data: Any) -> str:
    if isinstance(data, list) and data and isinstance(data[0], dict):
        headers = list(data[0])
        return render_table(headers, [[row.get(h) for h in headers] for row in data])
    if isinstance(data, dict):
        width = max((len(str(k)) for k in data), default=0)
        return "\n".join(f"{str(k).ljust(width)}  {v}" for k, v in data.items())
    return str(data)
