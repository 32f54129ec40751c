"""A live exporter of the LLM proxy's client-side metrics: the simulator, served over HTTP.

Prometheus scrapes `GET /metrics` (text exposition 0.0.4). On every scrape the exporter simulates
the 10-second steps up to now with the split the traffic actuator holds now (so a failover moves
the simulated traffic) and the faults the drill has switched on, and adds them to its counters.
The counters continue the backfilled history: they start at the history's totals, so
`increase()` sees no reset at the seam. Each step is drawn by itself (its own seed) and every
sample carries the end of the last step it counts as its timestamp: what Prometheus computes is
counts over the steps' times, never the scrapes' (decisions/0352).

The load is drawn at the scenario's hour: the simulator is asked for the steps `offset` seconds
after the wall clock's (`scenario_time`), so a drill whose `start` is a weekday peak draws the
peak's load whatever the hour it runs at, and the guards see what they see embedded.
"""

from __future__ import annotations

import dataclasses

import math
import threading
import time
from typing import TYPE_CHECKING, Callable, Mapping

from opsctl.drills.chain.serving import QuietHandler, ThreadedServer
from opsctl.metrics import schema

if TYPE_CHECKING:
    from opsctl.metrics.sim_incidents import Incident

STEP = schema.STEP_SECONDS
_METRICS = (
    (schema.REQUESTS, "counter", "Requests the LLM proxy sent, by backend and outcome."),
    (schema.DURATION, "histogram", "Client-side latency of every request, in seconds."),
    (schema.PROMPT_TOKENS, "counter", "Prompt tokens sent."),
    (schema.COMPLETION_TOKENS, "counter", "Completion tokens received."),
    (schema.SUGGESTIONS, "counter", "Suggestions parsed from answered requests."),
    (schema.PROBES, "counter", "Synthetic probes the LLM proxy sent to each backend, by outcome."),
)
# Answered requests slower than each latency objective's threshold (latency-500ms, latency-1s):
# the symptoms chain/faults.py names for a uniform slowdown and for a tail.
SLOWER_THAN = {"slower_than_500ms": f"le_{schema.BUCKETS.index(0.5)}", "slower_than_1s": f"le_{schema.BUCKETS.index(1.0)}"}
_SAMPLES = {schema.DURATION: (schema.DURATION_BUCKET, schema.DURATION_COUNT, schema.DURATION_SUM)}


