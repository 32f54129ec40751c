"""Helpers for the burn-rate rule tests: traffic as promtool input series, a `promtool test rules`
runner, and an oracle that works out from the raw per-step counts which alerts Prometheus fires.

The oracle is written from the alerting maths and Prometheus' documented semantics, not from opsctl:
over a window w ending at t, good and valid are the sums of the steps ending in (t - w, t] (for 1d
and 3d, the sums of the 5m increases recorded at every minute of the window, as the rules do); the
error ratio is 1 - good/valid; a pair holds when both windows burn above the factor
(budget share x period / long window) and valid requests per second over the short window reach
the minimum; an alert fires once its pair held at every evaluation over its `for:`.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml

from tests.conftest import require_binary
from tests.slo import data as d

STEP = 10
LE_LABELS = ("0.05", "0.1", "0.2", "0.3", "0.5", "0.75", "1.0", "2.0", "5.0", "10.0", "+Inf")
LE_INDEX = {"0.5": 4, "1.0": 6}
PERIOD_DAYS = 28
# (severity, long, short, long seconds, short seconds, budget share): Google's pairs.
PAIRS = (
    ("page", "1h", "5m", 3600, 300, 0.02),
    ("page", "6h", "30m", 21600, 1800, 0.05),
    ("ticket", "1d", "2h", 86400, 7200, 0.10),
    ("ticket", "3d", "6h", 259200, 21600, 0.10),
)
ALERTNAME = {"page": "SloBurnRatePage", "ticket": "SloBurnRateTicket"}
# Windows the rules derive from 5m increases recorded every minute (weighted by traffic).
RECORDED = ("1d", "3d")
RUNBOOK_BASE = "https://runbooks.test/llm"

# The alerting section the tests run with, stated here so the figures below can be read off it.
FOR_MINUTES = {"page": 2, "ticket": 15}
MIN_RATE = {"page": 1.0, "ticket": 0.1}
MIN_BAD = {"page": 10.0, "ticket": 10.0}  # below MIN_RATE, this many bad events over the short window
ALERTING_CONFIG = f"""\
alerting:
  evaluation_interval: 1m
  runbook_base_url: {RUNBOOK_BASE}/
  page: {{for_duration: 2m, min_request_rate: 1.0, min_bad_events: 10}}
  ticket: {{for_duration: 15m, min_request_rate: 0.1, min_bad_events: 10}}
"""


def factor(share: float, long_seconds: int) -> float:
    return share * PERIOD_DAYS * 86400 / long_seconds


# ---------------------------------------------------------------------------------------------
# Traffic


def traffic(requests, server_errors=None, le_good=None) -> d.Traffic:
    """Per-step counts starting at step 1 (ts 10 s). `le_good`: {"0.5": counts, "1.0": counts}; other
    buckets follow the nearest given one, +Inf is every request."""
    requests = np.asarray(requests, dtype=np.int64)
    n = len(requests)
    errors = np.zeros(n, dtype=np.int64) if server_errors is None else np.asarray(server_errors, dtype=np.int64)
    le_good = le_good or {}
    under_half = np.asarray(le_good.get("0.5", requests), dtype=np.int64)
    under_one = np.asarray(le_good.get("1.0", requests), dtype=np.int64)
    le = np.empty((len(LE_LABELS), n), dtype=np.int64)
    for i in range(len(LE_LABELS)):
        le[i] = under_half if i <= 4 else under_one if i <= 6 else requests
    ts = np.arange(1, n + 1, dtype=np.int64) * STEP
    return d.Traffic(ts, requests, errors, le)


def shifted(t: d.Traffic, base: int) -> d.Traffic:
    return d.Traffic(t.ts + base, t.requests, t.server_errors, t.le)


# ---------------------------------------------------------------------------------------------
# promtool


def encode(values) -> str:
    """Cumulative values -> promtool's expanding notation ('0+10x59 605+5x60'); no value repeated."""
    values = [int(v) for v in values]
    parts, i = [], 0
    while i < len(values):
        if i == len(values) - 1:
            parts.append(str(values[i]))
            break
        step = values[i + 1] - values[i]
        j = i + 1
        while j + 1 < len(values) and values[j + 1] - values[j] == step:
            j += 1
        parts.append(f"{values[i]}{step:+d}x{j - i}")
        i = j + 1
    return " ".join(parts)


