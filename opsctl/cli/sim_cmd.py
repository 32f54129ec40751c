"""`opsctl sim generate`: simulated client-side traffic into the embedded store."""

from __future__ import annotations

import click

from opsctl.cli.output import emit, output_option, render_table
from opsctl.cli.params import TIME
from opsctl.metrics import schema
from opsctl.metrics.simulator import DEFAULT_PEAK_RPS, DEFAULT_SEED, INCIDENT_SPEC_HELP


@click.group()
def sim():
    """Simulate the LLM proxy's client-side metrics into the embedded store.

    \b
    Examples:
      opsctl sim generate --days 28 --seed 7
      opsctl sim generate --days 7 --incident 'vendor-5xx@end-2h+30m:rate=0.2'
    """


GENERATE_HELP = """Simulate DAYS of 10-second aggregates per backend and replace that range in the store.

Traffic follows a weekday/weekend pattern in US Eastern time up to --peak-rps, dips on US
holidays, ramps steeply on Monday mornings, and is split between the backends as the config's
traffic.default_split says (or --split). Each
backend gets its own latency and error distribution; incidents change only their window.

\b
Examples:
  opsctl sim generate                                  # 28 days up to now, seed 0
  opsctl sim generate --days 28 --seed 7 --ahead 1d    # and a day past now: the traffic guards stay fed
  opsctl sim generate --days 7 --end 2026-11-27T00:00:00Z --seed 7 --peak-rps 200000
  opsctl sim generate --split databricks=50,internal=50 --openmetrics-out history.om
  opsctl sim generate --incident 'vendor-5xx@2026-11-20T14:00Z+30m:backend=databricks,rate=0.2'
  opsctl sim generate --incident 'latency-spike@end-3h+20m:factor=4' \\
                      --incident 'gpu-capacity-loss@end-1h+15m:rate=0.05,factor=2.5'

""" + INCIDENT_SPEC_HELP


@sim.command(help=GENERATE_HELP)
@click.option("--days", type=click.FloatRange(min=0, min_open=True, max=400), default=28.0, show_default=True,
              help="Length of the simulated range, ending at --end.")
@click.option("--end", "end_at", type=TIME, help="End of the range: RFC 3339 with a zone, or now, now-7d, -7d, now-1h30m"
                                                                 " (default: now, rounded down to 10 s).")
@click.option("--ahead", "ahead", metavar="DUR", default="0s", show_default=True,
              help="Also simulate DUR past --end, the same traffic continued, so what needs fresh data (the"
                   " traffic guards' metrics.max_data_age) keeps working that long, e.g. 1d. Incidents"
                   " `end-...` stay relative to --end.")
@click.option("--seed", type=click.IntRange(min=0), default=DEFAULT_SEED, show_default=True,
              help="Random seed: the same seed and flags give the same data.")
@click.option("--peak-rps", type=click.FloatRange(min=0, min_open=True, max=1e7), default=DEFAULT_PEAK_RPS,
              show_default=True, help="Weekday peak of the whole service in requests/s (production peaks at 200000).")
@click.option("--split", "split_text", metavar="NAME=PCT,...",
              help="Traffic split between backends, summing to 100 (default: the config's traffic.default_split,"
                   " else vendor 80, internal 20).")
@click.option("--incident", "incident_specs", metavar="SPEC", multiple=True,
              help="Inject an incident (repeatable); see Incident SPEC above.")
@click.option("--openmetrics-out", type=click.Path(dir_okay=False, writable=True), metavar="FILE",
              help="Also write the data as OpenMetrics text (for promtool tsdb create-blocks-from openmetrics);"
                   " about 30 MB per simulated day. Progress shows on a terminal; the size is printed.")
