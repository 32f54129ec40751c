"""`opsctl cost report`: cost per million tokens per backend."""

from __future__ import annotations

import click

from opsctl.cli.output import emit, output_option, render_table
from opsctl.cli.source_options import open_checked_source, parse_window, source_options


@click.group()
def cost():
    """What the backends cost per million tokens.

    \b
    Examples:
      opsctl cost report                      # window from cost.window (7d by default)
      opsctl cost report --window 1d -o json
      opsctl cost report --prometheus-url http://prometheus:9090 --window 30d
    """


@cost.command()
@click.option("--window", "window", metavar="DUR", help="Window (default: cost.window).")
@source_options
@output_option
@click.pass_obj
def report(app, window, prometheus_url, source_kind, at, output):
    """Input + output tokens, cost and cost per million tokens per backend, beside the frontier price.

    Internal: replicas x GPUs x hours x GPU hourly price. Vendor: provisioned hourly price x hours,
    or per-million-token prices. Warns when a backend carried too small a share of the tokens
    (cost.min_traffic_share). Exit 3 when a priced backend has no data in the window.

    \b
    Example:
      opsctl cost report --window 7d -o json
    """
    from opsctl.errors import NoDataError
    from opsctl.quality.cost import cost_report

    cfg = app.config
    seconds = parse_window(window or cfg.cost.window)
    source, when = open_checked_source(cfg, source_kind, prometheus_url, at)
    result = cost_report(source, cfg.cost, at=when, window_seconds=seconds, scope=cfg.service_matcher)
    emit(result.to_dict(), output, table=_table)
    if result.no_data:
        raise NoDataError(f"no token or replica data in the window for: {', '.join(result.no_data)}")


def _num(value, fmt):
    return "-" if value is None else format(value, fmt)


def _table(d):
    from opsctl.clock import format_duration

    cur = d["currency"]
    rows = []
    for b in d["backends"]:
        rows.append([b["backend"], b["pricing"], _num(b["input_tokens"], ",.0f"), _num(b["output_tokens"], ",.0f"),
                     _num(b["share"], ".1%"), _num(b["cost"], ",.2f"), _num(b["per_million"], ",.4f"),
                     "-" if b["vs_frontier"] is None else f"{b['vs_frontier']:.2f}x"])
    f = d["frontier"]
    if f:
        rows.append([f"reference: {f['name']}", "frontier", "", "", "",
                     _num(f["cost_for_same_tokens"], ",.2f"), _num(f["price_per_million"], ",.4f"), "1.00x"])
    head = f"Cost over {format_duration(d['window_seconds'])} ending {d['at']} ({cur})"
    table = render_table(["BACKEND", "PRICING", "INPUT TOKENS", "OUTPUT TOKENS", "SHARE", f"COST {cur}",
                          f"{cur} PER 1M TOKENS", "VS FRONTIER"], rows)
    out = [head, "", table]
    basis = [f"  {b['backend']}: {b['basis']}" for b in d["backends"] if b["basis"]]
    if basis:
        out += ["", "Basis:"] + basis
    if d["warnings"]:
        out += [""] + [f"warning: {w}" for w in d["warnings"]]
    return "\n".join(out)
