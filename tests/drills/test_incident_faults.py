"""Faults that model the incidents a team running this service meets, read back from the raw counts
in the drill's store (sqlite3, not opsctl): a latency tail on a share of the requests (not a uniform
slowdown), 401s and 429s at the vendor's auth layer counted against availability, a dropped
beginning-of-text token."""

from __future__ import annotations

import json
import math

import pytest
import yaml

from tests.drills.conftest import CHAOS, DrillEnv, store_rows

BUCKETS = (0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 2.0, 5.0, 10.0)  # opsctl/metrics/schema.py, le_0..le_9


def le(seconds: float) -> str:
    return f"le_{BUCKETS.index(seconds)}"


def totals(rows: list[dict]) -> dict:
    return {k: sum(r[k] for r in rows) for k in rows[0] if k not in ("backend", "ts")}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    out = {}
    for name in ("vendor-latency", "auth-throttling"):
        env = DrillEnv(tmp_path_factory.mktemp(name))
        result = env.run("drill", "run", str(CHAOS / f"{name}.yaml"), "-o", "json")
        out[name] = (env, json.loads(result.stdout), env.run_dir())
    return out


def fault_params(name: str) -> dict:
    [step] = [s for s in yaml.safe_load((CHAOS / f"{name}.yaml").read_text())["method"] if s["action"] == "inject-fault"]
    return step["fault"]


def test_the_latency_tail_slows_its_share_of_answers_and_leaves_the_rest_as_fast(runs):
    env, report, run = runs["vendor-latency"]
    fault = fault_params("vendor-latency")
    assert fault["kind"] == "latency-tail"
    t0 = env.state_of(run)["t0"]
    before = totals(store_rows(run, "databricks", t0 - 600, t0))
    during = totals(store_rows(run, "databricks", t0, t0 + 600))  # before any failover could move it
    # The mixture, from the counts before the fault: a tail answer is slower than 1 s when its usual
    # self would have been slower than 1 s / factor (a bucket bound for the shipped factor 10).
    def above(rows, seconds):
        return 1 - rows[le(seconds)] / rows["lat_count"]

    share, factor = fault["share"], fault["factor"]
    expected = share * above(before, 1.0 / factor) + (1 - share) * above(before, 1.0)
    assert above(before, 1.0) < 0.001 and expected > 0.5 * share
    assert abs(above(during, 1.0) - expected) < 0.015, "the tail's share answers slower than 1 s"
    # A tail, not a uniform slowdown: the other answers keep their speed.
    assert abs(above(during, 0.5) - (share * above(before, 0.5 / factor) + (1 - share) * above(before, 0.5))) < 0.015
    assert during[le(0.2)] / during["lat_count"] > 0.5, "the median stays under 200 ms"
    # Nothing fails: availability's outcomes are as before.
    assert during["req_server_error"] + during["req_timeout"] + during["req_auth_error"] + during["req_throttled"] \
        < 0.001 * during["lat_count"]
    paged = next(v for v in report["expectations"] if v["expect"] == "paged")
    assert paged["passed"] and "latency" in paged["detail"]


def test_401s_and_429s_at_the_auth_layer_count_against_availability_and_the_page_names_auth(runs):
    env, report, run = runs["auth-throttling"]
    fault = fault_params("auth-throttling")
    t0 = env.state_of(run)["t0"]
    during = totals(store_rows(run, "databricks", t0, t0 + 120))
    total = during["lat_count"]
    assert abs(during["req_auth_error"] / total - fault["auth_rate"]) < 0.02  # 401: outcome auth_error
    assert abs(during["req_throttled"] / total - fault["rate"]) < 0.02  # 429: outcome throttled
    detected = next(v for v in report["expectations"] if v["expect"] == "detected")
    assert detected["passed"], "both count against availability: the availability page fires"
    # The burn the page reports is the auth layer's share over the 99.99% budget, give or take noise.
    bad = (during["req_auth_error"] + during["req_throttled"]) / total
    assert bad / 0.0001 > 1000
    paged = next(v for v in report["expectations"] if v["expect"] == "paged")
    assert paged["passed"] and "auth" in paged["detail"]


def test_the_report_sets_the_burn_rate_prediction_beside_the_measured_detection_and_each_hops_cost(runs):
    env, report, run = runs["vendor-latency"]
    pred = report["prediction"]
    assert pred["slo"] == "llm-inference-databricks-latency-1s"
    goal = yaml.safe_load((CHAOS.parent / "slos" / "databricks-latency-1s.yaml").read_text())["spec"]["goal"]
    t0 = env.state_of(run)["t0"]
    during = totals(store_rows(run, "databricks", t0, t0 + 600))
    burn = (1 - during[le(1.0)] / during["lat_count"]) / (1 - goal)  # from the raw counts
    assert abs(pred["burn"] - burn) / burn < 0.15
    # The 1h/5m page: 2% of a 28-day budget in an hour is a factor of 13.44; it holds when the hour's
    # average reaches it (13.44 x 3600 s / burn), on the drill's 60 s grid, then for: 2m.
    factor = 0.02 * 28 * 24
    expected = math.ceil(factor * 3600 / burn / 60) * 60 + 120
    [standard] = [t for t in pred["tiers"] if t["long"] == "1h"]
    assert standard["factor"] == pytest.approx(factor) and standard["for_seconds"] == 120
    assert abs(standard["predicted_seconds"] - expected) <= 60
    assert abs(pred["measured_detection_seconds"] - pred["predicted_detection_seconds"]) <= 60
    hops = {h["hop"]: h for h in pred["hops"]}
    detect, page = hops["detect"], hops["page"]
    assert detect["seconds"] == report["measurements"]["time_to_detect"]
    # The 99.9% latency SLO's fast tier (30x over 5m/1m) pages first. Alertmanager's page and the
    # automation's are one PagerDuty incident (issue 36), opened by the first: the automation's fast
    # route's 1 s group wait (the scenario's paging.fast-automation-group-wait default), before the fast
    # PagerDuty route's 5 s (the scenario model's paging.fast_group_wait default) and the slower 30 s.
    assert pred["burn_basis"].startswith("SloFastBurnPage 5m/1m")
    assert page["seconds"] - detect["seconds"] == 1
    # Spent by detection: the burn over the detection time, as a share of the 28-day period.
    assert 0.5 < detect["budget_spent"] / (burn * detect["seconds"] / (28 * 86400)) < 2
    assert page["budget_spent"] >= detect["budget_spent"]
    assert "The burn-rate maths' prediction" in (run / "report.md").read_text()
