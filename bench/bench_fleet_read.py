"""Benchmark: the fleet report (`slo report --all-services`'s reads) on the rules' hourly records
against the old read path on the base records, in one run against one real Prometheus.

The Prometheus holds what the generated rules wrote over minute data (tests/slo/hourly_fleet.py):
raw counters every minute for SERVICES x 9 SLOs over DAYS (+6 h), then the base increases
evaluated over them every minute, then the hourly increases over those and the short-window
ratios over the last 15 minutes, each pass imported before the next is evaluated. This 2-core
machine holds 45 SLOs over 28 days (3.7 M raw samples, as many per recorded pass); 450 SLOs
scale as below.

Measured: the report's wall time (all services, one shared set of grouped reads, as
`--all-services` does), REPEATS runs per path alternating, median and best; the samples the
report's queries read, from Prometheus' own query stats (each expression the report sent,
asked again with `stats=all`: totalQueryableSamples); and the figures' largest difference.

    python bench/bench_fleet_read.py [--services 5] [--days 28] [--no-write]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.results import write_section  # noqa: E402
from tests.slo.hourly_fleet import api, backfill, make_fleet, rules_of  # noqa: E402

REPEATS = 7
HEADING = "## Fleet report on the rules' hourly records (bench_fleet_read.py, {slos} SLOs over {days} days)"


class Recording:
    """A PrometheusSource that keeps every expression opsctl sends (to ask their stats after)."""

    def __init__(self, source):
        self.source, self.exprs = source, []
        self.speaks_promql, self.description = True, source.description

    def query_many(self, exprs, at):
        self.exprs += list(exprs)
        return self.source.query_many(exprs, at)

    def query_grouped(self, exprs, at, labels, *, finite=True):
        self.exprs += list(exprs)
        return self.source.query_grouped(exprs, at, labels, finite=finite)

    def data_start(self, selectors, at, span):
        self.exprs += [f"data_start:{s}" for s in selectors]
        return self.source.data_start(selectors, at, span)


def fleet_report(url, cfg, by_service, at, hourly):
    from opsctl.config import PrometheusSource as PromSettings
    from opsctl.metrics.prometheus import PrometheusSource
    from opsctl.slo.report import build_report, fleet_reads

    source = Recording(PrometheusSource(PromSettings(url=url, timeout=300, report_deadline=900)))
    shared: dict = {}
    t0 = time.perf_counter()
    results = []
    for service, (slos, _rules) in by_service.items():
        results += build_report(slos, source, at, cfg.slos.period_seconds, coverage=True, recorded_interval=60,
                                service=service, reads=fleet_reads(shared, source, at), hourly=hourly)
    return time.perf_counter() - t0, results, source.exprs


def samples_read(url, exprs, at) -> tuple[int, int]:
    total = 0
    for expr in dict.fromkeys(exprs):
        if expr.startswith("data_start:"):
            raise AssertionError(f"the report searched a data start: {expr}")
        total += api(url, "/api/v1/query", {"query": expr, "time": at, "stats": "all"})["stats"]["samples"]["totalQueryableSamples"]
    return total, len(dict.fromkeys(exprs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--services", type=int, default=5, help="services of 9 SLOs each (default 5: 45 SLOs)")
    parser.add_argument("--days", type=int, default=28, help="the SLOs' period and days of data (default 28)")
    parser.add_argument("--no-write", action="store_true", help="print, do not write bench/RESULTS.md")
    args = parser.parse_args()
    at = 1_795_000_000 - 1_795_000_000 % 3600 + 23 * 60
    with tempfile.TemporaryDirectory(prefix="bench-fleet-read-") as tmp:
        work = Path(tmp)
        started = time.monotonic()
        fleet = make_fleet(work, args.services, 9, args.days + 0.25, at, period_days=args.days)
        server, stats = backfill(fleet, short_from=at - 900, log=lambda m: print(m, file=sys.stderr))
        setup = time.monotonic() - started
        try:
            cfg, by_service = rules_of(fleet)
            n = sum(len(s) for s in fleet.services.values())
            fleet_report(server.url, cfg, by_service, at, True)  # warm the page cache for both
            fleet_report(server.url, cfg, by_service, at, False)
            walls = {True: [], False: []}
            for _ in range(REPEATS):
                for mode in (True, False):
                    wall, results, exprs = fleet_report(server.url, cfg, by_service, at, mode)
                    walls[mode].append(wall)
            figures = {}
            read = {}
            for mode in (True, False):
                _w, results, exprs = fleet_report(server.url, cfg, by_service, at, mode)
                figures[mode] = {r.slo.name: r for r in results}
                read[mode] = samples_read(server.url, exprs, at)
            assert all("hourly" in r.long_windows_why for r in figures[True].values())
            gap = max(abs(figures[True][k].counts[w].valid - figures[False][k].counts[w].valid)
                      / figures[False][k].counts[w].valid
                      for k in figures[False] for w in figures[False][k].counts if w in ("1d", "3d", "period"))
            sli_gap = max(abs(figures[True][k].sli - figures[False][k].sli) for k in figures[False])
        finally:
            server.stop()
    med = {m: statistics.median(v) for m, v in walls.items()}
    best = {m: min(v) for m, v in walls.items()}
    per_slo = {m: read[m][0] / n for m in read}
    heading = HEADING.format(slos=n, days=args.days)
    scaled = ("" if n == 450 else f"Scaled linearly from {n} SLOs, 450 would take about {med[True] * 450 / n:.2f} s (median)"
              f" on the hourly records against {med[False] * 450 / n:.1f} s on the base ones (an upper bound: a fixed"
              " per-query and per-service cost is in it).")
    text = f"""{heading}