@click.option("--dry-run", is_flag=True, help="Simulate and summarise, but write nothing to the store.")
@output_option
@click.pass_obj
def generate(app, days, end_at, ahead, seed, peak_rps, split_text, incident_specs, openmetrics_out, dry_run, output):
    import time

    from opsctl.clock import format_rfc3339, parse_duration, wall_now
    from opsctl.errors import UsageError
    from opsctl.metrics import simulator

    try:
        ahead_seconds = parse_duration(ahead)
    except ValueError as exc:
        raise UsageError(f"--ahead: {exc}") from None
    if not 0 <= ahead_seconds <= 30 * 86400:
        raise UsageError(f"--ahead: {ahead} is out of range (0s to 30d)")
    cfg = app.config
    backends = {name: b.kind for name, b in cfg.backends.items()}
    end = end_at if end_at is not None else wall_now()
    end = int(end) // simulator.STEP * simulator.STEP
    start = end - max(1, round(days * 86400 / simulator.STEP)) * simulator.STEP  # whole steps
    if split_text:
        split = simulator.parse_split(split_text)
    elif cfg.traffic.default_split:  # the service's own split: a 100/0 service gets 100/0 data
        split = {name: float(share) for name, share in cfg.traffic.default_split.items()}
    else:
        split = simulator.default_split(backends)
    split = simulator.check_split(split, backends)
    incidents = [simulator.parse_incident(spec, backends, end=end) for spec in incident_specs]
    end += ahead_seconds // simulator.STEP * simulator.STEP  # incidents stay placed relative to --end

    def progress(message: str) -> None:
        click.echo(message, err=True)

    progress(f"simulating {format_rfc3339(start)} .. {format_rfc3339(end)} at peak {peak_rps:g} requests/s")
    began = time.perf_counter()
    series = simulator.simulate(start, end, backends=backends, split=split, peak_rps=peak_rps, seed=seed,
                                incidents=incidents, progress=progress)
    store_path = cfg.state_path / "metrics.sqlite"
    if not dry_run:
        from opsctl.metrics.embedded import EmbeddedStore

        store = EmbeddedStore.open(store_path, create=True)
        try:
            simulator.write_to_store(store, series, mode="replace", progress=progress)
        finally:
            store.close()
    openmetrics_bytes = None
    if openmetrics_out:
        import os

        meter = ExportMeter(openmetrics_out) if output == "table" and click.get_text_stream("stderr").isatty() else None
        samples = simulator.export_openmetrics(series, openmetrics_out, progress=meter, labels=cfg.service_labels)
        if meter:
            meter.done()
        openmetrics_bytes = os.path.getsize(openmetrics_out)
        progress(f"wrote {samples:,} OpenMetrics samples ({format_bytes(openmetrics_bytes)}) to {openmetrics_out}")
    elapsed = time.perf_counter() - began

    any_series = next(iter(series.values()))
    summary = {
        "start": format_rfc3339(int(any_series.timestamps[0]) - simulator.STEP),
        "end": format_rfc3339(int(any_series.timestamps[-1])),
        "steps": len(any_series),
        "seed": seed,
        "peak_rps": peak_rps,
        "store": None if dry_run else str(store_path),
        "openmetrics": openmetrics_out,
        "openmetrics_bytes": openmetrics_bytes,
        "seconds": round(elapsed, 2),
        "backends": [
            {"backend": name, "split": split[name], "requests": s.requests(), "outcomes": s.outcome_totals()}
            for name, s in series.items()
        ],
        "incidents": [i.to_dict() for i in incidents],
    }
    emit(summary, output, table=_table)


def format_bytes(size: int) -> str:
    """847213056 -> '847.2 MB' (decimal units, as `ls -h --si` and disk quotas say them)."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} B"


class ExportMeter:
    """One self-rewriting stderr line while the OpenMetrics export runs, for a person at a terminal:
    share done, bytes so far and the size it will reach. At most a few updates a second."""

    def __init__(self, path: str, interval: float = 0.25):
        import time

        self.path = path
        self.interval = interval
        self.clock = time.monotonic
        self.last = float("-inf")
        self.shown = False

    def __call__(self, done: int, total: int, written: int) -> None:
        now = self.clock()
        if now - self.last < self.interval and done < total:
            return
        self.last = now
        share = done / total if total else 1.0
        expected = written / share if share else 0
        click.echo(f"\rwriting {self.path}: {share:4.0%} {format_bytes(written)} of ~{format_bytes(int(expected))}",
                   err=True, nl=False)
        self.shown = True

    def done(self) -> None:
        if self.shown:
            click.echo("", err=True)


def _table(summary: dict) -> str:
    lines = [
        f"simulated {summary['start']} .. {summary['end']} ({summary['steps']:,} steps of 10 s, "
        f"seed {summary['seed']}, peak {summary['peak_rps']:g} requests/s) in {summary['seconds']} s",
        f"store: {summary['store'] or '(dry run: nothing written)'}",
    ]
    if summary["openmetrics"]:
        lines.append(f"openmetrics: {summary['openmetrics']} ({format_bytes(summary['openmetrics_bytes'])})")
    rows = []
    for b in summary["backends"]:
        bad = sum(b["outcomes"].get(o, 0) for o in schema.BAD_OUTCOMES)
        valid = b["requests"] - b["outcomes"]["client_error"]
        rows.append([b["backend"], f"{b['split']:g}%", f"{b['requests']:,}", f"{bad:,}",
                     f"{(1 - bad / valid) * 100:.4f}%" if valid else "-"])
    lines += ["", render_table(["backend", "split", "requests", "failed", "availability"], rows)]
    if summary["incidents"]:
        lines += ["", render_table(["incident", "backend", "start", "end", "spec"],
                                   [[i["kind"], i["backend"], i["start"], i["end"], i["spec"]]
                                    for i in summary["incidents"]])]
    return "\n".join(lines)
