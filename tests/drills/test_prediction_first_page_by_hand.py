"""The earliest page over every fault of a multi-fault scenario (issue 37 item 3), with its times
worked by hand: prediction.first_page on the repository's config (rules evaluated every 60 s, the
fast tier 5m/1m above 300x for 0s, the PagerDuty routes' group_wait 1 s), its cause and the ticket
that cause files (none for an internal fault)."""

from __future__ import annotations

import math

import yaml

from opsctl.config import load_config_file
from opsctl.drills.prediction import first_page
from opsctl.drills.scenario import load_scenario
from opsctl.slo.loading import load_slos
from opsctl.slo.rule_plan import RuleSettings, plan_rules
from tests.drills.conftest import CHAOS, DrillEnv

T0 = 1_763_474_460.0  # any instant: the load changes neither a backend SLO's burn nor the grid
SPLIT = {"databricks": 80.0, "internal": 20.0}
TICK, FAST_FACTOR, FAST_LONG, FAST_SHORT, GROUP_WAIT = 60, 300, 300, 60, 1.0


def fast_tier_page(error_share: float, budget: float = 1e-4) -> float:
    """By hand: burn B = share / budget; the fast tier fires once both windows' ratios reach 300x
    the budget, the longer (5m) after 300 x 300 s / B; the next 60 s evaluation; for 0s; + 1 s."""
    burn = error_share / budget
    crossing = max(FAST_FACTOR * FAST_LONG / burn, FAST_FACTOR * FAST_SHORT / burn)
    return math.ceil(crossing / TICK) * TICK + GROUP_WAIT


def predict(tmp_path, path):
    env = DrillEnv(tmp_path)
    cfg = load_config_file(env.config)
    plans = plan_rules(load_slos([cfg.slo_dir], cfg.backends, config=cfg), RuleSettings.from_config(cfg))
    return first_page(cfg, load_scenario(path), plans, SPLIT, start=T0, tick=cfg.alerting.interval_seconds)


def test_the_slow_token_endpoint_pages_first_for_auth_and_files_a_platform_ticket(tmp_path):
    pages = predict(tmp_path, CHAOS / "slow-token-endpoint.yaml")
    first = pages.first
    # auth_rate 0.15 + timeout_rate 0.05 of databricks' requests fail: B = 0.20 / 1e-4 = 2000;
    # 300 x 300 s / 2000 = 45 s -> the 60 s evaluation -> paged at 61 s. 401s outnumber timeouts: auth.
    assert fast_tier_page(0.15 + 0.05) == 61.0
    assert first is not None and (first.fault, first.slo) == (0, "llm-inference-databricks-availability")
    assert (first.detect_seconds, first.page_seconds) == (60.0, 61.0)
    assert (first.cause, first.ticket_category) == ("auth", "platform")  # not server_error / inference


def test_both_degraded_pages_first_for_the_internal_loss_with_no_ticket(tmp_path):
    pages = predict(tmp_path, CHAOS / "both-degraded.yaml")
    loss, tail = pages.faults
    # a third of the internal pods lost: 0.33 of internal's requests fail, B = 3300; 300 x 300 / 3300
    # = 27 s -> 60 s -> 61 s. The vendor's tail comes 3m later (the method's pause) and pages after it.
    assert (loss.onset_seconds, loss.page_seconds) == (0.0, fast_tier_page(0.33)) == (0.0, 61.0)
    assert tail.onset_seconds == 180.0 and tail.page_seconds is not None and tail.page_seconds > 180.0
    assert pages.first == loss
    assert (loss.cause, loss.ticket_category) == ("timeout", None)  # internal: no vendor to file with
    assert (tail.cause, tail.ticket_category) == ("latency", "inference")


def test_when_the_second_fault_pages_sooner_it_is_the_first_page(tmp_path):
    data = yaml.safe_load((CHAOS / "both-degraded.yaml").read_text())
    loss, tail = data["method"]
    tail["pauses"], loss["pauses"] = {"before": "1m"}, {"before": "1m"}
    data["method"] = [tail, loss]  # the vendor's tail first, the internal loss a minute later
    path = tmp_path / "swapped.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    pages = predict(tmp_path, path)
    tail_page, loss_page = pages.faults
    # the loss: onset 60 s + its own 61 s = 121 s, sooner than the tail's page (over 60 s at its onset 0)
    assert loss_page.onset_seconds == 60.0 and loss_page.page_seconds == 60.0 + fast_tier_page(0.33) == 121.0
    assert tail_page.page_seconds is not None and tail_page.page_seconds > loss_page.page_seconds
    assert pages.first == loss_page and pages.first.fault == 1
    assert pages.first.ticket_category is None
