"""The faults the story had (issue 37 item 4), read back from raw counts, by hand: the vendor's
throttling (503/429 with Retry-After: outcome throttled, cause capacity, the capacity ticket), vendor
timeouts, a slow token endpoint, a capacity loss with a chosen mix, waves, a fault's end honoured by
the chain's exporter, and the embedded capacity guard counting the pods still ready."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from opsctl.drills.chain.exporter import ProxyExporter
from opsctl.drills.chain.faults import incident
from opsctl.drills.scenario import load_scenario
from opsctl.metrics.simulator import simulate
from tests.drills.conftest import CHAOS, audit, tickets

BACKENDS = {"databricks": "vendor", "internal": "internal"}
SPLIT = {"databricks": 80, "internal": 20}
START = 1_763_474_400  # 2026-11-18T14:00:00Z
LE_1S = "le_6"  # schema.BUCKETS (0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, ...): le_6 is 1 s


def counts(kind: str, params: dict, backend: str = "databricks", *, waves=(0, 0), seconds: int = 3600):
    """Per-step columns of `backend` with the fault on over the whole hour after START."""
    fault = incident(kind, backend, params, START, START + seconds, waves=waves)
    return simulate(START, START + seconds, backends=BACKENDS, split=SPLIT, peak_rps=200, seed=5,
                    incidents=[fault])[backend]


def total(s, column: str) -> int:
    return int(s.columns[column].sum())


def test_vendor_throttling_answers_its_rate_throttled_fast_and_its_cause_is_capacity():
    s = counts("vendor-throttling", {"rate": 0.4})
    n = total(s, "lat_count")
    throttled = total(s, "req_throttled")
    # Poisson thinning: the throttled share is 0.4 within a few standard errors of n requests
    assert abs(throttled / n - 0.4) < 4 * math.sqrt(0.4 * 0.6 / n)
    assert total(s, "req_server_error") < 0.001 * n and total(s, "req_auth_error") == 0
    from opsctl.slo import conventions as cv

    assert cv.CAUSE_OUTCOMES["capacity"] == ("throttled",)  # the outcome that names the cause


def test_vendor_timeouts_fail_their_rate_and_land_over_every_latency_bound():
    s = counts("vendor-timeout", {"rate": 0.1})
    n = total(s, "lat_count")
    timeouts = total(s, "req_timeout")
    assert abs(timeouts / n - 0.1) < 4 * math.sqrt(0.1 * 0.9 / n)
    # the +Inf bucket only: requests over 1 s are at least the timeouts (30 s each in lat_sum)
    assert n - total(s, LE_1S) >= timeouts
    assert total(s, "lat_sum") >= 30.0 * timeouts


def test_a_slow_token_endpoint_adds_401s_timeouts_and_a_latency_tail():
    base = counts("vendor-5xx", {"rate": 1e-9})  # the same draw without a real fault
    s = counts("slow-token-endpoint", {"share": 0.25, "factor": 8, "auth_rate": 0.15, "timeout_rate": 0.05})
    n = total(s, "lat_count")
    assert abs(total(s, "req_auth_error") / n - 0.15) < 4 * math.sqrt(0.15 * 0.85 / n)
    assert abs(total(s, "req_timeout") / n - 0.05) < 4 * math.sqrt(0.05 * 0.95 / n)
    # A tail: of the answered requests 0.25 are 8x slower (vendor median 150 ms -> 1.2 s), so far
    # more answers exceed 1 s than without the fault (timeouts excluded)
    slow = n - total(s, LE_1S) - total(s, "req_timeout")
    slow_base = total(base, "lat_count") - total(base, LE_1S)
    assert slow > 0.05 * n and slow_base < 0.01 * total(base, "lat_count")


@pytest.mark.parametrize("timeout_share", [0.8, 0.25])
def test_a_capacity_loss_fails_its_rate_with_the_chosen_timeout_mix(timeout_share):
    s = counts("gpu-capacity-loss", {"rate": 0.4, "factor": 2, "timeout_share": timeout_share}, "internal")
    n = total(s, "lat_count")
    for column, share in (("req_timeout", 0.4 * timeout_share), ("req_server_error", 0.4 * (1 - timeout_share))):
        assert abs(total(s, column) / n - share) < 4 * math.sqrt(share * (1 - share) / n) + 1e-4, column


def test_waves_act_in_their_on_periods_only():
    # on 2m, off 3m from START: steps ending in (0, 120] of each 300 s cycle carry the fault
    s = counts("vendor-throttling", {"rate": 0.5}, waves=(120, 180), seconds=1500)
    elapsed = s.timestamps - START
    by_hand = np.array([(e - 1) % 300 < 120 for e in elapsed])  # 10 s steps: ends 10..120 of each cycle
    throttled = s.columns["req_throttled"] / np.maximum(s.columns["lat_count"], 1)
    assert (throttled[by_hand] > 0.3).all() and (throttled[~by_hand] < 0.05).all()
    assert by_hand.sum() == 5 * 12  # five cycles of 1500 s, 12 steps on in each


def test_the_scenario_fault_and_the_simulator_incident_agree_on_activity(tmp_path):
    scenario = load_scenario(CHAOS / "oom-kill-loop.yaml")
    [fault] = scenario.faults
    assert fault.waves == (240, 180) and fault.params["timeout_share"] == 0.7
    inc = incident(fault.kind, "internal", fault.params, START, START + fault.duration, waves=fault.waves)
    for t in range(0, fault.duration + 600, 10):
        assert fault.active_at(t) == inc.active_at(START + t), t
    # by hand: on in (0, 240], off in (240, 420], on again from 420 s, never after the hour
    assert [fault.active_at(t) for t in (0, 10, 240, 250, 420, 430, 3600, 3610)] == [
        False, True, True, False, False, True, True, False]


class Clock:
    def __init__(self, t: float):
        self.t = t

    def __call__(self) -> float:
        return self.t


def test_the_chain_exporter_honours_a_faults_end_and_its_waves():
    clock = Clock(START)
    exporter = ProxyExporter(BACKENDS, peak_rps=200, seed=3, split=lambda: dict(SPLIT), clock=clock)
    exporter.fault_on("f1", "vendor-throttling", "databricks", {"rate": 0.5}, duration=600, waves=(120, 180))
    for _ in range(90):  # 900 s in 10 s scrapes
        clock.t += 10
        exporter.advance()
    rows = [(row["at"] - START, row["requests"]["databricks"]) for row in exporter.steps]
    share = {int(at): r["throttled"] / max(sum(r[o] for o in ("ok", "client_error", "auth_error", "throttled",
                                                               "server_error", "timeout")), 1) for at, r in rows}
    on = {t for t in share if 0 < t <= 600 and (t - 1) % 300 < 120}
    assert on == set(range(10, 121, 10)) | set(range(310, 421, 10))
    assert all(share[t] > 0.3 for t in on) and all(share[t] < 0.05 for t in share if t not in on)
    assert exporter.faults_on() == []  # ended by itself at 600 s
    assert exporter.fault_log[0]["ends_at"] == START + 600


def test_new_fault_params_out_of_range_name_the_field_and_exit_2(drill_env):
    def bad(data):
        data["method"][0]["fault"]["timeout_share"] = 1.5
        data["method"][0]["fault"]["waves"] = {"on": "1s", "off": "3m"}

    result = drill_env.run("drill", "validate", str(drill_env.scenario("oom-kill-loop", bad)))
    assert result.exit_code == 2
    assert "method[0].fault.timeout_share: must be at least 0 and at most 1" in result.output
    assert "method[0].fault.waves: on: must be between 10s and 1d" in result.output


def test_the_503_storm_is_capacity_end_to_end_embedded(drill_env):
    """The outcome (throttled), the alert's cause, the page's words, the policy, the ticket's category
    (runbooks.tickets.capacity_category, inference in the shipped config)."""
    result = drill_env.run("drill", "run", str(CHAOS / "vendor-503-storm.yaml"), "-o", "json")
    report = json.loads(result.stdout)
    verdicts = {v["name"]: v for v in report["expectations"]}
    assert verdicts["detected as capacity by the vendor availability alert"]["passed"]
    assert verdicts["on-call paged, naming capacity"]["passed"]
    run = drill_env.run_dir()
    [ticket] = tickets(run)
    # the category key `inference` (capacity_category), routed to its queue in tickets.vendors.databricks
    assert ticket["category"] == "Model Serving" and ticket["vendor"] == "databricks"
    moves = [e for e in audit(run) if e.get("kind") == "traffic" and "failover-on-availability-page" in json.dumps(e)]
    assert moves, "the availability policy (causes: capacity) failed over"


def test_the_embedded_capacity_guard_counts_the_pods_still_ready(tmp_path):
    """While a GPU loss of half the internal pods acts, the drill's config (which the capacity guard
    reads through the traffic service) holds floor(6 x (1 - 0.5)) = 3 ready replicas of the 6 static
    ones (opsctl.yaml capacity.replicas); all 6 again in a wave's off period and after its end."""
    from opsctl.config import load_config_file
    from opsctl.drills.env.embedded import EmbeddedEnvironment
    from tests.conftest import REPO

    scenario = load_scenario(CHAOS / "oom-kill-loop.yaml")
    env = EmbeddedEnvironment(load_config_file(REPO / "opsctl.yaml"), scenario, "test-run", tmp_path)
    env.prepare(lambda _message: None)
    start = env.clock.now()
    assert env.cfg.capacity.replicas == 6
    env.world.add_incident("f1", incident("gpu-capacity-loss", "internal", {"rate": 0.5}, start, start + 600,
                                          waves=(240, 180)))
    seen = {}
    for t in (60, 240, 300, 480, 700):
        env.advance(start + t, lambda: False)
        seen[t] = (env.cfg.capacity.replicas, env.traffic().cfg.capacity.replicas)
    env.close()
    # on in (0, 240] and (420, 600]; off in (240, 420]; ended after 600 s
    assert seen == {60: (3, 3), 240: (3, 3), 300: (6, 6), 480: (3, 3), 700: (6, 6)}
