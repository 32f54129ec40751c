"""Benchmark: `opsctl serve`, delivery-to-actuator latency under 50 concurrent deliveries (file actuator).

A running `opsctl serve` (subprocess, loopback) with the live executor: file actuator, local pager
and ticket ledgers, one day of healthy metrics in the embedded store for the guards. Each round
sends 50 Alertmanager deliveries at once from 50 threads released by one barrier, each on its own
kept-alive HTTP connection (as Alertmanager's client keeps them): one page-level
availability alert on databricks (the trigger) and 49 other alerts (ticket-level burn alerts of
every SLO and backend, none matching a policy, each its own delivery and fingerprint, a third of
them about databricks and so queued on the trigger's worker). Measured per round:

  delivery -> actuator   from just before the trigger's POST to the audit entry of the applied
                         failover (written right after the file actuator's atomic write)
  answer                 each of the 50 POSTs' round trip (202 = recorded and queued)

Then the trigger resolves, the policy restores the split (hold-down 0), and the next round starts.
Appends the figures under "## serve" in bench/RESULTS.md (other sections are kept).

    python bench/bench_serve.py [--rounds 100] [--no-write]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.results import write_section  # noqa: E402
from opsctl.metrics.embedded import EmbeddedStore  # noqa: E402
from tests.automation.helpers import (  # noqa: E402
    FAILOVER_POLICY, Serve, alert, audit, bearer, message, request, split, write_serve_config,
)
from tests.slo import data as d  # noqa: E402

CONCURRENCY = 50
END = 1_795_000_000
DEFAULT = {"databricks": 80, "internal": 20}
FAILED_OVER = {"databricks": 0, "internal": 100}

EXTRA = """\
traffic:
  actuator: file
  default_split: {databricks: 80, internal: 20}
  rate_limit: {max_changes: 1000, window: 1h}
capacity: {backend: internal, source: static, replicas: 10, rps_per_replica: 150, headroom: 0.25, max_replicas: 10}
freezes: []
paging: {provider: local}
tickets:
  provider: local
  vendors:
    databricks:
      categories: {inference: Model Serving}
      severities: {Sev1: S1, Sev2: S2, Sev3: S3, Sev4: S4}
