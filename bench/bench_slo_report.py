"""Benchmark: `opsctl slo report` against slo-generator's compute called per SLO and window.

Starts a real Prometheus on 127.0.0.1 backfilled (promtool) with 4 days of 10-second client-side
metrics, derives N distinct SLOs from the shipped ones, and times, at one evaluation instant:
  baseline  slo-generator's compute() for each SLO (all 8 windows, one after another), with a client
            over prometheus-api-client pinned to the same instant: how it is meant to be used;
  opsctl    build_report(): every count fetched up front in batched, bounded-concurrency queries,
            then slo-generator's compute() over the answers.
Checks that both give the same SLI for every SLO and window to 6 decimals, then times opsctl alone
from 20 to 500 SLOs. Appends the figures to bench/RESULTS.md.

    python bench/bench_slo_report.py [--sizes 20,100,500] [--no-write]
"""

from __future__ import annotations

import argparse
import json
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
from tests.conftest import PrometheusServer  # noqa: E402
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


def opsctl_report(slos, url: str, at: float) -> tuple[float, dict]:
    source = PrometheusSource(PromSettings(url=url, timeout=30, report_deadline=120))
    started = time.perf_counter()
    source.check()
    results = build_report(slos, source, at, PERIOD)
    elapsed = time.perf_counter() - started
    sli = {}
    for r in results:
        for window, counts in r.counts.items():
            if counts.has_data and counts.valid:
                sli[(r.slo.name, window)] = round(counts.good / counts.valid, 6)
    return elapsed, sli


def best_of(n, fn, *args):
    runs = [fn(*args) for _ in range(n)]
    return min(r[0] for r in runs), runs[0][1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="20,100,500")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]

    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        traffic = {
            "databricks": d.make_traffic(END, STEPS, 8000, incidents=[(STEPS - 240, STEPS - 1, 0.02)]),
            "internal": d.make_traffic(END, STEPS, 2000, slow=[(STEPS - 900, STEPS - 540)]),
        }
        om = workdir / "traffic.om"
        om.write_text(d.openmetrics(traffic))
        server = PrometheusServer(workdir, openmetrics=om)
        try:
            at = float(END)
            slos20 = derived_slos(20, workdir)
            base_t, base_sli = best_of(3, baseline, slos20, server.url, at)
            ops_t, ops_sli = best_of(3, opsctl_report, slos20, server.url, at)
            assert base_sli.keys() == ops_sli.keys(), "different windows computed"
            mismatches = [k for k in base_sli if round(base_sli[k], 6) != ops_sli[k]]
            assert not mismatches, f"SLIs differ at 6 decimals: {mismatches[:5]}"
            scale = {}
            for n in sizes:
                slos = derived_slos(n, workdir) if n != 20 else slos20
                scale[n] = best_of(2, opsctl_report, slos, server.url, at)[0]
        finally:
            server.stop()

    lines = [
        "## slo report against one Prometheus",
        "",
        f"Prometheus 2.x on 127.0.0.1, 4 days of 10 s data for 2 backends, 28-day period, 8 windows;"
        f" best of 3 runs, measured {time.strftime('%Y-%m-%d')}.",
        "",
        "| 20 SLOs | seconds | ratio |",
        "|---|---|---|",
        f"| slo-generator compute per SLO and window, one after another (baseline) | {base_t:.3f} | 1.00 |",
        f"| opsctl build_report (batched, bounded concurrency) | {ops_t:.3f} | {base_t / ops_t:.1f}x faster |",
        "",
        f"Same SLI for all {len(base_sli)} SLO x window pairs to 6 decimals.",
        "",
        "| SLOs | opsctl seconds | vs 20 SLOs |",
        "|---|---|---|",
    ]
    lines += [f"| {n} | {t:.3f} | {t / scale[sizes[0]]:.1f}x |" for n, t in scale.items()]
    text = "\n".join(lines) + "\n"
    print(text)
    if not args.no_write:
        write_section("## slo report against one Prometheus", text)


if __name__ == "__main__":
    main()
