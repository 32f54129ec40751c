"""Render results as a table (for people) or JSON / YAML (a stable interface for scripts)."""

from __future__ import annotations

import json
from typing import Any, Callable, Sequence

import click

from opsctl.cli.params import choice

FORMATS = ("table", "json", "yaml")
WIDE = "opsctl.wide"  # click's ctx.meta key: `-o wide` was given (render_table shows every column whole)


def _wide(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """`-o wide` is the table with every column at full width: the command sees "table"."""
    ctx.meta[WIDE] = value == "wide"
    return "table" if value == "wide" else value


output_option = click.option(
    "-o", "--output", "output", type=choice(FORMATS + ("wide",)), default="table", show_default=True,
    callback=_wide, help="Output format; json and yaml are stable for scripts; wide: the table with every column"
                         " whole (a table for a terminal leaves some out to fit, as kubectl does).",
)


def wide_output() -> bool:
    ctx = click.get_current_context(silent=True)
    return bool(ctx is not None and ctx.meta.get(WIDE))


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


def emit_dry_run(data: dict, output: str, what: str = "sent") -> None:
    """A dry run's result shown as the real run shows it (the same key/value table), then the
    exact requests that would go out (secrets redacted), each as indented YAML."""
    if output != "table":
        emit(data, output)
        return
    import yaml

    click.echo(f"dry run: nothing was {what}; this is what would be {what} (secrets redacted):", err=True)
    requests = data.get("requests") or []
    click.echo(_generic({k: v for k, v in data.items() if v is not None and k != "requests"}))
    for i, request in enumerate(requests, 1):
        text = yaml.safe_dump(request, sort_keys=False, default_flow_style=False).rstrip()
        click.echo(f"request {i} of {len(requests)}:\n" + "\n".join("  " + line for line in text.splitlines()))


def cell(value: Any) -> str:
    """A value as a person reads it in a table, never a Python repr: yes/no, `-` for nothing,
    lists comma-joined, mappings as `key=value, ...`."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, (list, tuple, set, frozenset)):
        return ", ".join(cell(v) for v in value) or "-"
    if isinstance(value, dict):
        return ", ".join(f"{k}={cell(v)}" for k, v in value.items()) or "-"
    return str(value)


def terminal_width() -> int | None:
    """The terminal's width when standard output is one (`$COLUMNS` first, as shells set it);
    None for a pipe or a file: what a script reads is never cut."""
    import shutil
    import sys

    try:
        if not sys.stdout.isatty():
            return None
    except (AttributeError, ValueError):
        return None
    return shutil.get_terminal_size().columns


def render_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], width: int | None = None, *,
                 key: int = 0, drop: Sequence[str] = ()) -> str:
    """Columns two spaces apart, fitted to `width` (default: the terminal's, when there is one; none
    with `-o wide` or in a pipe) as kubectl fits them: the `key` column (NAME, what tells the rows
    apart) is never narrowed, wrapped or cut; the others wrap at spaces (headers too); while the row
    is still too wide, the columns named in `drop` are left out, first first, and a last line says
    which (`-o wide` shows them); only then is a word longer than MAX_WORD of another column cut with `…`."""
    cells = [[str(h) for h in headers]] + [["" if c is None else c if isinstance(c, str) else cell(c) for c in r]
                                           for r in rows]
    hidden: list[str] = []
    width = None if wide_output() else terminal_width() if width is None else width
    if width:
        order = [i for h in drop for i, name in enumerate(cells[0]) if name == h and i != key]
        while True:
            widths = _fitted(cells, key, width, cap=not order)
            if _total(widths) <= width or not order:
                break
            gone = order.pop(0)
            hidden.append(cells[0][gone])
            key -= 1 if gone < key else 0
            order = [i - 1 if i > gone else i for i in order]
            cells = [row[:gone] + row[gone + 1:] for row in cells]
    else:
        widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
    lines = []
    for row in cells:
        wrapped = [_wrap(c, w) for c, w in zip(row, widths)]
        for i in range(max(len(w) for w in wrapped)):
            parts = [(w[i] if i < len(w) else "").ljust(n) for w, n in zip(wrapped, widths)]
            lines.append("  ".join(parts).rstrip())
        if row is cells[0]:
            lines.append("  ".join("-" * w for w in widths))
    if hidden:
        import textwrap

        lines.extend(textwrap.wrap(f"({', '.join(hidden)} left out to fit {width} columns: -o wide shows every"
                                   " column)", width or 80, break_long_words=False, break_on_hyphens=False))
    return "\n".join(lines)


def _total(widths: list[int]) -> int:
    return sum(widths) + 2 * (len(widths) - 1)


def _fitted(cells: list[list[str]], key: int, width: int, *, cap: bool) -> list[int]:
    """Each column's width fitted to `width`: the key column whole, the others down to their longest
    word (with `cap`, a word up to MAX_WORD: longer ones are cut)."""
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
    floors = [widths[i] if i == key else
              max([min(len(w), MAX_WORD) if cap else len(w) for row in cells for w in row[i].split()] or [1])
              for i in range(len(widths))]
    return _fit(widths, floors, width)


MAX_WORD = 24  # a column is never narrowed below its header and its longest word up to this


def _fit(widths: list[int], floors: list[int], total: int) -> list[int]:
    """Narrow the widest columns, one character at a time, until the row fits `total` (bounded:
    no column below its floor, the longest word of its cells and header up to MAX_WORD: words
    are wrapped, not cut)."""
    widths = list(widths)
    limit = [min(f, w) for w, f in zip(widths, floors)]
    for _ in range(sum(widths)):
        if _total(widths) <= total:
            break
        candidates = [i for i, w in enumerate(widths) if w > limit[i]]
        if not candidates:
            break
        widest = max(candidates, key=lambda i: widths[i])
        widths[widest] -= 1
    return widths


def _wrap(text: str, width: int) -> list[str]:
    if len(text) <= width:
        return [text]
    import textwrap

    lines = textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False) or [""]
    return [line if len(line) <= width else line[: width - 1] + "…" for line in lines]


def _generic(data: Any) -> str:
    if isinstance(data, list) and data and isinstance(data[0], dict):
        headers = list(data[0])
        return render_table(headers, [[cell(row.get(h)) for h in headers] for row in data])
    if isinstance(data, dict):
        width = max((len(str(k)) for k in data), default=0)
        return "\n".join(f"{str(k).ljust(width)}  {cell(v)}" for k, v in data.items())
    return cell(data)
