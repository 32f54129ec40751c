"""The story-scale configuration (examples/production/opsctl.yaml): it loads as shipped, sized as
deploy/serve/configmap.yaml sizes production, every shipped scenario passes embedded on it, and a
drill's restore-traffic rollback is never refused by a guard (decisions/0330)."""

from __future__ import annotations

import json
import math

import pytest

from tests.conftest import REPO
from tests.drills.conftest import CHAOS, DrillEnv, audit, shipped_params

PRODUCTION = REPO / "examples" / "production" / "opsctl.yaml"


def production_text(**replace: str) -> str:
    """The shipped file with its repository-relative paths made absolute (the test's state goes to a
    temp dir, not beside the example), and optional further replacements."""
    text = PRODUCTION.read_text().replace("../../", f"{REPO}/")
    for old, new in replace.items():
        assert old in text, old
        text = text.replace(old, new)
    return text


def test_the_shipped_file_loads_as_is_and_is_sized_as_production():
    from opsctl.config import load_config

    cfg = load_config(str(PRODUCTION))
    assert cfg.slo_dir.resolve() == (REPO / "slos").resolve()
    assert cfg.path(cfg.drills.scenarios).resolve() == CHAOS.resolve()
    assert cfg.path(cfg.runbooks.dir).resolve() == (REPO / "runbooks").resolve()
    assert cfg.path(cfg.state_dir).resolve() == PRODUCTION.parent.resolve() / ".opsctl"
    cap = cfg.capacity
    assert (cap.source, cap.replicas, cap.max_replicas, cap.rps_per_replica) == ("static", 400, 400, 200)
    assert cfg.runbooks.peak_rps == 200000
    assert cfg.traffic.default_split == {"databricks": 80, "internal": 20}
    # At the 200,000 requests/s peak the vendor's 80% (160,000) fits its provisioned throughput with
    # the configured headroom, and so does the whole peak: 200,000 x 1.2 = 240,000.
    vendor = cap.vendors["databricks"]
    assert vendor.requests_per_second >= 200000 * (1 + vendor.headroom)
    # Internal: 400 x 200 = 80,000 requests/s; with 25% headroom a share of 80,000 / 1.25 = 64,000,
    # 32% of the peak, as deploy/serve/configmap.yaml says.
    assert math.floor(100 * cap.replicas * cap.rps_per_replica / (1 + cap.headroom) / 200000) == 32


# On this config at the scenario's 200 requests/s (the story's peak is 200,000), internal's 400 pods carry the
# whole 80 points, so vendor-503-storm's failover is full, not partial as at the story's scale: the vendor
# carries no traffic, and a vendor has no readiness opsctl can read (no pods), so only a canary can tell: the
# first one moves 5 of 80 points back 4m59s after the failover, the storm still on, and fails back a minute
# later; no-flap fails. At 200,000 requests/s the failover is partial (12 points), the 68 left burn and hold the
# canary, but the drill stops at +7m on its own budget stop condition (decisions/0251).
STORY_SCALE_AWAITING = {"vendor-503-storm": "#36 item 5: no-flap fails: at 200 requests/s on this config the failover"
                                            " from databricks is full, the vendor carries no traffic and has no"
                                            " readiness source, so the first canary (4m59s after the failover, the"
                                            " storm still on) is the only probe; decisions/0251"}


def production_params():
    return [pytest.param(p, marks=pytest.mark.xfail(strict=True, reason=STORY_SCALE_AWAITING[p]))
            if isinstance(p, str) and p in STORY_SCALE_AWAITING else p for p in shipped_params()]


@pytest.mark.parametrize("name", production_params())
def test_every_shipped_scenario_passes_embedded_on_the_production_config(tmp_path, name):
    env = DrillEnv(tmp_path, production_text())
    result = env.run("drill", "run", str(CHAOS / f"{name}.yaml"), "-o", "json")
    report = json.loads(result.stdout)
    assert result.exit_code == 0, (report["outcome"], [v for v in report["verdicts"] if not v.get("ok")])
    assert report["outcome"] == "passed"
    assert report["clean"] and report["leftovers"] == []


def test_a_rollback_the_capacity_guard_would_refuse_restores_the_split_as_the_drills_override(tmp_path):
    # The vendor provisioned for 100 requests/s: at 200 requests/s peak the scenario's 80% on
    # databricks is more than 100 / 1.2 = 83 requests/s, so moving back to 80% is beyond what the
    # capacity guard lets through; the drill's own rollback restores it anyway, as its override.
    env = DrillEnv(tmp_path, production_text(**{
        "databricks: {requests_per_second: 240000, headroom: 0.2}": "databricks: {requests_per_second: 100, headroom: 0.2}"}))
    result = env.run("drill", "run", str(CHAOS / "vendor-outage.yaml"), "-o", "json")
    report = json.loads(result.stdout)
    run = env.run_dir()
    restore = [r for r in report["rollbacks"] if r["action"] == "restore-traffic"]
    assert [r["status"] for r in restore] == ["done"], restore
    assert restore[0]["message"] == "applied: internal 100 / databricks 0 -> internal 20 / databricks 80"
    assert report["clean"] and report["leftovers"] == []
    assert result.exit_code == 0 and report["outcome"] == "passed"
    state = env.state_of(run)
    [entry] = [e for e in audit(run) if e.get("kind") == "traffic" and e.get("operation") == f"drill-rollback-{state['run_id']}"]
    assert entry["outcome"] == "applied" and entry["drill_run"] == state["run_id"] and entry["emergency"] is True
    assert entry["after"]["weights"] == {"internal": 20, "databricks": 80}
    assert "capacity" in entry["overrides"]
    [capacity] = [g for g in entry["guards"] if g["name"] == "capacity"]
    assert capacity["ok"] and capacity["overridden"]
    assert capacity["message"].startswith(f"overridden (rollback of drill {state['run_id']}: it restores the split")
    assert "80% asked" in capacity["message"]
    # What the guard says it carries is below the 80% asked: without the override it refuses.
    assert capacity["details"]["fits"] < 80 and capacity["details"]["share"] == 80
