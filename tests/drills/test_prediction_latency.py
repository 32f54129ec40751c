"""The chain drill's prediction for latency and capacity faults (drills/prediction.py): the share of
requests over each latency SLO's threshold under the fault, from the simulator's latency model, its
burn against the SLO's budget, each page tier's time to fire, and the timeout derived from it.

Every expected figure is computed here, apart from the code under test: the latency model's
parameters as opsctl/metrics/sim_draw.py states them (lognormal medians, shapes and load slopes, the
outcome shares, the fast 4xx answers, timeouts at 30 s), the faults' effects as the scenario parser
documents them, the normal tail by Simpson's rule over the density (no erfc, no scipy), the goals
read from slos/*.yaml and the factors worked from the 28-day period. The shipped scenarios with such
a fault: chaos/vendor-latency.yaml (latency-tail) and chaos/internal-capacity-loss.yaml
(gpu-capacity-loss); `grep -l 'latency-\\|capacity' chaos/*.yaml scenarios/` lists them."""

from __future__ import annotations

import math

import pytest
import yaml

from opsctl.config import load_config_file
from opsctl.drills.chain.setup import Shortened, drill_config
from opsctl.drills.fault_model import latency_burns
from opsctl.drills.prediction import CHAIN_MARGIN, chain_prediction, derived_timeout
from opsctl.drills.scenario import load_scenario
from opsctl.slo.loading import load_slos
from opsctl.slo.rule_plan import RuleSettings, plan_rules
from tests.conftest import REPO
from tests.drills.conftest import CHAOS

SPLIT = {"internal": 20.0, "databricks": 80.0}  # opsctl.yaml's traffic.default_split
KINDS = {"databricks": "vendor", "internal": "internal"}
LOAD = 0.6  # share of peak traffic at the fault (the simulator's weekly profile)
GRID = 10  # the chain evaluates every 10 s; page for: 2m at a 1m interval scales to 20 s
PAGE_FOR = 20

# sim_draw.PROFILES, as its source states them: (median s, sigma, load slope, client, 429, 5xx, timeout)
MODEL = {"vendor": (0.150, 0.38, 0.08, 2e-4, 2e-6, 1.2e-5, 2e-6),
         "internal": (0.100, 0.42, 0.15, 2e-4, 0.0, 1e-5, 2e-6)}
REJECTED = (0.025, 0.5)  # 4xx and 429 answers: lognormal, median 25 ms


def _sf(z: float) -> float:
    """P(Z > z) for a standard normal: Simpson's rule over the density from z to z + 14."""
    n, width = 4000, 14.0
    h = width / n
    total = 0.0
    for i in range(n + 1):
        x = z + i * h
        weight = 1 if i in (0, n) else (4 if i % 2 else 2)
        total += weight * math.exp(-x * x / 2)
    return total * h / 3 / math.sqrt(2 * math.pi)


def _slow(kind: str, threshold: float, *, log_factor: float = 0.0, tail: float = 0.0, tail_factor: float = 1.0,
          timeout: float | None = None, server: float | None = None, load: float = LOAD) -> float:
    """Share of one backend's requests slower than `threshold`: answered ones (ok and 5xx) from
    lognormal(ln median + slope x load + ln factor, sigma), `tail` of them `tail_factor` slower still;
    rejected (4xx, 429) from lognormal(ln 25 ms, 0.5); every timeout (30 s) over the bound."""
    median, sigma, slope, client, throttled, server0, timeout0 = MODEL[kind]
    timeout = timeout0 if timeout is None else timeout
    server = server0 if server is None else server
    rejected = client + throttled
    answered = 1 - rejected - timeout  # ok + 5xx
    mu = math.log(median) + slope * load + log_factor
    z = (math.log(threshold) - mu) / sigma
    z_tail = (math.log(threshold) - mu - math.log(tail_factor)) / sigma
    answered_slow = (1 - tail) * _sf(z) + tail * _sf(z_tail)
    rejected_slow = _sf((math.log(threshold) - math.log(REJECTED[0])) / REJECTED[1])
    return answered * answered_slow + rejected * rejected_slow + timeout