One real Prometheus 2.42 on 127.0.0.1 (2 shared cores) holding what the generated rules wrote
over {args.days} days (+6 h) of minute data for {n} SLOs ({args.services} services x 9): raw counters, then
the base increases ({stats['base']:,} samples), then the hourly increases ({stats['hourly']:,}) and the
short ratios, each pass evaluated by Prometheus from the previous one's blocks (tests/slo/hourly_fleet.py,
decision 0420). The fleet report (every service, one shared set of grouped reads, as `--all-services`),
{REPEATS} runs per path alternating, after one warm-up each; setup took {setup:.0f} s.

| read path | median | best | queries | samples read (query stats) | per SLO |
| --- | --- | --- | --- | --- | --- |
| hourly records (new) | {med[True] * 1000:.0f} ms | {best[True] * 1000:.0f} ms | {read[True][1]} | {read[True][0]:,} | {per_slo[True]:,.0f} |
| base records (old) | {med[False] * 1000:.0f} ms | {best[False] * 1000:.0f} ms | {read[False][1]} | {read[False][0]:,} | {per_slo[False]:,.0f} |

Ratio old / new: {med[False] / med[True]:.1f}x wall (median), {read[False][0] / read[True][0]:.1f}x samples. Largest
difference of a long window's valid events between the paths: {gap:.1e} relative; of an SLI: {sli_gap:.1e}.

How it scales: both paths send one grouped query per series and window for the whole fleet, so
the queries stay as counted and the samples grow with SLOs: 450 SLOs read {per_slo[True] * 450 / 1e6:.2f} M samples on
the hourly records against {per_slo[False] * 450 / 1e6:.1f} M on the base ones. Per SLO the new path reads one hourly
sample per hour of the period (the coverage count) and of each long window (good and valid), plus the base samples
between the newest hour and `at`, twice per role and window (here `at` is 23 minutes past the hour): it grows with
days x 24, the old path with days x 1440 (the base count and sums).
{scaled}
"""
    print(text)
    if not args.no_write:
        write_section(heading, text)


if __name__ == "__main__":
    main()
