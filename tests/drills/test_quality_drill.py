"""The quality-regression drill: the vendor drops the beginning-of-text token, nothing fails, and the
live quality rules page on-call naming quality within minutes; on-call holds the split and files the
vendor ticket in the inference category. The detection minute is recomputed here from the raw
counts in the drill's store (sqlite3, not opsctl), with the rule's arithmetic."""

from __future__ import annotations

import hashlib

import pytest

from tests.drills.conftest import CHAOS, DrillEnv, audit, ledger, store_rows, tickets

WINDOW = 600  # quality.rules.window in opsctl.yaml
FOR = 120  # prompt_tokens.for_duration
THRESHOLD = 0.5  # prompt_tokens.threshold, tokens per request
GUARD = 20000  # min_request_rate, requests/s

pytestmark = pytest.mark.slow  # one drill run, several seconds


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    env = DrillEnv(tmp_path_factory.mktemp("quality"))
    result = env.run("drill", "run", str(CHAOS / "quality-regression.yaml"), "-o", "json")
    return env, result, env.report(), env.run_dir()


def shift_from_raw_counts(run_dir, at: float) -> tuple[float, float, float]:
    """(|prompt tokens per request, databricks - internal|, the two request rates) over the window."""
    figures = []
    for backend in ("databricks", "internal"):
        rows = store_rows(run_dir, backend, at - WINDOW, at)
        requests = sum(r[c] for r in rows for c in r if c.startswith("req_"))
        figures.append((sum(r["prompt_tokens"] for r in rows) / requests, requests / WINDOW))
    return abs(figures[0][0] - figures[1][0]), figures[0][1], figures[1][1]


def test_the_drill_passes_holds_the_split_and_files_the_vendor_ticket(run):
    env, result, report, run_dir = run
    assert result.exit_code == 0, result.stderr[-3000:]
    assert report["outcome"] == "passed"
    assert all(v["passed"] for v in report["expectations"]), report["expectations"]
    assert not [e for e in audit(run_dir) if e.get("action") == "failover"]  # held: nothing moved
    [ticket] = tickets(run_dir)
    assert ticket["vendor"] == "databricks" and "drill" in ticket["tags"]


def test_the_page_names_quality_and_no_availability_alert_fired(run):
    env, result, report, run_dir = run
    incidents = ledger(run_dir)["incidents"]
    incidents = list(incidents.values()) if isinstance(incidents, dict) else incidents
    # The alert's own page (Alertmanager's PagerDuty receiver) and the hold-on-quality policy's page are
    # one PagerDuty incident (issue 36 item 1): Alertmanager's dedup key for the service's group on the
    # paging route, sha256 of its group key.
    key = hashlib.sha256(b'{}/{severity="page"}:{service="llm-inference"}').hexdigest()
    [page] = incidents
    assert page["dedup_key"] == key
    assert "Quality" in page["title"] and "availability" not in page["title"].lower(), page["title"]
    firing = [e for e in report["timeline"] if e.get("kind") == "alert" and "FIRING" in e.get("message", "")]
    assert firing and all("Quality" in e["message"] for e in firing), firing


def test_detection_is_the_first_minute_the_rule_held_for_two_minutes_in_the_raw_counts(run):
    env, result, report, run_dir = run
    state = env.state_of(run_dir)
    t0 = state["t0"]
    [verdict] = [v for v in report["expectations"] if v["name"] == "detected by the prompt-token rule"]
    fired = t0 + verdict["seconds"]

    def holds(at):
        shift, vendor_rate, internal_rate = shift_from_raw_counts(run_dir, at)
        return shift > THRESHOLD and vendor_rate >= GUARD and internal_rate >= GUARD

    # Fires at T: the condition held at T, T-1m and T-2m (for: 2m) and had not held at T-1m, T-2m
    # and T-3m together before (else it would have fired a minute earlier).
    assert all(holds(fired - k * 60) for k in range(FOR // 60 + 1))
    assert not all(holds(fired - 60 - k * 60) for k in range(FOR // 60 + 1))
    # The arithmetic bound: a 1-token shift over a 10m window passes 0.5 after half the window
    # (5m, give or take the sampling noise of ~0.1 token), plus `for: 2m`, on the minute grid.
    assert 6 * 60 <= verdict["seconds"] <= 9 * 60
    before = shift_from_raw_counts(run_dir, t0)[0]
    assert before < 0.3  # healthy: the two backends count the same prompts alike