class ProxyExporter:
    def __init__(self, backends: Mapping[str, str], *, peak_rps: float, seed: int,
                 split: Callable[[], dict[str, float]], history: Mapping | None = None,
                 clock: Callable[[], float] = time.time, labels: Mapping[str, str] | None = None,
                 offset: int = 0):
        self.backends = dict(backends)
        self.offset = int(offset) // STEP * STEP  # scenario time - wall time, on the step grid
        self.labels = dict(labels or {})  # the service's (Config.service_labels), on every series
        self.peak_rps = peak_rps
        self.seed = seed
        self.split = split
        self.clock = clock
        self.totals = {b: {c: 0.0 for c in schema.VALUE_COLUMNS} for b in self.backends}
        self.last_step = int(clock()) // STEP * STEP
        if history:
            for name, s in history.items():
                for column in schema.VALUE_COLUMNS:
                    self.totals[name][column] = float(s.columns[column].sum())
                if len(s):
                    self.last_step = int(s.timestamps[-1])
        self.faults: dict[str, Incident] = {}  # id -> its Incident (end = inf while on)
        self.fault_log: list[dict] = []  # the exporter's own evidence: when each fault went on and off
        self.steps: list[dict] = []  # per advance: time, split, requests by backend and outcome
        self._chunks = 0
        self._lock = threading.Lock()
        self._http = ThreadedServer("chain-exporter")

    # -- faults -------------------------------------------------------------------------------

    def fault_on(self, fault_id: str, kind: str, backend: str, params: dict, *, duration: float = math.inf,
                 waves: tuple[float, float] = (0.0, 0.0)) -> dict:
        """Switch a fault on now, for `duration` seconds (its end honoured: steps after it are drawn
        without it) in `waves` (on, off seconds), as the scenario's Fault.active_at has it."""
        from opsctl.drills.chain.faults import incident

        with self._lock:
            self._advance_locked()
            now = self.clock()
            self.faults[fault_id] = incident(kind, backend, dict(params), now, now + duration, waves=waves)
            record = {"id": fault_id, "kind": kind, "backend": backend, "params": dict(params), "on_at": now,
                      "off_at": None, "ends_at": None if duration == math.inf else now + duration,
                      "waves": list(waves), "scenario_at": self.scenario_time(now)}
            self.fault_log.append(record)
            return dict(record)

    def fault_off(self, fault_id: str) -> dict | None:
        import dataclasses

        with self._lock:
            self._advance_locked()
            current = self.faults.get(fault_id)
            now = self.clock()
            if current is None or current.end <= now:
                return None
            self.faults[fault_id] = dataclasses.replace(current, end=now)
            for record in self.fault_log:
                if record["id"] == fault_id:
                    record["off_at"] = now
                    return dict(record)
        return None

    def faults_on(self) -> list[str]:
        """The faults not yet ended (by fault_off or their own end); a wave's off period counts as on."""
        now = self.clock()
        return [f for f, inc in self.faults.items() if inc.end > now]

    def ready_share(self, backend: str, at: float | None = None) -> float:
        """The share of `backend`'s pods ready at wall-clock `at` (default now) by the faults the
        exporter draws (simworld.ready_share: each GPU capacity loss acting then, its waves and end
        included): what the chain's loopback Deployment reports as ready (decisions/0355)."""
        from opsctl.drills.simworld import ready_share

        when = self.clock() if at is None else at
        with self._lock:
            incidents = list(self.faults.values())
        return ready_share(incidents, backend, when)

    # -- simulation ---------------------------------------------------------------------------

    def scenario_time(self, wall: float) -> float:
        """The scenario's instant whose load the exporter draws at wall-clock `wall`."""
        return wall + self.offset

    def advance(self) -> None:
        with self._lock:
            self._advance_locked()

    def _advance_locked(self) -> None:
        """Draw the steps since the last one, each by itself with its own seed (the seed and the
        step's index on the scenario's grid): what a step holds never depends on when Prometheus
        scraped, how many steps one scrape covered, or the machine's load (decisions/0352)."""
        from opsctl.metrics.simulator import simulate

        now_step = int(self.clock()) // STEP * STEP
        if now_step <= self.last_step:
            return
        split = self.split()
        for end in range(self.last_step + STEP, now_step + STEP, STEP):
            start = end - STEP
            # whole incidents, not clipped to the step (each step is drawn by Incident.window, so the
            # fault's waves keep their phase from its start and its end holds), moved to the scenario's hour
            active = [dataclasses.replace(inc, start=inc.start + self.offset, end=inc.end + self.offset)
                      for inc in self.faults.values() if inc.start < end and inc.end > start]
            self._chunks += 1
            series = simulate(start + self.offset, end + self.offset, backends=self.backends, split=split,
                              peak_rps=self.peak_rps, seed=step_seed(self.seed, end + self.offset), incidents=active)
            requests: dict[str, dict[str, int]] = {}
            row = {"at": float(end), "split": dict(split), "requests": requests}
            for name, s in series.items():
                for column in schema.VALUE_COLUMNS:
                    self.totals[name][column] += float(s.columns[column].sum())
                requests[name] = {o: int(s.columns[f"req_{o}"].sum()) for o in schema.OUTCOMES}
                for symptom, bucket in SLOWER_THAN.items():
                    requests[name][symptom] = int(s.columns["lat_count"].sum() - s.columns[bucket].sum())
            self.steps.append(row)
            self.last_step = end

    def outcomes_between(self, start: float, end: float | None = None) -> dict[str, dict[str, int]]:
        """Requests by backend and outcome over the steps ending in (start, end]."""
        out = {b: {o: 0 for o in (*schema.OUTCOMES, *SLOWER_THAN)} for b in self.backends}
        with self._lock:
            for row in self.steps:
                if row["at"] > start and (end is None or row["at"] <= end):
                    for b, counts in row["requests"].items():
                        for o, n in counts.items():
                            out[b][o] += n
        return out

    # -- exposition ---------------------------------------------------------------------------

    def render(self) -> str:
        with self._lock:
            self._advance_locked()
            # every sample stamped with the end of the last step it counts, not the scrape's time: a
            # rate over a window is then counts over the steps' own times (decisions/0352)
            stamp = int(self.last_step) * 1000
            lines = []
            for family, kind, help_text in _METRICS:
                lines.append(f"# HELP {family} {help_text}")
                lines.append(f"# TYPE {family} {kind}")
                for metric in _SAMPLES.get(family, (family,)):
                    columns = schema.series_columns(metric)
                    if columns is None:  # every family above is one of the store's
                        raise ValueError(f"{metric}: not a metric of the store")
                    for backend in self.backends:
                        for own, column in columns.items():
                            labels = ",".join(f'{k}="{v}"' for k, v in (*self.labels.items(), ("backend", backend), *own))
                            value = self.totals[backend][column]
                            text = repr(value) if column == "lat_sum" else str(int(value))
                            lines.append(f"{metric}{{{labels}}} {text} {stamp}")
            return "\n".join(lines) + "\n"

    # -- HTTP ---------------------------------------------------------------------------------

    def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        exporter = self

        class Handler(QuietHandler):
            def do_GET(self):
                if self.path.split("?")[0] != "/metrics":
                    self.send_error(404)
                    return
                self.reply(200, exporter.render().encode(), "text/plain; version=0.0.4; charset=utf-8")

        self._http.start(Handler, host, port)
        return self.url

    @property
    def url(self) -> str:
        return self._http.url

    @property
    def address(self) -> str:
        return self._http.address

    def stop(self) -> None:
        self._http.stop()


def step_seed(seed: int, step_end: float) -> int:
    """The simulator's seed for the step ending at `step_end` (scenario time): one per step."""
    return (int(seed) * 1_000_003 + int(step_end) // STEP) % 2**31