def _goal(file: str) -> float:
    return float(yaml.safe_load((REPO / "slos" / f"{file}.yaml").read_text())["spec"]["goal"])


def _fires(factor: float, long_seconds: int, burn: float, for_seconds: int = PAGE_FOR) -> int | None:
    if burn <= factor:
        return None
    return math.ceil(factor * long_seconds / burn / GRID) * GRID + for_seconds


# 28-day period (672 h): 2% of the budget in 1h, 5% in 6h, for the two standard page pairs
PAIRS = {("1h", "5m"): (0.02 * 672, 3600), ("6h", "30m"): (0.05 * 672 / 6, 21600)}
FAST = {("5m", "1m"): (300.0, 300)}  # opsctl.yaml alerting.fast: availability SLOs, for: 0
# Latency SLOs: alerting.fast.latency_share 0.03 over the budget: 30x on a 99.9% SLO (none on a 99% one)
LATENCY_FAST = {("5m", "1m"): (0.03 / (1 - 0.999), 300)}


@pytest.fixture(scope="module")
def chain_cfg(tmp_path_factory):
    """The chain drill's own config, built from the shipped one as the runner builds it."""
    d = tmp_path_factory.mktemp("chain")
    user = load_config_file(REPO / "opsctl.yaml")
    raw = drill_config(user, d, prometheus_url="http://127.0.0.1:9", token_file=d / "token", shortened=Shortened())
    (d / "opsctl.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    return user, load_config_file(d / "opsctl.yaml")


@pytest.fixture(scope="module")
def plans(chain_cfg):
    """The chain drill's own rules."""
    _, cfg = chain_cfg
    return plan_rules(load_slos([cfg.slo_dir], cfg.backends, config=cfg), RuleSettings.from_config(cfg))


def _fault(name: str):
    [step] = [s for s in load_scenario(CHAOS / f"{name}.yaml").method if s.action == "inject-fault"]
    return step.fault


def _short(name: str) -> str:
    return name.rsplit("llm-inference-", 1)[-1]


def test_the_normal_tail_by_simpsons_rule_is_the_tables():
    # standard normal table values, to check the test's own integration
    assert _sf(0.0) == pytest.approx(0.5, rel=1e-9)
    assert _sf(1.959964) == pytest.approx(0.025, rel=1e-5)
    assert _sf(-1.281552) == pytest.approx(0.9, rel=1e-5)


def test_vendor_latency_bad_share_and_burn_on_every_latency_slo(plans):
    fault = _fault("vendor-latency")
    assert (fault.kind, fault.backend, fault.params) == ("latency-tail", "databricks", {"share": 0.1, "factor": 10})
    tail = {"tail": 0.1, "tail_factor": 10.0}
    expected_bad = {
        "databricks-latency-1s": _slow("vendor", 1.0, **tail),
        "databricks-latency-500ms": _slow("vendor", 0.5, **tail),
        # service-wide: 80% of the traffic on the faulted vendor, 20% on internal at its baseline
        "service-latency-1s": 0.8 * _slow("vendor", 1.0, **tail) + 0.2 * _slow("internal", 1.0),
        "service-latency-500ms": 0.8 * _slow("vendor", 0.5, **tail) + 0.2 * _slow("internal", 0.5),
    }
    # the tail's median is 1.5 s x e^(0.08 x 0.6) at 10x: about 88% of the tail is over 1 s
    assert 0.085 < expected_bad["databricks-latency-1s"] < 0.092
    got = {_short(b.slo): b for b in latency_burns(plans, fault.kind, dict(fault.params), "databricks", SPLIT,
                                                      KINDS, LOAD)}
    assert set(got) == set(expected_bad)  # internal's own latency SLOs see nothing of a vendor fault
    for slo, bad in expected_bad.items():
        assert got[slo].bad_share == pytest.approx(bad, rel=1e-5), slo
        assert got[slo].burn == pytest.approx(bad / (1 - _goal(slo)), rel=1e-5), slo


def test_vendor_latency_predicted_page_and_timeout_on_the_chain_drills_rules(plans):
    fault = _fault("vendor-latency")
    pred = chain_prediction(plans, fault.kind, dict(fault.params), "databricks", SPLIT,
                            slo="llm-inference-databricks-latency-1s", group_wait=2, kinds=KINDS, load=LOAD,
                            peak_rps=200)
    burn = _slow("vendor", 1.0, tail=0.1, tail_factor=10.0) / (1 - _goal("databricks-latency-1s"))
    assert pred.slo == "llm-inference-databricks-latency-1s" and pred.burn == pytest.approx(burn, rel=1e-5)
    # each pair at F x L / B on the 10 s grid, + for 20 s; the 99.9% SLO's fast tier at 30x, for 0s
    expected = {pair: _fires(f, long, burn) for pair, (f, long) in PAIRS.items()}
    expected |= {pair: _fires(f, long, burn, 0) for pair, (f, long) in LATENCY_FAST.items()}
    assert expected[("1h", "5m")] == 570  # 13.44 x 3600 / ~88.5 = ~547 s -> 550 s, + 20 s
    assert expected[("5m", "1m")] == 110  # 30 x 300 / ~88.5 = ~102 s -> 110 s
    got = {(t.long, t.short): t.predicted_seconds for t in pred.tiers}
    assert got == expected
    page = expected[("5m", "1m")] + 2
    assert pred.predicted_detection_seconds == expected[("5m", "1m")] and pred.predicted_page_seconds == page
    assert {h.hop: h.predicted_seconds for h in pred.hops} == \
        {"detect": page - 2, "page": page, "mitigate": None, "ticket": None}
    assert derived_timeout(pred, 240) == (page + CHAIN_MARGIN, f"predicted page {page}s + margin {CHAIN_MARGIN}s")


def test_internal_capacity_loss_sheds_its_rate_and_queues_the_rest(plans):
    fault = _fault("internal-capacity-loss")
    assert (fault.kind, fault.backend, fault.params) == ("gpu-capacity-loss", "internal", {"rate": 0.3, "factor": 2})
    pred = chain_prediction(plans, fault.kind, dict(fault.params), "internal", SPLIT,
                            slo="llm-inference-internal-availability", group_wait=2, kinds=KINDS, load=LOAD,
                            peak_rps=200)
    # shed: 0.3 of internal's requests fail (0.24 time out, 0.06 get a 503), against 1e-4
    budget = 1 - _goal("internal-availability")
    burns = {_short(r.slo): r for r in pred.slos}
    assert burns["internal-availability"].burn == pytest.approx(0.3 / budget)
    assert burns["service-availability"].burn == pytest.approx(0.3 * 0.2 / budget)
    # queued: the answered rest twice as slow, every timeout over any bound
    lost = {"log_factor": math.log(2), "timeout": 0.24, "server": 0.06}
    for slo, bad in {"internal-latency-1s": _slow("internal", 1.0, **lost),
                     "internal-latency-500ms": _slow("internal", 0.5, **lost),
                     "service-latency-1s": 0.2 * _slow("internal", 1.0, **lost) + 0.8 * _slow("vendor", 1.0),
                     "service-latency-500ms": 0.2 * _slow("internal", 0.5, **lost) + 0.8 * _slow("vendor", 0.5)}.items():
        assert burns[slo].bad_share == pytest.approx(bad, rel=1e-5), slo
        assert burns[slo].burn == pytest.approx(bad / (1 - _goal(slo)), rel=1e-5), slo
    assert not any(_short(r.slo).startswith("databricks") for r in pred.slos)
    burn = 0.3 / budget  # 3000x: the fast tier 300 x 5m / 3000 = 30 s, for 0
    expected = {pair: _fires(f, long, burn) for pair, (f, long) in PAIRS.items()}
    expected |= {pair: _fires(f, long, burn, 0) for pair, (f, long) in FAST.items()}
    assert expected == {("1h", "5m"): 40, ("6h", "30m"): 70, ("5m", "1m"): 30}
    assert {(t.long, t.short): t.predicted_seconds for t in pred.tiers} == expected
    assert pred.predicted_page_seconds == 32
    assert derived_timeout(pred, 240) == (32 + CHAIN_MARGIN, f"predicted page 32s + margin {CHAIN_MARGIN}s")


def test_a_capacity_loss_below_every_factor_predicts_no_page_and_only_the_margin(plans):
    # 0.05% shed burns 5x internal's availability budget (under 5.6 and 13.44) and the 1.1x
    # slowdown keeps the latency SLOs far under theirs
    params = {"rate": 0.0005, "factor": 1.1}
    pred = chain_prediction(plans, "gpu-capacity-loss", params, "internal", SPLIT, slo=None, group_wait=2,
                            kinds=KINDS, load=LOAD, peak_rps=200)
    assert max(r.burn for r in pred.slos) == pytest.approx(0.0005 / 1e-4)
    assert all(r.predicted_seconds is None for r in pred.slos)
    assert pred.predicted_page_seconds is None and pred.no_page.startswith("no page predicted")
    seconds, why = derived_timeout(pred, 240)
    assert seconds == CHAIN_MARGIN and "no page predicted" in why and f"the margin {CHAIN_MARGIN}s alone" in why


def test_traffic_under_the_minimum_guard_pages_on_ten_bad_events_and_never_on_fewer(plans):
    fault = _fault("vendor-latency")
    # 1.5 requests/s at peak x 0.6: 0.72/s on databricks, 0.9/s on the service, both under the
    # page pairs' minimum of 1.0/s over the short window; but ~8.9% of databricks' answers are slow:
    # 0.72 x 0.089 x 300 = ~19 bad events over 5m, at least the pairs' min_bad_events of 10, reached
    # 10 / 0.064 = ~156 s in, before the 1h/5m factor (570 s): the pairs fire as at full traffic.
    # The fast tier keeps its rate guard alone: never.
    pred = chain_prediction(plans, fault.kind, dict(fault.params), "databricks", SPLIT,
                            slo="llm-inference-databricks-latency-1s", group_wait=2, kinds=KINDS, load=LOAD,
                            peak_rps=1.5)
    burn = _slow("vendor", 1.0, tail=0.1, tail_factor=10.0) / (1 - _goal("databricks-latency-1s"))
    got = {(t.long, t.short): t for t in pred.tiers}
    assert got[("5m", "1m")].predicted_seconds is None and "minimum-traffic guard" in got[("5m", "1m")].why
    assert {pair: got[pair].predicted_seconds for pair in PAIRS} == {
        pair: _fires(f, long, burn) for pair, (f, long) in PAIRS.items()}
    # 0.1 requests/s at peak: 0.048/s on databricks, ~1.3 bad events over 5m and ~7.6 over the 6h/30m
    # pair's 30m (the service's 0.06/s x ~7.1% x 1800 s: ~7.6 too), under 10: never
    pred = chain_prediction(plans, fault.kind, dict(fault.params), "databricks", SPLIT,
                            slo="llm-inference-databricks-latency-1s", group_wait=2, kinds=KINDS, load=LOAD,
                            peak_rps=0.1)
    assert all(t.predicted_seconds is None and "minimum-traffic guard" in t.why for t in pred.tiers)
    assert all(r.predicted_seconds is None for r in pred.slos)
    assert pred.no_page.startswith("no page predicted")


def test_when_the_named_slo_is_guarded_the_page_comes_from_the_one_that_fires(plans):
    from dataclasses import replace

    # the bad-event clause off (alerting.*.min_bad_events: 0): only the rate guards
    plans = [replace(p, alerts=tuple(replace(a, min_bad_events=0.0) for a in p.alerts)) for p in plans]
    fault = _fault("vendor-latency")
    # 2 requests/s at peak x 0.6: 0.96/s on databricks (guarded), 1.2/s on the service (not)
    pred = chain_prediction(plans, fault.kind, dict(fault.params), "databricks", SPLIT,
                            slo="llm-inference-databricks-latency-1s", group_wait=2, kinds=KINDS, load=LOAD,
                            peak_rps=2)
    burn = (0.8 * _slow("vendor", 1.0, tail=0.1, tail_factor=10.0) + 0.2 * _slow("internal", 1.0)) \
        / (1 - _goal("service-latency-1s"))
    assert pred.slo == "llm-inference-service-latency-1s"
    # its fast tier first: 30 x 300 / ~70.7 = ~127 s -> 130 s (the 1h/5m pair: 710 s)
    assert pred.predicted_detection_seconds == _fires(*LATENCY_FAST[("5m", "1m")], burn, 0) == 130
    assert "is not predicted to page" in pred.note


def test_a_uniform_latency_spike_moves_every_answer(plans):
    # latency-spike at the parser's default factor 3 on databricks: the 500 ms SLO burns fastest
    got = {_short(b.slo): b for b in latency_burns(plans, "latency-spike", {"factor": 3.0}, "databricks", SPLIT,
                                                      KINDS, LOAD)}
    bad = _slow("vendor", 0.5, log_factor=math.log(3))
    assert got["databricks-latency-500ms"].bad_share == pytest.approx(bad, rel=1e-5)
    pred = chain_prediction(plans, "latency-spike", {"factor": 3.0}, "databricks", SPLIT, slo=None, group_wait=2,
                            kinds=KINDS, load=LOAD, peak_rps=200)
    burn = bad / (1 - _goal("databricks-latency-500ms"))
    assert pred.slo == "llm-inference-databricks-latency-500ms"
    assert pred.predicted_detection_seconds == _fires(*PAIRS[("1h", "5m")], burn)


def test_the_chain_runner_predicts_a_latency_fault_at_the_load_of_its_onset(chain_cfg):
    from opsctl.clock import parse_rfc3339
    from opsctl.drills.chain.runner import ChainDrill

    user, cfg = chain_cfg
    drill = ChainDrill(load_scenario(CHAOS / "vendor-latency.yaml"), user, routing=None, timeout=None)
    drill.cfg, drill.group_wait = cfg, 2.0
    # Wednesday 2026-11-18 14:00 US Eastern (19:00Z): the weekly profile's peak knot (1.00 at 14h,
    # 0.99 at 15h), so the load at the step's midpoint 5 s later is 1 - 0.01 x 5 / 3600
    onset = parse_rfc3339("2026-11-18T19:00:00Z")
    pred = drill._predict({"backend": "databricks", "on_at": onset})
    load = 1.0 - 0.01 * 5 / 3600
    burn = _slow("vendor", 1.0, tail=0.1, tail_factor=10.0, load=load) / (1 - _goal("databricks-latency-1s"))
    assert pred.slo == "llm-inference-databricks-latency-1s"
    assert pred.burn == pytest.approx(burn, rel=1e-5)
    assert pred.predicted_page_seconds == _fires(*LATENCY_FAST[("5m", "1m")], burn, 0) + 2  # the fast tier first


def test_a_live_chain_drill_does_not_predict_latency_or_capacity_faults_from_the_simulator(chain_cfg):
    from opsctl.clock import parse_rfc3339
    from opsctl.drills.chain.runner import ChainDrill

    user, cfg = chain_cfg
    drill = ChainDrill(load_scenario(CHAOS / "vendor-latency.yaml"), user, routing=None, timeout=None)
    drill.cfg, drill.group_wait, drill.mode = cfg, 2.0, "live-chain"  # the mode LiveChainDrill runs in
    pred = drill._predict({"backend": "databricks", "on_at": parse_rfc3339("2026-11-18T19:00:00Z")})
    assert pred is None
    assert derived_timeout(pred, 240) == (240, "no prediction for this fault: the default 240s")
    capacity = ChainDrill(load_scenario(CHAOS / "internal-capacity-loss.yaml"), user, routing=None, timeout=None)
    capacity.cfg, capacity.group_wait, capacity.mode = cfg, 2.0, "live-chain"
    assert capacity._predict({"backend": "internal", "on_at": parse_rfc3339("2026-11-18T19:00:00Z")}) is None
