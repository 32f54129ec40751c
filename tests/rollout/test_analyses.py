"""The plan's analyses: typed args, and checks that read evidence (the embedded store's gauges and
counters), never numbers typed in; missing evidence is inconclusive, never a pass."""

from __future__ import annotations

import shutil

import pytest

from opsctl.errors import ConfigError
from opsctl.rollout.plan import build_plan, classify
from tests.conftest import write_config
from tests.rollout.conftest import END


def plan_with(analysis: dict, kind: str = "ramp") -> dict:
    body = {"ramp": {"steps": [{"weight": 20, "soak": "1h"}], "analysis": [analysis]}}
    return {"name": "p", "backend": "databricks", "baseline": "internal", "stages": [body]}


def test_an_argument_a_check_does_not_take_is_refused_with_its_key_path():
    analysis = {"check": "burn-rate", "success": "result.max_burn < 1", "failure": "result.max_burn >= 6",
                "args": {"threshold": 0.5}}
    with pytest.raises(ConfigError) as err:
        build_plan(plan_with(analysis), "p.yaml")
    assert any("stages[0].ramp.analysis[0]" in p and "threshold is not an argument of burn-rate" in p
               for p in err.value.problems)
    unknown = dict(analysis, args={"thresold": 0.5})
    with pytest.raises(ConfigError) as err:
        build_plan(plan_with(unknown), "p.yaml")
    assert any("args.thresold: unknown key" in p for p in err.value.problems)


@pytest.fixture
def cfg(tmp_path, healthy_store):
    from opsctl.config.loading import load_config_file

    (tmp_path / "state").mkdir()
    shutil.copy(healthy_store, tmp_path / "state" / "metrics.sqlite")
    return load_config_file(write_config(tmp_path, "freezes: []\n"))


def push_probe(cfg, match: float, threshold: float) -> None:
    from opsctl.quality import names
    from opsctl.quality.push.base import Sample
    from opsctl.quality.push.embedded import EmbeddedSink

    labels = {names.LABEL_SERVICE: cfg.service, names.LABEL_BACKEND: "databricks", names.LABEL_REFERENCE: "internal"}
    EmbeddedSink(cfg.state_path / "metrics.sqlite").push(
        [Sample(names.EXACT_MATCH, match, labels), Sample(names.EXACT_MATCH_THRESHOLD, threshold, labels)], END - 60)


CONSISTENCY = {"check": "consistency", "success": "result.ok == true", "failure": "result.ok == false"}


@pytest.mark.parametrize("match,floor,kind", [(0.93, 0.90, "successful"), (0.85, 0.90, "failed")])
def test_consistency_reads_the_probes_exact_match_against_its_noise_floor(cfg, match, floor, kind):
    from opsctl.rollout.analyses import Evidence, measure

    push_probe(cfg, match, floor)
    plan = build_plan(plan_with(CONSISTENCY), "p.yaml")
    analysis = plan.stages[0].ramp.analysis[0]
    result = measure(analysis, Evidence(cfg, plan, END))
    assert result == {"exact_match": match, "floor": floor, "ok": match >= floor}
    assert classify(analysis, result) == kind


def test_a_check_without_evidence_is_inconclusive_not_a_pass(cfg):
    from opsctl.rollout.analyses import Evidence, measure

    plan = build_plan(plan_with(CONSISTENCY), "p.yaml")  # no probe gauges pushed
    analysis = plan.stages[0].ramp.analysis[0]
    result = measure(analysis, Evidence(cfg, plan, END))
    assert set(result) == {"error"}
    assert classify(analysis, result) == "inconclusive"
    # the burn rate an hour after the newest data: no requests in its windows, so no burn to judge
    burn = build_plan(plan_with({"check": "burn-rate", "success": "result.max_burn < 1",
                                 "failure": "result.max_burn >= 6"}), "p.yaml")
    a = burn.stages[0].ramp.analysis[0]
    assert classify(a, measure(a, Evidence(cfg, burn, END + 7 * 86400))) == "inconclusive"
    assert classify(a, measure(a, Evidence(cfg, burn, END))) == "successful"  # the healthy day itself
