"""A fleet of SLOs in a real Prometheus holding the records the generated rules wrote over their
data (docs/decisions/0420-fleet-read-on-coarse-records.md): raw counters every minute, then the
base increases evaluated over them, then the hourly increases and short-window ratios evaluated
over those, each pass written into the TSDB before the next reads it.

Each pass evaluates the generated rules' own expressions with Prometheus' range query at the
rules' evaluation instants (every minute, on the minute): what `promtool tsdb create-blocks-from
rules` does, which cannot read rules backfilled in the same run and writes one block per rule per
2 h (bench/bench_slo_scale.py); here each pass is one `create-blocks-from openmetrics` import.
Shared by tests/slo/test_report_hourly.py and bench/bench_fleet_read.py."""

from __future__ import annotations

import json
import subprocess
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tests.conftest import PrometheusServer, require_binary

STEP = 60  # raw samples and rule evaluations, seconds
PERIOD_DAYS = 7  # the SLOs' default period here: windows 6h, 18h and 7d (the 28-day table scaled by 1/4)
NO_COMPACTION = ["--storage.tsdb.min-block-duration=2h", "--storage.tsdb.max-block-duration=2h",
                 "--query.max-samples=500000000"]
MAX_POINTS = 10_000  # per range query (Prometheus refuses more than 11,000)


@dataclass
class Fleet:
    work: Path
    config: Path
    services: dict[str, list[str]]  # service -> SLO names
    slo_dirs: dict[str, Path]
    requests: dict[str, np.ndarray]  # SLO name -> requests per minute (index i: the sample at ts[i])
    errors: dict[str, np.ndarray]
    ts: np.ndarray  # sample times, on the minute
    end: int  # the newest sample


SLO = """apiVersion: sre.google.com/v2
kind: ServiceLevelObjective
metadata:
  name: {name}
spec:
  description: {name} requests succeed
  backend: prometheus
  method: good_bad_ratio
  exporters: []
  service_level_indicator:
    filter_good: 'bench_requests_total{{service="{service}",slo_id="{name}",code="ok"}}'
    filter_valid: 'bench_requests_total{{service="{service}",slo_id="{name}"}}'
  goal: 0.999
"""


