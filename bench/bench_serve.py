"""Benchmark: `opsctl serve`, delivery-to-split latency under 50 concurrent deliveries, local and team mode.

A running `opsctl serve` (subprocess, loopback) with the live executor, local pager and ticket
ledgers, and one day of healthy metrics in the embedded store for the guards, generated to end
now (so the guards' data-age check passes whatever the date). Each round sends 50 Alertmanager
deliveries at once from 50 threads released by one barrier, each on its own kept-alive HTTP
connection (as Alertmanager's client keeps them): one page-level availability alert on databricks
(the trigger) and 49 other alerts (ticket-level burn alerts of every SLO and backend, none matching
a policy, each its own delivery and fingerprint, a third of them about databricks and so queued on
the trigger's worker). Two modes, measured in the same run:

  local   state.backend local, file actuator: a file per incident (the baseline)
  team    state.backend kubernetes on the loopback API server (tests/fakes/kube_api.py): the leader
          holds the Lease, each incident is a ConfigMap written by compare-and-swap, the split is a
          ConfigMap written with its change record

Deliveries are not persisted (docs/decisions/0216-deliveries-not-persisted.md): the 49 alerts no
policy matches are answered without a write, the trigger once its incident is written.

Measured per round:

  delivery -> split      from just before the trigger's POST to the split's write (local: the audit
                         entry written right after the atomic file write; team: the applied change's
                         JSON log line, written right after the ConfigMap's compare-and-swap)
  answer                 each of the 50 POSTs' round trip (202: the trigger's incident written and queued,
                         the others matched nothing and wrote nothing); and the burst's
                         rate, 50 / (last answer - first send), in deliveries/s
  per hop                sent -> received (team mode: a recorder thread takes the delivery up),
                         received -> answered (the trigger's 202 back at its sender: recorded and
                         queued), answered -> the worker starts the failover, received -> that start,
                         the failover itself (guards, actuator write, record); team mode also counts
                         API calls
  CPU                    the replica's CPU time (user + system) over the timed rounds, per round: the
                         work done, which the machine's load (shared with other jobs) does not inflate
                         as it does the latencies

Each latency is given as p50, p95 and p99 (nearest rank): below 100 rounds the p99 is the slowest
round, so the default is 100.

One untimed warm-up round runs first in each mode (its first imports, connections and documents).
Every round checks that the failover it timed applied (the split is 0/100 and the record says
applied, no refusal), then the trigger resolves, the policy restores (hold-down 0), and the next
round starts once that restore has ended (its note recorded, its response closed on the incident). `--api-latency S` adds one run of team mode with every API call delayed S seconds
(--slow-rounds, each bounded by 60 x S). Writes the section "## serve" in bench/RESULTS.md (others kept).

    python bench/bench_serve.py [--rounds 100] [--team-rounds 50] [--api-latency 5] [--no-write]
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
    FAILOVER_POLICY, Serve, alert, audit, bearer, message, request, responses, split, write_serve_config,
)
from tests.fakes.kube_api import FakeKubeAPI  # noqa: E402
from tests.slo import data as d  # noqa: E402

CONCURRENCY = 50
WARMUP = 1  # untimed rounds first, in each mode: a process's first round pays its imports and first connections
NS = "llm"
SPLIT_CM = "grammar-traffic-split"
DEFAULT = {"databricks": 80, "internal": 20}
FAILED_OVER = {"databricks": 0, "internal": 100}

LOCAL_TRAFFIC = """\
traffic:
  actuator: file
  default_split: {databricks: 80, internal: 20}
  rate_limit: {max_changes: 1000, window: 1h}
"""
TEAM_TRAFFIC = """\
state: {{backend: kubernetes, namespace: {ns}}}
traffic:
  actuator: configmap
  kubernetes: {{host: "{url}", namespace: {ns}}}
  configmap: {{name: {cm}, key: split.json}}
  rate_limit: {{max_changes: 1000, window: 1h}}
"""
EXTRA = """\
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