"""


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))
    return ordered[int(rank) - 1]


def wait(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.005)
    raise RuntimeError(f"timed out waiting for {what}")


def noise(round_no: int) -> list[dict]:
    """49 ticket-level alerts of every SLO and backend: recorded, matched against the policy, no action."""
    slos = ["availability", "latency-500ms", "latency-1s"]
    backends = ["databricks", "internal", "all"]
    out = []
    for i in range(CONCURRENCY - 1):
        backend = backends[i % 3]
        slo = f"llm-inference-{'service' if backend == 'all' else backend}-{slos[(i // 3) % 3]}"
        out.append(alert(fingerprint=f"{round_no:06x}{i:04x}", alertname="SloBurnRateTicket", severity="ticket",
                         slo=slo, backend=backend, starts_at=f"2026-11-29T12:{round_no % 60:02d}:00.{i:03d}Z",
                         long_window="1d"))
    return out


def failover_row(workdir: Path, round_no: int) -> dict:
    """The service's own record of the round's failover: when its delivery arrived, when it started."""
    import sqlite3

    conn = sqlite3.connect(f"file:{workdir / 'state' / 'automation' / 'automation.sqlite'}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT received_at, started_at, finished_at FROM actions WHERE action = 'failover'"
                            " ORDER BY id").fetchall()
    finally:
        conn.close()
    if len(rows) <= round_no:
        return None
    received_at, started_at, finished_at = rows[round_no]
    return {"received_at": received_at, "started_at": started_at, "finished_at": finished_at}


def closed_episodes(workdir: Path) -> int:
    import sqlite3

    conn = sqlite3.connect(f"file:{workdir / 'state' / 'automation' / 'automation.sqlite'}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT COUNT(*) FROM episodes WHERE state = 'closed'").fetchone()[0]
    finally:
        conn.close()


def run(rounds: int, workdir: Path) -> dict:
    (workdir / "state").mkdir(parents=True)
    store = EmbeddedStore.open(workdir / "state" / "metrics.sqlite", create=True)
    try:
        d.write(store, {b: d.make_traffic(END, 8640, n) for b, n in {"databricks": 8000, "internal": 2000}.items()})
    finally:
        store.close()
    config = write_serve_config(workdir, policies=FAILOVER_POLICY, extra=EXTRA,
                                automation_extra="hold_down: 0s\nqueue_size: 1000\nworkers: 2\n")
    server = Serve(config)
    trigger_ms: list[float] = []
    answer_ms: list[float] = []
    stages: dict[str, list[float]] = {"sent -> received": [], "received -> worker starts the failover": [],
                                      "failover: guards, actuator write, audit": []}
    try:
        pool = ThreadPoolExecutor(CONCURRENCY)
        # Like Alertmanager, each sender keeps its HTTP connection open between deliveries.
        connections = [http.client.HTTPConnection("127.0.0.1", server.port, timeout=30) for _ in range(CONCURRENCY)]
        for r in range(rounds):
            starts = f"2026-11-29T{10 + r // 3600 % 10:02d}:{r // 60 % 60:02d}:{r % 60:02d}.5Z"
            trigger = alert(fingerprint=f"ff{r:06x}", starts_at=starts)
            payloads = [message(trigger, group_key=f"trigger-{r}")] + [
                message(a, group_key=f"noise-{r}-{i}") for i, a in enumerate(noise(r))]
            bodies = [json.dumps(p).encode() for p in payloads]
            barrier = threading.Barrier(CONCURRENCY)
            sent = [0.0] * CONCURRENCY

            def deliver(i: int) -> float:
                conn = connections[i]
                barrier.wait(10)
                sent[i] = time.time()
                t0 = time.perf_counter()
                conn.request("POST", "/v1/alertmanager", body=bodies[i], headers=bearer())
                response = conn.getresponse()
                body = response.read()
                if response.status != 202:
                    raise RuntimeError(f"delivery answered {response.status}: {body[:200]!r}")
                return (time.perf_counter() - t0) * 1000

            answers = list(pool.map(deliver, range(CONCURRENCY)))
            answer_ms += answers
            applied = wait(lambda: [e for e in audit(workdir) if e["action"] == "failover" and e["outcome"] == "applied"
                                    ][r:] or None, 30, "the failover")
            trigger_ms.append((applied[0]["ts"] - sent[0]) * 1000)
            row = wait(lambda: failover_row(workdir, r), 30, "the failover's record")
            stages["sent -> received"].append((row["received_at"] - sent[0]) * 1000)
            stages["received -> worker starts the failover"].append((row["started_at"] - row["received_at"]) * 1000)
            stages["failover: guards, actuator write, audit"].append((applied[0]["ts"] - row["started_at"]) * 1000)
            assert split(workdir) == FAILED_OVER
            resolved = message(alert(fingerprint=f"ff{r:06x}", starts_at=starts, status="resolved"),
                               group_key=f"trigger-{r}")
            assert request(f"{server.url}/v1/alertmanager", json.dumps(resolved).encode(), headers=bearer()).status == 202
            wait(lambda: split(workdir) == DEFAULT and closed_episodes(workdir) == r + 1, 30, "the restore")
            wait(lambda: server.metrics().get("opsctl_automation_queue_depth") == 0, 30, "an idle queue")
        pool.shutdown()
        for conn in connections:
            conn.close()
        metrics = server.metrics()
    finally:
        server.stop()
    failed = metrics.get('opsctl_automation_events_total{result="failed"}', 0)
    return {
        "rounds": rounds,
        "trigger_ms": trigger_ms,
        "answer_ms": answer_ms,
        "stages": stages,
        "events_done": metrics.get('opsctl_automation_events_total{result="done"}', 0),
        "events_failed": failed,
    }


def summarize(result: dict) -> str:
    t, a = result["trigger_ms"], result["answer_ms"]
    cpu = platform.processor() or platform.machine()
    return "\n".join([
        "## serve",
        "",
        f"`opsctl serve` on 127.0.0.1, live executor on the file actuator (local pager and ticket ledgers, guards over"
        f" one day of embedded metrics), 2 workers; {result['rounds']} rounds of {CONCURRENCY} concurrent Alertmanager"
        f" deliveries (1 page-level availability alert that fails over + {CONCURRENCY - 1} ticket-level alerts), then"
        f" resolve and restore; {os.cpu_count()} CPUs ({cpu}), 1-minute load average {result['load'][0]:.1f} before and"
        f" {result['load'][1]:.1f} after (the machine is shared), measured {time.strftime('%Y-%m-%d')}.",
        "",
        "| latency (ms) | p50 | p99 | max | samples |",
        "|---|---|---|---|---|",
        f"| delivery -> actuator (failover applied) | {statistics.median(t):.1f} | {percentile(t, 99):.1f} |"
        f" {max(t):.1f} | {len(t)} |",
        f"| delivery answered (202) | {statistics.median(a):.1f} | {percentile(a, 99):.1f} | {max(a):.1f} | {len(a)} |",
        *(f"| &nbsp;&nbsp;trigger: {name} | {statistics.median(v):.1f} | {percentile(v, 99):.1f} | {max(v):.1f} |"
          f" {len(v)} |" for name, v in result["stages"].items()),
        "",
        f"Target p99 < 100 ms for delivery -> actuator: {'met' if percentile(t, 99) < 100 else 'NOT met'}."
        f" Events handled: {result['events_done']:.0f} done, {result['events_failed']:.0f} failed.",
        "",
    ])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--no-write", action="store_true", help="print, do not touch bench/RESULTS.md")
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="bench-serve-") as tmp:
        result = run(args.rounds, Path(tmp))
    result["load"] = (load_before, os.getloadavg()[0])
    section = summarize(result)
    print(section)
    if not args.no_write:
        write_section("## serve", section)


if __name__ == "__main__":
    main()