def make_fleet(work: Path, services: int, per_service: int, days: float, end: int, seed: int = 7,
               period_days: int = PERIOD_DAYS) -> Fleet:
    """The SLO files and raw counters of `services` x `per_service` SLOs over `days` before `end`."""
    rng = np.random.default_rng(seed)
    n = int(days * 86400) // STEP
    ts = end - STEP * np.arange(n, -1, -1)
    hours = (ts // 3600) % 24
    names: dict[str, list[str]] = {}
    dirs, requests, errors = {}, {}, {}
    for s in range(services):
        service = f"svc{s:03d}"
        d = work / "slos" / service
        d.mkdir(parents=True)
        dirs[service] = d
        names[service] = []
        for k in range(per_service):
            name = f"{service}-slo{k}"
            (d / f"{name}.yaml").write_text(SLO.format(name=name, service=service))
            rate = rng.uniform(50, 500) * (0.6 + 0.4 * np.sin((hours - 8) / 24 * 2 * np.pi) ** 2)
            req = rng.poisson(rate)
            req[0] = 0
            share = np.where(rng.random(len(ts)) < 0.002, 0.05, 0.0005)  # bursts of 5% errors
            err = rng.binomial(req, share)
            requests[name], errors[name] = req, err
            names[service].append(name)
    config = work / "opsctl.yaml"
    config.write_text(
        "service: svc000\n"
        "backends:\n  internal: {kind: internal}\n"
        "metrics:\n  source: prometheus\n  prometheus: {url: \"http://127.0.0.1:1\", timeout: 120, report_deadline: 600}\n"
        "  max_data_age: 3650d\n"
        f"slos: {{dir: \"{work / 'slos'}\", period: {period_days}d}}\n"
        "alerting: {evaluation_interval: 1m}\n"
        f"state_dir: \"{work / 'state'}\"\n")
    return Fleet(work, config, names, dirs, requests, errors, ts, end)


def raw_openmetrics(fleet: Fleet, path: Path) -> Path:
    with open(path, "w") as out:
        out.write("# TYPE bench_requests counter\n")
        times = fleet.ts.tolist()
        for service, slos in fleet.services.items():
            for name in slos:
                ok = np.cumsum(fleet.requests[name] - fleet.errors[name]).tolist()
                bad = np.cumsum(fleet.errors[name]).tolist()
                for code, values in (("ok", ok), ("error", bad)):
                    labels = f'code="{code}",service="{service}",slo_id="{name}"'
                    out.write("".join(f"bench_requests_total{{{labels}}} {v} {t}\n" for v, t in zip(values, times)))
        out.write("# EOF\n")
    return path


def rules_of(fleet: Fleet):
    """Service -> (plans, the generated main groups' recording rules: (record, expr, labels))."""
    from dataclasses import replace

    from opsctl.config import load_config_file
    from opsctl.slo.loading import load_slos
    from opsctl.slo.rule_plan import RuleSettings, plan_rules
    from opsctl.slo.rules import rule_groups

    cfg = load_config_file(fleet.config)
    out = {}
    for service, d in fleet.slo_dirs.items():
        settings = replace(RuleSettings.from_config(cfg), service=service)
        slos = load_slos([d], cfg.backends)
        plans = plan_rules(slos, settings)
        rules = [(r["record"], r["expr"], r["labels"]) for g in rule_groups(plans, settings)
                 if not g["name"].endswith(("-fast", "-period")) for r in g["rules"] if "record" in r]
        out[service] = (slos, rules)
    return cfg, out


def api(url: str, path: str, params: dict, timeout: float = 600) -> dict:
    body = urllib.parse.urlencode(params).encode()
    with urllib.request.urlopen(f"{url}{path}", data=body, timeout=timeout) as response:
        return json.loads(response.read())["data"]


def evaluate(url: str, rules, start: int, end: int, path: Path) -> int:
    """Each rule's expression at every STEP instant in [start, end], as the rule would record it
    (its labels on the result), written as OpenMetrics gauges. Returns the samples written."""
    families: dict[str, list[str]] = {}
    for record, expr, labels in rules:
        lo = start
        while lo <= end:
            hi = min(end, lo + (MAX_POINTS - 1) * STEP)
            result = api(url, "/api/v1/query_range", {"query": expr, "start": lo, "end": hi, "step": STEP})["result"]
            text = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
            for series in result:
                families.setdefault(record, []).extend(
                    f"{record}{{{text}}} {v} {t}" for t, v in series["values"] if v not in ("NaN", "+Inf", "-Inf"))
            lo = hi + STEP
    with open(path, "w") as out:
        for record, lines in families.items():
            out.write(f"# TYPE {record} gauge\n" + "".join(line + "\n" for line in lines))
        out.write("# EOF\n")
    return sum(len(v) for v in families.values())


def import_blocks(om: Path, data: Path) -> None:
    subprocess.run([require_binary("promtool"), "tsdb", "create-blocks-from", "openmetrics", "-q",
                    "--max-block-duration=744h", str(om), str(data)], check=True, capture_output=True, timeout=1800)


def backfill(fleet: Fleet, short_from: int, log=lambda _msg: None, *, hourly: bool = True) -> tuple[PrometheusServer, dict]:
    """The three passes; returns the server over all of them (compaction off) and the stats.
    `hourly=False`: no hourly increases (rules generated before they existed)."""
    work = fleet.work / "prom"
    data = work / "prom-data"
    data.mkdir(parents=True)
    import_blocks(raw_openmetrics(fleet, fleet.work / "raw.om"), data)
    (fleet.work / "raw.om").unlink()
    _cfg, by_service = rules_of(fleet)
    base = [r for _s, (_slos, rules) in by_service.items() for r in rules
            if ":increase" in r[0] and not r[0].endswith("increase1h")]
    hours = [r for _s, (_slos, rules) in by_service.items() for r in rules if r[0].endswith("increase1h") and hourly]
    ratios = [r for _s, (_slos, rules) in by_service.items() for r in rules if r[0].startswith("slo:sli_error:")]
    start = int(fleet.ts[0])
    stats = {}
    for name, rules, first in (("base", base, start), ("hourly", hours, start), ("ratios", ratios, short_from)):
        server = PrometheusServer(work, extra_args=NO_COMPACTION)
        try:
            om = fleet.work / f"{name}.om"
            stats[name] = evaluate(server.url, rules, first, fleet.end, om)
            log(f"pass {name}: {len(rules)} rules, {stats[name]:,} samples")
        finally:
            server.stop()
        import_blocks(om, data)
        om.unlink()
    return PrometheusServer(work, extra_args=NO_COMPACTION), stats