def replica_cpu(pid: int) -> float:
    """CPU seconds (user + system) the replica has used so far (Linux /proc; 0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


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


def restore_finished(workdir: Path, round_no: int) -> bool:
    """Whether the round's restore has ended: a note recorded after its restore (the restore records
    its action, closes its response on the incident, then notes it). The next round waits for this, as well as for
    the split: a trigger arriving while the restore's response is still held by the maintenance
    thread finds it busy and is retried 0.1 s later, which times the tail of the last round's
    restore, not the failover (in team mode that tail is writes of the incident's document)."""
    import sqlite3

    conn = sqlite3.connect(f"file:{workdir / 'state' / 'automation' / 'automation.sqlite'}?mode=ro", uri=True)
    try:
        restores = [row[0] for row in conn.execute("SELECT id FROM actions WHERE action = 'restore' ORDER BY id")]
        if len(restores) <= round_no:
            return False
        return conn.execute("SELECT COUNT(*) FROM actions WHERE action = 'note' AND id > ?",
                            (restores[round_no],)).fetchone()[0] > 0
    finally:
        conn.close()


def closed_responses(workdir: Path) -> int:
    """Responses closed on the incidents (a file each under the state dir): one per restored round."""
    return sum(r.get("state") == "closed" for r in responses(workdir))  # written by atomic rename: read whole


class LocalMode:
    """The baseline: state in SQLite, the split in a file."""

    name = "local"

    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.api = None

    def config_extra(self) -> str:
        return LOCAL_TRAFFIC + EXTRA

    def split(self) -> dict | None:
        return split(self.workdir)

    def applied(self, r: int) -> dict | None:
        """The r-th applied failover's record (ts), or None; a refused one ends the benchmark."""
        try:
            entries = [e for e in audit(self.workdir) if e["action"] == "failover"]
        except json.JSONDecodeError:  # its last line half written as the bench read it: the next poll reads it whole
            return None
        refused = [e for e in entries if e["outcome"] != "applied"]
        if refused:
            raise RuntimeError(f"a failover was not applied: {refused[0]['outcome']}: {refused[0].get('reason')}")
        return entries[r] if len(entries) > r else None

    def closed(self) -> int:
        return closed_responses(self.workdir)


class TeamMode(LocalMode):
    """Shared state and the split on the loopback API server; the serve replica leads on the Lease."""

    name = "team"

    def __init__(self, workdir: Path):
        super().__init__(workdir)
        self.api = FakeKubeAPI().start()
        self.api.seed({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": SPLIT_CM, "namespace": NS},
                       "data": {"split.json": json.dumps({"weights": DEFAULT, "shadow": {}})}})
        self.server_log: Path | None = None
        self._offset = 0
        self._changes: list[dict] = []

    def config_extra(self) -> str:
        return TEAM_TRAFFIC.format(ns=NS, url=self.api.url, cm=SPLIT_CM) + EXTRA

    def split(self) -> dict | None:
        cm = self.api.get("", "configmaps", NS, SPLIT_CM)
        return json.loads(cm["data"]["split.json"])["weights"]

    def changes(self) -> list[dict]:
        """The controller's JSON log lines of changes, whole lines only (the server may be writing the
        last). Read on from where the last call stopped: the bench polls this while it times a round,
        in the process that also runs the loopback API server, so re-reading the whole log every poll
        would slow every API call it times."""
        with open(self.server_log, "rb") as f:
            f.seek(self._offset)
            chunk = f.read()
        whole = chunk[:chunk.rfind(b"\n") + 1]
        self._offset += len(whole)
        for line in whole.decode().splitlines():
            if line.startswith("{") and '"opsctl.traffic.change"' in line:
                self._changes.append(json.loads(line))
        return self._changes

    def applied(self, r: int) -> dict | None:
        """The applied change's JSON log line (the controller logs it right after the write)."""
        entries = [entry for entry in self.changes() if entry["action"] == "failover"]
        refused = [e for e in entries if e["outcome"] != "applied"]
        if refused:
            raise RuntimeError(f"a failover was not applied: {refused[0]['outcome']}: {refused[0].get('reason')}")
        return entries[r] if len(entries) > r else None

    def closed(self) -> int:
        """Restores applied (from the controller's log lines, as the failovers are read)."""
        return sum(1 for entry in self.changes() if entry["action"] == "restore" and entry["outcome"] == "applied")

    def holder(self) -> str | None:
        lease = self.api.get("coordination.k8s.io", "leases", NS, "opsctl-serve")
        return (lease or {}).get("spec", {}).get("holderIdentity")

    def stop(self) -> None:
        self.api.stop()


def run(mode_class, rounds: int, workdir: Path, *, api_latency: float = 0.0, round_timeout: float = 30.0) -> dict:
    (workdir / "state").mkdir(parents=True)
    end = int(time.time()) // 10 * 10  # the data ends now: the guards' data-age check passes on any date
    store = EmbeddedStore.open(workdir / "state" / "metrics.sqlite", create=True)
    try:
        d.write(store, {b: d.make_traffic(end, 8640, n) for b, n in {"databricks": 8000, "internal": 2000}.items()})
    finally:
        store.close()
    mode = mode_class(workdir)
    # The data ends when the run starts; at seconds per API call the rounds outlast the default 5 min
    # data age, and the restore would be refused as stale data. A slow-API run allows an hour.
    slow_data_age = "metrics: {max_data_age: 1h}\n" if api_latency else ""
    config = write_serve_config(workdir, policies=FAILOVER_POLICY, extra=mode.config_extra() + slow_data_age,
                                automation_extra="hold_down: 0s\nqueue_size: 1000\nworkers: 2\n")
    server = Serve(config, env={"POD_NAME": "serve-bench"})
    mode.server_log = server.log_path
    trigger_ms: list[float] = []
    answer_ms: list[float] = []
    api_calls: list[int] = []
    in_window: list[dict[str, int]] = []  # team mode: API calls between the trigger's receipt and the failover's start
    rates: list[float] = []  # deliveries recorded per second in each round's burst (first sent to last answered)
    stages: dict[str, list[float]] = {"sent -> received": [], "received -> answered (recorded, queued)": [],
                                      "answered -> worker starts the failover": [],
                                      "received -> worker starts the failover": [],
                                      "failover: guards, actuator write, record": []}
    try:
        if mode.api is not None:
            wait(lambda: mode.holder() == "serve-bench", 30, "the replica to lead")
            if api_latency:
                mode.api.inject(verb="*", resource="*", delay=api_latency)
        pool = ThreadPoolExecutor(CONCURRENCY)
        # Like Alertmanager, each sender keeps its HTTP connection open between deliveries.
        timeout = 30 + 40 * api_latency
        connections = [http.client.HTTPConnection("127.0.0.1", server.port, timeout=timeout) for _ in range(CONCURRENCY)]
        cpu_start = 0.0
        for r in range(WARMUP + rounds):
            if r == WARMUP:
                cpu_start = replica_cpu(server.proc.pid)
            starts = f"2026-11-29T{10 + r // 3600 % 10:02d}:{r // 60 % 60:02d}:{r % 60:02d}.5Z"
            trigger = alert(fingerprint=f"ff{r:06x}", starts_at=starts)
            payloads = [message(trigger, group_key=f"trigger-{r}")] + [
                message(a, group_key=f"noise-{r}-{i}") for i, a in enumerate(noise(r))]
            bodies = [json.dumps(p).encode() for p in payloads]
            barrier = threading.Barrier(CONCURRENCY)
            sent = [0.0] * CONCURRENCY
            answered = [0.0] * CONCURRENCY
            calls_before = len(mode.api.requests) if mode.api is not None else 0

            def deliver(i: int) -> float:
                conn = connections[i]
                barrier.wait(10)
                sent[i] = time.time()
                t0 = time.perf_counter()
                try:
                    conn.request("POST", "/v1/alertmanager", body=bodies[i], headers=bearer())
                    response = conn.getresponse()
                except (BrokenPipeError, ConnectionResetError, http.client.RemoteDisconnected):
                    # The server closed the idle kept-alive connection (after 5 s): reconnect, as
                    # Alertmanager's client does (a repeated delivery is a duplicate anyway).
                    conn.close()
                    conn.request("POST", "/v1/alertmanager", body=bodies[i], headers=bearer())
                    response = conn.getresponse()
                body = response.read()
                if response.status != 202:
                    raise RuntimeError(f"delivery answered {response.status}: {body[:200]!r}")
                answered[i] = time.time()
                return (time.perf_counter() - t0) * 1000

            answers = list(pool.map(deliver, range(CONCURRENCY)))
            answer_ms += answers
            rates.append(CONCURRENCY / max(1e-6, max(answered) - min(sent)))
            applied = wait(lambda: mode.applied(r), round_timeout, "the failover")
            trigger_ms.append((applied["ts"] - sent[0]) * 1000)
            if mode.split() != FAILED_OVER:
                raise RuntimeError(f"round {r}: the failover was logged but the split is {mode.split()}")
            if mode.api is not None:
                api_calls.append(len(mode.api.requests) - calls_before)
            row = wait(lambda: failover_row(workdir, r), round_timeout, "the failover's record")
            stages["sent -> received"].append((row["received_at"] - sent[0]) * 1000)
            stages["received -> answered (recorded, queued)"].append((answered[0] - row["received_at"]) * 1000)
            stages["answered -> worker starts the failover"].append((row["started_at"] - answered[0]) * 1000)
            stages["received -> worker starts the failover"].append((row["started_at"] - row["received_at"]) * 1000)
            stages["failover: guards, actuator write, record"].append((applied["ts"] - row["started_at"]) * 1000)
            if mode.api is not None:  # where the trigger's hop to the worker goes: every API call in that window
                window: dict[str, int] = {}
                for q in mode.api.requests[calls_before:]:
                    if row["received_at"] <= q.at <= row["started_at"]:
                        doc = q.path.rsplit("/", 1)[-1].replace("opsctl-llm-inference-", "")
                        doc = "incident-<id>" if doc.startswith("incident-") else doc
                        window[f"{q.method} {doc}"] = window.get(f"{q.method} {doc}", 0) + 1
                in_window.append(window)
            resolved = message(alert(fingerprint=f"ff{r:06x}", starts_at=starts, status="resolved"),
                               group_key=f"trigger-{r}")
            assert request(f"{server.url}/v1/alertmanager", json.dumps(resolved).encode(), headers=bearer(),
                           timeout=timeout).status == 202
            wait(lambda: mode.split() == DEFAULT and mode.closed() == r + 1, round_timeout, "the restore")
            wait(lambda: restore_finished(workdir, r), round_timeout, "the restore's note")
            wait(lambda: server.metrics().get("opsctl_automation_queue_depth") == 0, round_timeout, "an idle queue")
        pool.shutdown()
        for conn in connections:
            conn.close()
        cpu_per_round = (replica_cpu(server.proc.pid) - cpu_start) * 1000 / max(1, rounds)
        metrics = server.metrics()
        # The warm-up rounds are not timed (first imports, connections, documents and failover).
        trigger_ms, answer_ms, rates = trigger_ms[WARMUP:], answer_ms[WARMUP * CONCURRENCY:], rates[WARMUP:]
        api_calls, in_window = api_calls[WARMUP:], in_window[WARMUP:]
        stages = {name: values[WARMUP:] for name, values in stages.items()}
    finally:
        server.stop()
        if mode.api is not None:
            mode.stop()
    return {
        "mode": mode.name,
        "api_latency": api_latency,
        "rounds": rounds,
        "trigger_ms": trigger_ms,
        "answer_ms": answer_ms,
        "stages": stages,
        "api_calls": api_calls,
        "rates": rates,
        "in_window": in_window,
        "cpu_ms_per_round": cpu_per_round,
        "events_done": metrics.get('opsctl_automation_events_total{result="done"}', 0),
        "events_failed": metrics.get('opsctl_automation_events_total{result="failed"}', 0),
    }


def _row(name: str, values: list[float], base: list[float] | None = None) -> str:
    ratio = f" {percentile(values, 99) / percentile(base, 99):.2f}x |" if base else " |"
    return (f"| {name} | {statistics.median(values):.1f} | {percentile(values, 95):.1f} | {percentile(values, 99):.1f} |"
            f" {max(values):.1f} |"
            f" {len(values)} |" + ratio)


def summarize(results: list[dict], load: tuple[float, float]) -> str:
    local = next(r for r in results if r["mode"] == "local")
    cpu = platform.processor() or platform.machine()
    lines = [
        "## serve",
        "",
        f"`opsctl serve` on 127.0.0.1, live executor (local pager and ticket ledgers, guards over one day of embedded"
        f" metrics ending at the start of the run), 2 workers; rounds of {CONCURRENCY} concurrent Alertmanager"
        f" deliveries (1 page-level availability alert that fails over + {CONCURRENCY - 1} ticket-level alerts), then"
        f" resolve and restore; every timed failover checked applied (split 0/100, record `applied`). Local mode"
        f" (SQLite state, file actuator) is the baseline; team mode keeps deliveries, incidents, the Lease and the split"
        f" (ConfigMap, with its change record) on the loopback API server (tests/fakes/kube_api.py), compare-and-swap"
        f" on every write. The last column is p99 / the baseline's p99 of the same row, measured in the same run."
        f" {os.cpu_count()} CPUs ({cpu}), 1-minute load average {load[0]:.1f} before and {load[1]:.1f} after (the"
        f" machine is shared), measured {time.strftime('%Y-%m-%d')}.",
        "",
    ]
    for result in results:
        title = {"local": "local mode (baseline)", "team": "team mode"}[result["mode"]]
        if result["api_latency"]:
            title += f", every API call {result['api_latency']:g} s (metrics.max_data_age 1h)"
        if "error" in result:
            tried = f"{result['rounds']} round{'s' if result['rounds'] != 1 else ''}"
            lines += [f"{title}: {tried} tried: {result['error']}.", ""]
            continue
        t, a = result["trigger_ms"], result["answer_ms"]
        base = None if result is local else local
        lines += [
            f"{title}: {result['rounds']} rounds",
            "",
            "| latency (ms) | p50 | p95 | p99 | max | samples | p99 / baseline |",
            "|---|---|---|---|---|---|---|",
            _row("delivery -> split written (failover applied)", t, base and base["trigger_ms"]),
            _row("delivery answered (202)", a, base and base["answer_ms"]),
            *(_row(f"&nbsp;&nbsp;trigger: {name}", v, base and base["stages"][name])
              for name, v in result["stages"].items()),
            "",
        ]
        lines += [f"Each burst of {CONCURRENCY} deliveries recorded and answered at a median"
                  f" {statistics.median(result['rates']):.0f} deliveries/s (slowest round {min(result['rates']):.0f})."
                  f" The replica used {result['cpu_ms_per_round']:.0f} ms of CPU per round (user + system, the"
                  f" timed rounds: the work itself, whatever the machine's load).", ""]
        if result["api_calls"]:
            calls = result["api_calls"]
            lines += [f"API calls per round (50 deliveries and the failover): median {statistics.median(calls):.0f},"
                      f" max {max(calls)}.", ""]
        if result.get("in_window"):
            kinds = sorted({k for w in result["in_window"] for k in w})
            spread = ", ".join(f"{k} {statistics.median([w.get(k, 0) for w in result['in_window']]):g}" for k in kinds)
            total = statistics.median([sum(w.values()) for w in result["in_window"]])
            lines += [f"API calls between the trigger's receipt and the failover's start (every replica thread,"
                      f" maintenance and lease included), median per round: {total:g} in all; {spread}.", ""]
        target = 200 if result["mode"] == "team" else 100
        if not result["api_latency"]:
            lines += [f"Target p99 < {target} ms for delivery -> split: "
                      f"{'met' if percentile(t, 99) < target else 'NOT met'} ({percentile(t, 99):.1f} ms; p95"
                      f" {percentile(t, 95):.1f} ms; {len(t)} rounds: below 100 the p99 is the slowest round)."
                      f" Events handled: {result['events_done']:.0f} done, {result['events_failed']:.0f} failed.", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=100, help="rounds in local mode (the baseline)")
    parser.add_argument("--team-rounds", type=int, default=None, help="rounds in team mode (default: --rounds)")
    parser.add_argument("--api-latency", type=float, default=0.0,
                        help="also run team mode with every API call delayed this many seconds (3 rounds)")
    parser.add_argument("--slow-rounds", type=int, default=2, help="rounds with --api-latency")
    parser.add_argument("--no-write", action="store_true", help="print, do not touch bench/RESULTS.md")
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-serve-") as tmp:
        results.append(run(LocalMode, args.rounds, Path(tmp) / "local"))
        results.append(run(TeamMode, args.team_rounds or args.rounds, Path(tmp) / "team"))
        if args.api_latency:
            started = time.monotonic()
            try:
                results.append(run(TeamMode, args.slow_rounds, Path(tmp) / "slow", api_latency=args.api_latency,
                                   round_timeout=60 * args.api_latency))
            except RuntimeError as exc:  # it did not act within the bound: that is the figure
                results.append({"mode": "team", "api_latency": args.api_latency, "rounds": args.slow_rounds,
                                "error": f"{exc} (after {time.monotonic() - started:.0f} s)"})
    section = summarize(results, (load_before, os.getloadavg()[0]))
    print(section)
    if not args.no_write:
        write_section("## serve", section)


if __name__ == "__main__":
    main()
