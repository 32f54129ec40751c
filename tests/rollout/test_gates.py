"""Every gate measurable before the rollout starts (issue 39 item 4): `rollout plan`, `rollout start`
(with and without --dry-run), `rollout run` and serve's controller refuse the same plans with the
same check (rollout/gates.py): an M2 check without answers, a gold file that is not beside the plan
(whatever the working directory), a cost week under cost.min_traffic_share."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import REPO, run_opsctl, write_config

GOLD = REPO / "rollouts" / "golden.m2"
ANSWERS = REPO / "chaos" / "migration" / "answers-databricks.txt"


def plan_file(directory: Path, m2_args: dict | None = None, cost_share: int = 30, weight: int = 10) -> Path:
    analysis = [{"check": "burn-rate", "success": "result.max_burn < 1", "failure": "result.max_burn >= 6"}]
    if m2_args is not None:
        analysis.append({"check": "m2", "success": "result.f05 >= 0.55", "failure": "result.f05 < 0.45",
                         "args": m2_args})
    data = {"name": "g", "backend": "databricks", "baseline": "internal", "start": "2026-11-02T09:00:00-05:00",
            "stages": [{"ramp": {"steps": [{"weight": weight, "soak": "1d"}], "analysis": analysis}},
                       {"cost": {"share": cost_share, "window": "7d",
                                 "analysis": [{"check": "cost", "success": "result.vendor_per_mtok <= 1.2",
                                               "failure": "result.vendor_per_mtok > 2"}]}}]}
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "plan.yaml"
    path.write_text(json.dumps(data))  # JSON is YAML
    return path


def refusals(cfg: Path, plan: Path, cwd: Path) -> dict[str, tuple[int, str]]:
    out = {}
    for name, args in {"plan": ("rollout", "plan", plan), "start --dry-run": ("rollout", "start", plan, "--dry-run"),
                       "start": ("rollout", "start", plan),
                       "run": ("rollout", "run", plan, "--out-dir", cwd / "run")}.items():
        r = run_opsctl("--config", cfg, *args, cwd=cwd)
        out[name] = (r.exit_code, r.output)
    return out


@pytest.fixture
def cfg(tmp_path):
    (tmp_path / "cfg").mkdir()
    path = write_config(tmp_path / "cfg", """\
traffic: {actuator: file, default_split: {internal: 100}}
cost:
  backends:
    internal: {gpu: {gpu_hourly_price: 3.5, gpus_per_replica: 1, replicas: 4}}
    databricks: {per_token: {input_per_million: 0.5, output_per_million: 1.5}}
""")
    return path


def test_an_m2_check_without_answers_is_refused_by_plan_start_and_run_alike(tmp_path, cfg):
    shutil.copy(GOLD, tmp_path / "golden.m2")
    plan = plan_file(tmp_path, {"gold": "golden.m2"})
    for name, (code, output) in refusals(cfg, plan, tmp_path).items():
        assert code == 2, (name, output)
        assert "stages[0].ramp.analysis[1].args.answers: m2 needs it" in output, (name, output)


def test_files_resolve_beside_the_plan_not_the_working_directory(tmp_path, cfg):
    plans = tmp_path / "plans"
    plans.mkdir()
    shutil.copy(GOLD, plans / "golden.m2")
    shutil.copy(ANSWERS, plans / "answers.txt")
    plan = plan_file(plans, {"gold": "golden.m2", "answers": "answers.txt"})
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    r = run_opsctl("--config", cfg, "rollout", "plan", plan, cwd=elsewhere)
    assert r.exit_code == 0, r.output
    r = run_opsctl("--config", cfg, "rollout", "start", plan, "-o", "json", cwd=elsewhere)
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["plan_dir"] == str(plans.resolve())
    # a gold file in the working directory but not beside the plan: refused, naming where it looked
    (plans / "golden.m2").rename(elsewhere / "golden.m2")
    r = run_opsctl("--config", cfg, "rollout", "plan", plan, cwd=elsewhere)
    assert r.exit_code == 2
    assert f"args.gold: golden.m2: no such file beside the plan ({plans / 'golden.m2'})" in r.output


def test_a_cost_week_under_the_minimum_share_is_refused_by_start_too(tmp_path, cfg):
    plan = plan_file(tmp_path, cost_share=3, weight=2)  # cost.min_traffic_share is 5% in the default
    for name, (code, output) in refusals(cfg, plan, tmp_path).items():
        assert code == 2, (name, output)
        assert "stages[1].cost.share: 3% is below cost.min_traffic_share (5%)" in output, (name, output)


def test_serve_pauses_before_the_first_step_when_a_gate_cannot_be_measured(tmp_path, healthy_store):
    """A rollout recorded elsewhere (its plan_dir on the laptop that started it) whose gold file this
    replica cannot find: the controller refuses the step before anything moves, not at its end."""
    from tests.rollout.test_controller import RAMP_CHECKS, World, plan_data

    world = World(tmp_path, healthy_store)
    checks = RAMP_CHECKS + [{"check": "m2", "success": "result.f05 >= 0.55", "failure": "result.f05 < 0.45",
                             "args": {"gold": "missing.m2", "answers": "missing.txt"}}]
    world.start(plan_data(checks=checks))
    controller = world.controller()
    assert controller.tick() == "paused"
    state = world.store().read()
    assert state.status == "paused" and state.paused_because.startswith("refused: a gate cannot be measured:")
    assert "args.gold: missing.m2: no such file beside the plan" in state.paused_because
    assert world.traffic().read().split.weight("databricks") == 0  # nothing moved
