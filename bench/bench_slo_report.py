"""Benchmark: `opsctl slo report` against slo-generator's compute called per SLO and window, and
`opsctl slo report --all-services` for a fleet of 50 services x 9 SLOs.

Part 1 (20 SLOs, side by side in one run): a real Prometheus on 127.0.0.1 backfilled (promtool) with
4 days of 10-second client-side metrics, and the generated rules' records (`opsctl slo rules`: the
5m base increases over the 4 days, the short windows' error ratios at the report's instant)
evaluated over them by `promtool tsdb create-blocks-from rules`. Timed at one instant:
  baseline  slo-generator's compute() for each SLO (all 8 windows, one after another), with a client
            over prometheus-api-client pinned to the same instant: how it is meant to be used (raw);
  opsctl    build_report() as `slo report` runs it (no --cross-check): the recorded series read
            grouped, one query per recorded series and window for all SLOs.
Recorded and raw agree exactly only where the rules were evaluated at the instant read and on the
raw samples' grid. promtool evaluates a group at a fixed offset within its interval (Prometheus'
hash of the group's name and file, to the millisecond): with the samples on a 10-second grid ending
at a whole minute, the records fell 5.594 s off the grid, the short windows' ratios read at the
instant came from the evaluation 54.4 s before it, and every increase() between grid points was
extrapolated, so the 30m-1d SLIs differed from the raw ones at the 6th decimal. So the chosen
records go into one group, its offset is probed first (promtool on `vector(1)` under the same group
name and file, its samples' timestamps read back with `promtool tsdb dump`), and the raw samples
are laid on a grid ending at one of that group's evaluation instants, the instant of the report.
Both servers are timed only once Prometheus has merged the record blocks into the raw one (see
with_records). The data are steady for over 5 minutes around every long window's edges (the recorded 1d-28d sums
count each window's first and last 4 minutes in part). Both must then give the same SLI for every
SLO and window to 6 decimals, or the bench writes its figures marked not valid and exits 1. The
period window's start lies before the 4 days of data, so nothing there makes up for the newest 4
minutes counted in part: the report corrects that edge from raw (`Recorded.newest_edge`, one raw
query per role and SLO; before, 4 of the 160 pairs differed by 1 in the 6th decimal).

Part 2 (fleet): 50 services x the shipped 9 SLOs (450), their recorded series synthesized at a
1-hour step over 29 days (tests/slo/test_report_fleet.py; 28 days of 10 s raw data for 450 SLOs
does not fit this machine), `opsctl slo report --all-services` run in-process, the instant-query
requests counted by Prometheus itself. Appends the figures to bench/RESULTS.md.

    python bench/bench_slo_report.py [--services 10,50] [--no-write]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.results import write_section  # noqa: E402
from opsctl.config import PrometheusSource as PromSettings  # noqa: E402
from opsctl.metrics.prometheus import PrometheusSource  # noqa: E402
from opsctl.slo.loading import load_slos  # noqa: E402
from opsctl.slo.report import build_report, report_windows  # noqa: E402
from tests.conftest import PrometheusServer, require_binary, run_opsctl, write_config  # noqa: E402
from tests.slo import data as d  # noqa: E402

END = 1_795_000_000
STEPS = 4 * 8640
PERIOD = 28 * 86400


def derived_slos(count: int, workdir: Path):
    """`count` distinct SLOs: the shipped nine, each made distinct by a no-op matcher."""
    base = sorted((REPO / "slos").glob("*.yaml"))
    out = workdir / f"slos{count}"
    out.mkdir()
    for i in range(count):
        text = base[i % len(base)].read_text()
        text = text.replace("name: llm-inference-", f"name: bench{i}-llm-inference-")
        text = text.replace("'llm_proxy_requests_total{", f"'llm_proxy_requests_total{{bench!=\"{i}\",")
        text = text.replace("'llm_proxy_request_duration_seconds_bucket{", f"'llm_proxy_request_duration_seconds_bucket{{bench!=\"{i}\",")
        text = text.replace("'llm_proxy_request_duration_seconds_count{", f"'llm_proxy_request_duration_seconds_count{{bench!=\"{i}\",")
        text = text.replace("'llm_proxy_request_duration_seconds_count'", f"'llm_proxy_request_duration_seconds_count{{bench!=\"{i}\"}}'")
        (out / f"slo{i:04d}.yaml").write_text(text)
    return load_slos([out], ["internal", "databricks"])


class PinnedClient:
    """The client slo-generator calls, over prometheus-api-client, pinned to one instant."""

    def __init__(self, url: str, at: float):
        from prometheus_api_client import PrometheusConnect

        self.prom = PrometheusConnect(url=url)
        self.at = at

    def query(self, metric: str) -> str:
        result = self.prom.custom_query(metric, params={"time": f"{self.at:.3f}"})
        return json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}})


def baseline(slos, url: str, at: float) -> tuple[float, dict]:
    import logging

    from slo_generator.compute import compute

    logging.getLogger("slo_generator").setLevel(logging.CRITICAL)
    steps = [{"name": n, "window": s, "burn_rate_threshold": 1, "alert": False, "message_alert": "a",
              "message_ok": "b"} for n, s in report_windows(PERIOD).items()]
    shared = {"backends": {"prometheus": {}}, "error_budget_policies": {"default": {"steps": steps}}}
    client = PinnedClient(url, at)
    sli = {}
    started = time.perf_counter()
    for slo in slos:
        for report in compute(slo.slo_generator_config(), json.loads(json.dumps(shared)), timestamp=at, client=client):
            sli[(slo.name, report["error_budget_policy_step_name"])] = report.get("sli_measurement")
    return time.perf_counter() - started, sli


INTERVAL = 60  # the rules' evaluation interval (write_config's)
SERVICE = "llm-inference"  # the shipped SLOs' service_name: the label their records carry


def opsctl_report(slos, url: str, at: float) -> tuple[float, dict]:
    """`slo report` without --cross-check: the recorded series read grouped by (service, slo)."""
    source = PrometheusSource(PromSettings(url=url, timeout=30, report_deadline=120))
    started = time.perf_counter()
    source.check()
    results = build_report(slos, source, at, PERIOD, recorded_interval=INTERVAL, service=SERVICE)
    elapsed = time.perf_counter() - started
    sli = {}
    for r in results:
        assert r.long_windows == "recorded", r.long_windows_why
        for window, counts in r.counts.items():
            if counts.has_data and counts.valid and counts.good is not None:
                sli[(r.slo.name, window)] = round(counts.good / counts.valid, 6)
    return elapsed, sli


GROUP = "bench-records"


def eval_offset_ms(workdir: Path, rules_file: Path) -> int:
    """Where promtool evaluates GROUP from `rules_file` (the offset hashes both) within each INTERVAL, in milliseconds past the
    minute: probed with `vector(1)` under that group and file over a few intervals, read back from
    the blocks with `promtool tsdb dump`."""
    import re

    promtool = require_binary("promtool")
    rules_file.write_text(f"groups:\n- name: {GROUP}\n  rules:\n  - record: bench_probe\n    expr: vector(1)\n")
    (workdir / "probe").mkdir()
    server = PrometheusServer(workdir / "probe")
    try:
        out = workdir / "probe-blocks"
        done = subprocess.run([promtool, "tsdb", "create-blocks-from", "rules", f"--start={END - 600}", f"--end={END}",
                               f"--url={server.url}", f"--output-dir={out}", f"--eval-interval={INTERVAL}s",
                               str(rules_file)], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
    finally:
        server.stop()
    (out / "wal").mkdir(exist_ok=True)  # `tsdb dump` opens the WAL a backfill does not write
    dump = subprocess.run([promtool, "tsdb", "dump", str(out)], capture_output=True, text=True, timeout=120)
    assert dump.returncode == 0, dump.stderr
    stamps = [int(m) for m in re.findall(r"^\{__name__=\"bench_probe\"\} 1 (\d+)$", dump.stdout, re.M)]
    offsets = {t % (INTERVAL * 1000) for t in stamps}
    assert len(stamps) >= 5 and len(offsets) == 1, f"promtool's evaluation instants: {stamps}"
    return offsets.pop()


def shifted(text: str, ms: int) -> str:
    """OpenMetrics samples with whole-second timestamps moved `ms` milliseconds later (ms < 1000 * INTERVAL)."""
    seconds, frac = divmod(ms, 1000)
    lines = []
    for line in text.splitlines():
        if line.startswith("#"):
            lines.append(line)
        else:
            head, ts = line.rsplit(" ", 1)
            lines.append(f"{head} {int(ts) + seconds}.{frac:03d}")
    return "\n".join(lines) + "\n"


def with_records(workdir: Path, raw: PrometheusServer, slo_dir: Path, at: float, rules_file: Path) -> PrometheusServer:
    """A second Prometheus over the same raw data plus the generated rules' records evaluated over
    it by promtool: the 5m base increases over the 4 days, the short windows' ratios near `at`
    (promtool's last evaluation falls before --end: half an interval past `at` evaluates at it)."""
    import yaml

    promtool = require_binary("promtool")
    cfg = write_config(workdir, slo_dir=slo_dir)
    rules = workdir / "rules.yaml"
    out = run_opsctl("--config", str(cfg), "slo", "rules", str(slo_dir), "--out", str(rules), cwd=REPO)
    assert out.exit_code == 0, out.stderr
    groups = [g for g in yaml.safe_load(rules.read_text())["groups"] if not g["name"].endswith(("-period", "-fast"))]
    short = tuple(f"slo:sli_error:ratio_rate{w}" for w in ("5m", "30m", "1h", "2h", "6h"))
    blocks = workdir / "rule-blocks"
    for kept, start in ((lambda r: r.get("record", "").endswith(":increase5m"), int(at) - STEPS * 10),
                        (lambda r: r.get("record", "") in short, int(at) - 600)):
        # one group (GROUP, at rules_file): one evaluation offset, the one eval_offset_ms() probed
        rules_file.write_text(yaml.safe_dump({"groups": [{"name": GROUP, "rules": [
            r for g in groups for r in g["rules"] if kept(r)]}]}, sort_keys=False))
        done = subprocess.run([promtool, "tsdb", "create-blocks-from", "rules", f"--start={start}",
                               f"--end={int(at) + INTERVAL // 2}", f"--url={raw.url}", f"--output-dir={blocks}",
                               f"--eval-interval={INTERVAL}s", str(rules_file)], capture_output=True, text=True, timeout=1800)
        assert done.returncode == 0, done.stdout + done.stderr
    rec = workdir / "rec"
    rec.mkdir()
    shutil.copytree(raw.data, rec / "prom-data")
    for block in blocks.iterdir():
        shutil.copytree(block, rec / "prom-data" / block.name)
    server = PrometheusServer(rec)
    # promtool writes the records as 2 h blocks (some 2,000 here) over the raw block's hours: until
    # Prometheus has merged them (vertical compaction, from a minute after start) every query opens
    # them all, and the merge itself takes the CPU. Timed before it, opsctl took 0.6-1.3 s instead of
    # 0.10-0.14 s on the same data; a Prometheus that has run its rules for a month has no such blocks.
    server.wait_compacted(timeout=900)
    return server


def fleet_run(catalog: Path, at: int) -> tuple[float, list]:
    from opsctl.clock import format_rfc3339

    started = time.perf_counter()
    result = run_opsctl("--catalog", str(catalog), "slo", "report", "--all-services", "--at", format_rfc3339(at),
                        "-o", "json")
    elapsed = time.perf_counter() - started
    assert result.exit_code == 0, result.stderr
    return elapsed, json.loads(result.stdout)


def fleet(workdir: Path, count: int) -> dict:
    """`slo report --all-services` over `count` services x the shipped 9 SLOs, recorded series only."""
    from tests.slo.test_report_fleet import AT, backfilled_prometheus, query_requests, write_fleet, write_openmetrics

    names = [f"svc{i:02d}" for i in range(count)]
    root = workdir / f"fleet{count}"
    catalog, families, expected = write_fleet(root, names, "http://127.0.0.1:1",
                                              templates=sorted((REPO / "slos").glob("*.yaml")))
    om = write_openmetrics(root / "recorded.om", families)
    server = backfilled_prometheus(root / "prom", om)
    try:
        defaults = catalog / "_defaults.yaml"
        defaults.write_text(defaults.read_text().replace("http://127.0.0.1:1", server.url))
        before = query_requests(server.url)
        (best, median), rows = best_of(3, fleet_run, catalog, AT)
        requests = (query_requests(server.url) - before) // 3
    finally:
        server.stop()
    assert len(rows) == len(expected) == 9 * count
    wrong = [r["name"] for r in rows if abs(r["sli"] - expected[(r["service"], r["name"])]["sli"]) > 1e-12]
    assert not wrong, f"fleet SLIs differ from the synthesized series: {wrong[:5]}"
    return {"slos": len(rows), "best": best, "median": median, "requests": requests}


def best_of(n, fn, *args):
    """(best, median) of n runs' seconds, and the first run's answer."""
    import statistics

    runs = [fn(*args) for _ in range(n)]
    times = [r[0] for r in runs]
    return (min(times), statistics.median(times)), runs[0][1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--services", default="10,50")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--fleet-only", action="store_true", help="Only the fleet part (part 1 is not run).")
    args = parser.parse_args()
    counts = [int(s) for s in args.services.split(",")]
    if args.fleet_only:
        with tempfile.TemporaryDirectory() as tmp:
            fleets = {n: fleet(Path(tmp), n) for n in counts}
        write_fleet_section(fleets, counts, args.no_write, None)
        return

    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        rules_file = workdir / "records-rules.yaml"
        offset = eval_offset_ms(workdir, rules_file)
        minute = END - END % INTERVAL
        at = minute + offset / 1000  # one of the records' evaluation instants, the last sample's
        traffic = {  # the incident ends 30 minutes before the instant: steady around every window's edges
            "databricks": d.make_traffic(minute, STEPS, 8000, incidents=[(STEPS - 420, STEPS - 181, 0.02)]),
            "internal": d.make_traffic(minute, STEPS, 2000, slow=[(STEPS - 900, STEPS - 540)]),
        }
        om = workdir / "traffic.om"
        om.write_text(shifted(d.openmetrics(traffic), offset))
        (workdir / "raw").mkdir()
        raw = PrometheusServer(workdir / "raw", openmetrics=om)
        recorded = None
        try:
            slos20 = derived_slos(20, workdir)
            (workdir / "records").mkdir()
            recorded = with_records(workdir / "records", raw, workdir / "slos20", at, rules_file)
            from tests.slo.test_report_fleet import query_requests

            before = query_requests(raw.url), query_requests(recorded.url)
            base_t, base_sli = best_of(3, baseline, slos20, raw.url, at)
            ops_t, ops_sli = best_of(3, opsctl_report, slos20, recorded.url, at)
            requests = ((query_requests(raw.url) - before[0]) // 3, (query_requests(recorded.url) - before[1]) // 3)
            assert base_sli.keys() == ops_sli.keys(), "different windows computed"
            mismatches = [k for k in base_sli if round(base_sli[k], 6) != ops_sli[k]]
            for k in mismatches:
                print(f"differs: {k}: slo-generator {base_sli[k]!r}, opsctl {ops_sli[k]!r}", file=sys.stderr)
        finally:
            raw.stop()
            if recorded:
                recorded.stop()
        fleets = {n: fleet(workdir, n) for n in counts}

    part1 = [
        "**20 SLOs, side by side in one run.** 4 days of 10 s data for 2 backends, 28-day period, 8 windows. The"
        " baseline reads the raw series; opsctl reads the generated rules' records (the 5m base increases over the"
        " 4 days and the short windows' ratios, evaluated over the same raw data by `promtool tsdb"
        " create-blocks-from rules`), grouped: one query per recorded series and window for all 20 SLOs.",
        "",
        "| 20 SLOs | best s | median s | best vs baseline |",
        "|---|---|---|---|",
        f"| slo-generator compute per SLO and window, one query after another (baseline) | {base_t[0]:.3f} | {base_t[1]:.3f} | 1.00 |",
        f"| opsctl build_report, no --cross-check, the recorded series read grouped | {ops_t[0]:.3f} | {ops_t[1]:.3f}"
        f" | {base_t[0] / ops_t[0]:.1f}x faster (median {base_t[1] / ops_t[1]:.1f}x) |",
        "",
        f"Instant-query requests per run: slo-generator {requests[0]}, opsctl {requests[1]}.",
        "",
        f"Same SLI for all {len(base_sli)} SLO x window pairs to 6 decimals." if not mismatches else
        f"**Not a valid ratio: {len(mismatches)} of {len(base_sli)} SLO x window pairs differ at 6 decimals**"
        f" ({', '.join(f'{n} {w}: {base_sli[(n, w)]:.7f} vs {ops_sli[(n, w)]:.6f}' for n, w in mismatches)}).",
        "",
    ]
    write_fleet_section(fleets, counts, args.no_write, part1)
    if mismatches:
        raise SystemExit(f"SLIs differ at 6 decimals: {mismatches}")


def write_fleet_section(fleets: dict, counts: list[int], no_write: bool, part1: list[str] | None) -> None:
    lines = [
        "## slo report against one Prometheus",
        "",
        f"`python bench/bench_slo_report.py`: Prometheus 2.42 on 127.0.0.1, 3 runs each, best and median, measured"
        f" {time.strftime('%Y-%m-%d')} on 2 cores shared with other engineers' test runs.",
        "",
    ] + (part1 or [
        "**20 SLOs against slo-generator: not measured in this run** (`--fleet-only`).",
        "",
    ]) + [
        "**The fleet: `opsctl slo report --all-services`**, N services x the shipped 9 SLOs, their recorded series"
        " synthesized at a 1-hour step over 29 days (evaluation interval 1h), run in-process through the CLI"
        " (config and SLO files of every service loaded, one probe per service); requests are the instant-query"
        " requests Prometheus counted per run. Every SLI equals the synthesized series' to 1e-12.",
        "",
        "| services | SLOs | instant-query requests | best s | median s | best vs the smallest |",
        "|---|---|---|---|---|---|",
    ]
    first = fleets[counts[0]]["best"]
    lines += [f"| {n} | {f['slos']} | {f['requests']} | {f['best']:.3f} | {f['median']:.3f} | {f['best'] / first:.1f}x |"
              for n, f in fleets.items()]
    lines += ["", "Requests stay at two whatever the number of SLOs (the recorded samples counted, then every window's"
              " sums and ratios, for all SLOs at once); the time grows with the SLOs through loading their files"
              " and the answers' size, not through queries."]
    text = "\n".join(lines) + "\n"
    print(text)
    if not no_write:
        write_section("## slo report against one Prometheus", text)



if __name__ == "__main__":
    main()