def input_series(data: dict[str, d.Traffic]) -> list[dict]:
    """Cumulative counters from time 0 (value 0) with a sample every 10 s, as the proxy exposes them."""

    def cumulative(per_step):
        return np.concatenate([[0], np.cumsum(per_step)])

    out = []
    for backend, t in data.items():
        out.append({"series": f'llm_proxy_requests_total{{backend="{backend}",outcome="ok"}}',
                    "values": encode(cumulative(t.requests - t.server_errors))})
        out.append({"series": f'llm_proxy_requests_total{{backend="{backend}",outcome="server_error"}}',
                    "values": encode(cumulative(t.server_errors))})
        for i, le in enumerate(LE_LABELS):
            out.append({"series": f'llm_proxy_request_duration_seconds_bucket{{backend="{backend}",le="{le}"}}',
                        "values": encode(cumulative(t.le[i]))})
        out.append({"series": f'llm_proxy_request_duration_seconds_count{{backend="{backend}"}}',
                    "values": encode(cumulative(t.requests))})
    return out


def minute(m: int) -> str:
    return f"{m}m"


def run_promtool_test(workdir: Path, rules_file: Path, series: list[dict], alert_tests: list[dict],
                      promql_tests: list[dict] | None = None, interval: str = "10s") -> subprocess.CompletedProcess:
    """Write a `promtool test rules` file next to the rules and run it; evaluation every minute,
    a sample of every input series each `interval` (the proxy's 10 s scrape)."""
    promtool = require_binary("promtool")
    groups = [g["name"] for g in (yaml.safe_load(rules_file.read_text()) or {}).get("groups", [])]
    test = {
        "rule_files": [str(rules_file)],
        "evaluation_interval": "1m",  # promtool 2.42 ignores a group's interval: state it here
        # Without an order promtool evaluates groups at one instant in map order: the period group
        # would read the base increases recorded at that instant only sometimes. The generated
        # order (each SLO's group, then its period group) is the one the expected figures assume.
        **({"group_eval_order": groups} if groups else {}),
        "tests": [{
            "interval": interval,
            "input_series": series,
            "alert_rule_test": alert_tests,
            "promql_expr_test": promql_tests or [],
        }],
    }
    path = workdir / f"{rules_file.stem}.test.yaml"
    # libyaml's emitter where PyYAML has it: every minute's expected alerts are megabytes of YAML
    # (4.6 s of pure-Python CPU for the equivalence test's, 0.8 s so), the same document either way.
    path.write_text(yaml.dump(test, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), sort_keys=False, width=1000))
    return subprocess.run([promtool, "test", "rules", str(path)], capture_output=True, text=True, timeout=600)


# ---------------------------------------------------------------------------------------------
# The oracle


@dataclass(frozen=True)
class Slo:
    name: str
    backends: tuple[str, ...]
    kind: str  # availability | latency-500ms | latency-1s
    goal: float
    backend_label: str

    @property
    def category(self) -> str:
        return "availability" if self.kind == "availability" else "latency"

    def good_valid(self, data: dict[str, d.Traffic]) -> tuple[np.ndarray, np.ndarray]:
        good = valid = 0
        for b in self.backends:
            t = data[b]
            if self.kind == "availability":
                good = good + (t.requests - t.server_errors)
            else:
                good = good + t.le[LE_INDEX["0.5" if self.kind == "latency-500ms" else "1.0"]]
            valid = valid + t.requests
        return np.asarray(good, dtype=np.int64), np.asarray(valid, dtype=np.int64)


def slo(name: str) -> Slo:
    """One of the SLOs in slos/, by its short name like 'internal-availability'."""
    backend, _, kind = name.partition("-")
    backends = ("databricks", "internal") if backend == "service" else (backend,)
    goal = {"availability": 0.9999, "latency-500ms": 0.99, "latency-1s": 0.999}[kind]
    return Slo(f"llm-inference-{name}", backends, kind, goal, "all" if backend == "service" else backend)


@dataclass
class Firing:
    minute: int
    slo: str
    severity: str
    long: str
    short: str
    burn: float
    labels: dict = field(default_factory=dict)


