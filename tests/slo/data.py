"""Hand-built client-side traffic for SLO tests, with the expected figures worked out from the raw
counts alone (numpy sums over index ranges), independently of the code under test."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

STEP = 10
# Share of requests at or under each bucket bound (0.05 .. 10 s, then +Inf), steady state.
STEADY_LE = (0.30, 0.60, 0.80, 0.90, 0.995, 0.998, 0.9995, 0.9999, 1.0, 1.0, 1.0)
SLOW_LE = (0.05, 0.10, 0.20, 0.30, 0.60, 0.80, 0.9000, 0.9900, 1.0, 1.0, 1.0)


@dataclass
class Traffic:
    """Integer per-step counts for one backend; index i is the step ending at ts[i]."""

    ts: np.ndarray
    requests: np.ndarray
    server_errors: np.ndarray
    le: np.ndarray  # shape (11, n): cumulative bucket counts
    extra: dict = field(default_factory=dict)

    def columns(self) -> dict[str, np.ndarray]:
        cols = {
            "req_ok": self.requests - self.server_errors,
            "req_server_error": self.server_errors,
            "lat_count": self.requests,
            "lat_sum": self.requests * 0.2,
            "prompt_tokens": self.requests * 300,
            "completion_tokens": self.requests * 50,
        }
        for i in range(self.le.shape[0]):
            cols[f"le_{i}"] = self.le[i]
        return cols


def make_traffic(end: int, steps: int, per_step: int, *, error_share=0.0, incidents=(), slow=()) -> Traffic:
    """`incidents`: (first_step, last_step, error_share); `slow`: (first_step, last_step) with SLOW_LE."""
    ts = np.arange(end - (steps - 1) * STEP, end + STEP, STEP, dtype=np.int64)
    requests = np.full(steps, per_step, dtype=np.int64)
    errors = np.full(steps, int(round(per_step * error_share)), dtype=np.int64)
    for first, last, share in incidents:
        errors[first:last + 1] = int(round(per_step * share))
    shares = np.tile(np.array(STEADY_LE)[:, None], (1, steps))
    for first, last in slow:
        shares[:, first:last + 1] = np.array(SLOW_LE)[:, None]
    le = np.floor(shares * per_step).astype(np.int64)
    le[-1] = requests
    return Traffic(ts, requests, errors, le)


def window_sum(traffic: Traffic, values: np.ndarray, at: int, seconds: int) -> int:
    """Sum of the steps ending in (at - seconds, at]."""
    mask = (traffic.ts > at - seconds) & (traffic.ts <= at)
    return int(values[mask].sum())


def write(store, data: dict[str, Traffic]) -> None:
    for backend, traffic in data.items():
        store.write_steps(backend, traffic.ts, traffic.columns(), mode="replace")


def openmetrics(data: dict[str, Traffic]) -> str:
    """Cumulative counters with an explicit 0 sample one step before the first, as a proxy exposes them."""
    lines = []
    families = {
        "llm_proxy_requests_total": "counter",
        "llm_proxy_request_duration_seconds": "histogram",
    }
    series: dict[str, list[tuple[str, np.ndarray, np.ndarray]]] = {k: [] for k in families}
    le_labels = ("0.05", "0.1", "0.2", "0.3", "0.5", "0.75", "1.0", "2.0", "5.0", "10.0", "+Inf")
    for backend, t in data.items():
        ts = np.concatenate([[t.ts[0] - STEP], t.ts])

        def cum(values):
            return np.concatenate([[0], np.cumsum(values)])

        series["llm_proxy_requests_total"].append(
            (f'llm_proxy_requests_total{{backend="{backend}",outcome="ok"}}', ts, cum(t.requests - t.server_errors)))
        series["llm_proxy_requests_total"].append(
            (f'llm_proxy_requests_total{{backend="{backend}",outcome="server_error"}}', ts, cum(t.server_errors)))
        for i, le in enumerate(le_labels):
            series["llm_proxy_request_duration_seconds"].append(
                (f'llm_proxy_request_duration_seconds_bucket{{backend="{backend}",le="{le}"}}', ts, cum(t.le[i])))
        series["llm_proxy_request_duration_seconds"].append(
            (f'llm_proxy_request_duration_seconds_count{{backend="{backend}"}}', ts, cum(t.requests)))
    for family, kind in families.items():
        lines.append(f"# TYPE {family.removesuffix('_total')} {kind}")
        for name, ts, values in series[family]:
            lines.extend(f"{name} {int(v)} {int(s)}" for s, v in zip(ts, values))
    lines.append("# EOF")
    return "\n".join(lines) + "\n"
