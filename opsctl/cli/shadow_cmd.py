"""`opsctl shadow report`: is a backend on shadow traffic ready for real traffic?"""

from __future__ import annotations

import click

from opsctl.cli import complete
from opsctl.cli.output import emit, output_option, render_table
from opsctl.cli.source_options import open_checked_source, parse_window, source_options


@click.group()
def shadow():
    """Shadow traffic: compare a mirrored backend with the one serving for real.

    \b
    Examples:
      opsctl shadow report --backend internal
      opsctl shadow report --backend internal --primary databricks --window 2h -o json
      opsctl shadow report --backend internal --share 0.2     # ready to take 20% of traffic?
    """


@shadow.command()
@click.option("--backend", "backend", required=True, metavar="NAME", shell_complete=complete.backends, help="The backend receiving shadow traffic.")
@click.option("--primary", "primary", multiple=True, metavar="NAME", shell_complete=complete.backends,
              help="Backend(s) to compare with (repeatable; default: every other backend).")
@click.option("--window", "window", metavar="DUR", help="Comparison window (default: quality.shadow.window).")
@click.option("--share", type=click.FloatRange(0, 1, min_open=True), default=1.0, show_default=True,
              help="Share of the current real traffic the shadow backend is to take.")
@source_options
@output_option
@click.pass_obj
def report(app, backend, primary, window, share, prometheus_url, source_kind, at, output):
    """Error rate, latency percentiles and load of the shadow backend against the primary.

    Exit 0 when ready, 1 when not ready (the reasons are listed), 3 when a figure has no data.

    \b
    Example:
      opsctl shadow report --backend internal --window 2h --share 0.5
    """
    from opsctl.errors import NoDataError, OpsctlError, UsageError
    from opsctl.quality.shadow import shadow_report

    cfg = app.config
    cfg.backend(backend)
    for name in primary:
        cfg.backend(name)
    if backend in primary:
        raise UsageError(f"--primary {backend} is the shadow backend itself")
    others = [b for b in cfg.backends if b != backend]
    if not others:
        raise UsageError("a shadow report needs at least one other backend to compare with")
    settings = cfg.quality.shadow
    seconds = parse_window(window) if window else settings.window_seconds
    source, when = open_checked_source(cfg, source_kind, prometheus_url, at)
    result = shadow_report(source, shadow=backend, primary=list(primary) or others, real=others, at=when,
                           settings=settings, window_seconds=seconds, share=share, scope=cfg.service_matcher)
    emit(result.to_dict(), output, table=_table)
    if result.verdict == "unknown":
        raise NoDataError(f"{backend}: readiness unknown: " + "; ".join(c.detail for c in result.checks if c.ok is None))
    if result.verdict != "ready":
        raise OpsctlError(f"{backend} is not ready for real traffic ({len(result.reasons)} reason(s))")


def _fmt(name, value):
    if value is None:
        return "-"
    if name.startswith("latency"):
        return f"{value * 1000:.0f} ms"
    if name == "error rate":
        return f"{value:.4%}"
    if name == "load":
        return f"{value:.1f} req/s"
    return f"{value:.0f}"


def _table(data):
    from opsctl.clock import format_duration

    rows = []
    for c in data["checks"]:
        status = "ok" if c["ok"] else ("?" if c["ok"] is None else "FAIL")
        rows.append([c["name"], _fmt(c["name"], c["shadow"]), _fmt(c["name"], c["primary"]),
                     _fmt(c["name"], c["limit"]), status])
    head = (f"Shadow {data['shadow']} vs primary {data['primary']} over {format_duration(data['window_seconds'])} "
            f"ending {data['at']}")
    out = [head, "", render_table(["CHECK", "SHADOW", "PRIMARY", "LIMIT", "STATUS"], rows), ""]
    verdict = data["verdict"].upper()
    if data["verdict"] == "ready":
        out.append(f"Verdict: {verdict} to take {data['share']:.0%} of the current traffic")
    else:
        out.append(f"Verdict: {verdict}")
        out += [f"  - {r}" for r in data["reasons"]]
        out += [f"  - {c['detail']}" for c in data["checks"] if c["ok"] is None and c["detail"] not in data["reasons"]]
    return "\n".join(out)
