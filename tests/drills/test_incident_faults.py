"""Faults that model the incidents a team running this service meets, read back from the raw counts
in the drill's store (sqlite3, not opsctl): a latency tail on a share of the requests (not a uniform
slowdown), 401s and 429s at the vendor's auth layer counted against availability, a dropped
beginning-of-text token."""

from __future__ import annotations

import json

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
