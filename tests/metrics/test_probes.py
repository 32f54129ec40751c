"""The proxy's synthetic probes in the simulator (opsctl/metrics/sim_draw.py `draw_probes`,
`probe_shares`) and the chain's exporter: every backend gets them whatever its share, and each
fault of the vocabulary reaches them through the step parameters it sets (docs/decisions/0270)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from opsctl.clock import parse_rfc3339
from opsctl.metrics import schema
from opsctl.metrics import simulator as sim

BACKENDS = {"databricks": "vendor", "internal": "internal"}
START = parse_rfc3339("2026-11-18T15:00:00Z")
HOUR = 3600


def probes(series) -> np.ndarray:
    return sum(series.columns[c] for c in schema.PROBE_COLUMNS)


def test_every_backend_gets_ten_probes_a_step_whatever_its_share():
    result = sim.simulate(START, START + HOUR, backends=BACKENDS, split={"databricks": 0, "internal": 100},
                          seed=1, peak_rps=200)
    for name, series in result.items():
        assert (probes(series) == schema.PROBES_PER_STEP).all(), name
    # The vendor carries no request and still answers its probes (healthy: all of them ok).
    assert result["databricks"].requests() == 0
    assert int(result["databricks"].columns["probe_ok"].sum()) == 360 * 10


def test_a_fault_reaches_the_probes_of_its_own_steps_only():
    from opsctl.drills.chain.faults import OAuthTokenFailure, VendorThrottling

    throttling = VendorThrottling("databricks", START + 1200, START + 1800, rate=0.4)
    calm = sim.simulate(START, START + HOUR, backends=BACKENDS, seed=2, peak_rps=200)
    storm = sim.simulate(START, START + HOUR, backends=BACKENDS, seed=2, peak_rps=200, incidents=[throttling])
    inside = throttling.window(storm["databricks"].timestamps)
    assert inside.sum() == 60  # the steps ending in (15:20, 15:30]
    for column in schema.PROBE_COLUMNS:  # outside its steps, and on the other backend, nothing moved
        assert np.array_equal(calm["databricks"].columns[column][~inside], storm["databricks"].columns[column][~inside])
        assert np.array_equal(calm["internal"].columns[column], storm["internal"].columns[column])
    for column in schema.VALUE_COLUMNS[:len(schema.VALUE_COLUMNS) - len(schema.PROBE_COLUMNS)]:
        assert np.array_equal(calm["databricks"].columns[column][~inside], storm["databricks"].columns[column][~inside])
    throttled = int(storm["databricks"].columns["probe_throttled"][inside].sum())
    # 40% of 600 probes (240), binomial sd 12: four of them either side.
    assert 192 < throttled < 288
    assert int(probes(storm["databricks"])[inside].sum()) == 600
    auth = sim.simulate(START, START + HOUR, backends=BACKENDS, seed=2, peak_rps=200,
                        incidents=[OAuthTokenFailure("databricks", START + 1200, START + 1800, rate=1.0)])
    assert (auth["databricks"].columns["probe_auth_error"][inside] == 10).all()  # no token: every probe 401


def test_a_probe_answered_slower_than_a_second_is_a_timeout_as_the_latency_tail_makes_it():
    from opsctl.metrics.sim_incidents import _StepParams

    # One step of the vendor at its median 150 ms (sigma 0.38) with slow-token-endpoint's tail (25% of
    # the answers 8x slower) and nothing else failing. By hand: P(L > 1 s) = 0.75 Q(ln(1/0.15)/0.38)
    # + 0.25 Q(ln(1/1.2)/0.38), Q the normal survival: 0.75 x 3.0e-7 + 0.25 x 0.6843 = 0.1711.
    def q(z: float) -> float:
        return 0.5 * math.erfc(z / math.sqrt(2))

    zero, one = np.zeros(1), np.ones(1)
    params = _StepParams(zero, zero, zero, zero, zero, zero, zero, one, one, zero, np.full(1, 0.25),
                         np.full(1, math.log(8)))
    shares = sim.probe_shares(params, np.full(1, math.log(0.15)), 0.38)
    slow = 0.75 * q(math.log(1 / 0.15) / 0.38) + 0.25 * q(math.log(1 / 1.2) / 0.38)
    assert slow == pytest.approx(0.1711, abs=1e-4)
    assert dict(zip(schema.PROBE_OUTCOMES, shares[:, 0])) == pytest.approx(
        {"ok": 1 - slow, "auth_error": 0.0, "throttled": 0.0, "server_error": 0.0, "timeout": slow}, rel=1e-6)


def test_the_chain_exporter_serves_the_probe_counter_for_every_backend():
    from opsctl.drills.chain.exporter import ProxyExporter

    clock = [START]
    exporter = ProxyExporter(BACKENDS, peak_rps=100, seed=4, split=lambda: {"internal": 100.0, "databricks": 0.0},
                             clock=lambda: clock[0])
    clock[0] += 60  # six steps
    text = exporter.render()
    assert "# TYPE llm_proxy_probes_total counter" in text
    for backend in BACKENDS:
        line = next(x for x in text.splitlines() if x.startswith(f'llm_proxy_probes_total{{backend="{backend}",outcome="ok"}}'))
        assert line.split()[1:] == ["60", str(int(START + 60) * 1000)]  # 6 steps x 10 probes, all ok