def expected_alerts(data: dict[str, d.Traffic], slos: list[Slo], minutes: range) -> dict[int, list[Firing]]:
    """Alerts firing at each evaluation minute (times relative to the start of the data)."""
    holds: dict[tuple, dict[int, float | None]] = {}
    first = min(minutes[0], 0)
    for s in slos:
        good, valid = s.good_valid(data)
        ts = next(iter(data.values())).ts
        five: dict[int, tuple[int, int, bool]] = {}  # minute -> the 5m increase recorded then
        for sev, long, short, long_s, short_s, share in PAIRS:
            f = factor(share, long_s)
            series = {}
            for m in range(first, minutes[-1] + 1):
                t = m * 60

                def sums(w, t=t):
                    mask = (ts > t - w) & (ts <= t)
                    return int(good[mask].sum()), int(valid[mask].sum()), bool(mask.any())

                def recorded(w):
                    """1d and 3d: the sum of the 5m increases recorded at each minute in (t - w, t]
                    (from minute 1 on: a 5m increase needs two samples), good over valid."""
                    g = v = 0
                    seen = False
                    for k in range(max(1, m - w // 60 + 1), m + 1):
                        if k not in five:
                            five[k] = sums(300, k * 60)
                        g5, v5, present = five[k]
                        g, v, seen = g + g5, v + v5, seen or present
                    return g, v, seen

                g_long, v_long, any_long = recorded(long_s) if long in RECORDED else sums(long_s)
                g_short, v_short, any_short = sums(short_s)
                if not (any_long and any_short) or v_long == 0 or v_short == 0:
                    series[m] = None
                    continue
                burn_long = (1 - g_long / v_long) / (1 - s.goal)
                burn_short = (1 - g_short / v_short) / (1 - s.goal)
                rate = v_short / short_s
                # the traffic clause: enough requests, or (few of them) enough bad events; the bad
                # count as the rule writes it, recorded ratio x recorded rate x seconds
                enough = rate >= MIN_RATE[sev] or (1 - g_short / v_short) * rate * short_s >= MIN_BAD[sev]
                ok = burn_long > f and burn_short > f and enough
                series[m] = burn_long if ok else None
            holds[(s, sev, long, short)] = series
    out: dict[int, list[Firing]] = {m: [] for m in minutes}
    for (s, sev, long, short), series in holds.items():
        for m in minutes:
            span = range(m - FOR_MINUTES[sev], m + 1)
            if all(series.get(k) is not None for k in span):
                labels = {"slo": s.name, "backend": s.backend_label, "service": "llm-inference",
                          "severity": sev, "category": s.category, "long_window": long, "short_window": short}
                out[m].append(Firing(m, s.name, sev, long, short, series[m], labels))
    return out


# How a summary names each cause (docs/design.md, "Shapes the open work shares", 1).
CAUSE_WORDS = {"server_error": "server errors (5xx)", "timeout": "timeouts", "auth": "auth failures (401/403)",
               "capacity": "throttled (429/503 Retry-After: capacity)", "latency": "slow answers (latency)"}


def cause_of(f: Firing) -> str:
    """The traffic these tests build fails only with 5xx: availability alerts name server_error."""
    return "latency" if f.labels["category"] == "latency" else "server_error"


def summary(f: Firing, factor_text: str, cause: str | None = None) -> str:
    who = "llm-inference" if f.labels["backend"] == "all" else f.labels["backend"]
    return (f"{who}: {CAUSE_WORDS[cause or cause_of(f)]} at {f.burn:.2f}x over {f.long}"
            f" ({f.slo} {f.severity} above {factor_text}x over {f.long} and {f.short})")


FACTOR_TEXT = {"1h": "13.44", "6h": "5.6", "1d": "2.8", "3d": "0.9333"}  # 4 significant digits, as every output prints them


def static_annotations(rules_doc: dict) -> dict[tuple[str, str, str], dict]:
    """(slo, long, short) -> the rule's annotations that hold no template (description, runbook_url)."""
    out = {}
    for group in rules_doc["groups"]:
        for rule in group["rules"]:
            if "alert" in rule and "long_window" in rule["labels"]:
                key = (rule["labels"]["slo"], rule["labels"]["long_window"], rule["labels"]["short_window"])
                out[key] = {k: v for k, v in rule["annotations"].items() if "{{" not in v}
    return out


def alert_tests(expected: dict[int, list[Firing]], rules_doc: dict,
                severities=("page", "ticket"), cause_for=None) -> list[dict]:
    """One promtool alert test per minute and severity: exactly these alerts, with their annotations.
    `cause_for(firing)`: the cause the alert should name (default: cause_of, 5xx-only traffic)."""
    cause_for = cause_for or cause_of
    static = static_annotations(rules_doc)
    tests = []
    for m, firing in expected.items():
        for sev in severities:
            exp = []
            for f in firing:
                if f.severity != sev:
                    continue
                burn = f"{f.burn:.2f}"
                exp.append({
                    "exp_labels": dict(f.labels),
                    "exp_annotations": {**static[(f.slo, f.long, f.short)],
                                        "summary": summary(f, FACTOR_TEXT[f.long], cause_for(f)),
                                        "burn_rate": burn, "cause": cause_for(f)},
                })
            tests.append({"eval_time": minute(m), "alertname": ALERTNAME[sev], "exp_alerts": exp})
    return tests


def first_minute(expected: dict[int, list[Firing]], slo_name: str, long: str) -> int | None:
    for m in sorted(expected):
        if any(f.slo == slo_name and f.long == long for f in expected[m]):
            return m
    return None
