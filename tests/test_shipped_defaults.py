"""The shipped defaults agree with each other: one number for the GPU pods that are billed and the
ones that carry a failover, and every scenario's words say the fault rate its method injects."""

from __future__ import annotations

import re

import pytest
import yaml

from opsctl.config import BUILTIN_CONFIG, load_config_file
from tests.cli.inprocess import invoke
from tests.conftest import REPO, write_config

WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
         "ten": 10, "a": 1}
PARTS = {"half": 2, "third": 3, "quarter": 4, "fifth": 5, "tenth": 10}


def stated_rates(text: str) -> list[float]:
    """Fractions of requests the prose states: '10% of requests', 'one request in ten', 'a fifth of its requests'."""
    found = [int(n) / 100 for n in re.findall(r"(\d+)% of (?:\w+ )?requests", text)]
    found += [WORDS[a] / WORDS[b] for a, b in re.findall(r"\b(\w+) requests? in (\w+)", text)
              if a in WORDS and b in WORDS]
    found += [1 / PARTS[p] for p in re.findall(r"\ba (half|third|quarter|fifth|tenth) of (?:its |the )?requests", text)]
    return found


def test_the_billed_gpu_replicas_are_the_capacity_replicas():
    cfg = load_config_file(BUILTIN_CONFIG)
    raw = yaml.safe_load(BUILTIN_CONFIG.read_text())
    assert "replicas" not in raw["cost"]["backends"]["internal"]["gpu"], "one source of truth: capacity.replicas"
    assert cfg.capacity.backend == "internal" and cfg.capacity.source == "static"
    assert cfg.cost.backends["internal"].gpu.replicas == raw["capacity"]["replicas"]


def test_the_cost_report_bills_the_capacity_replicas(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert invoke("sim", "generate", "--days", "1", "--end", "2026-11-20T00:00:00Z", "-o", "json").exit_code == 0
    result = invoke("cost", "report", "--window", "1d", "-o", "json")
    assert result.exit_code == 0, result.output
    raw = yaml.safe_load(BUILTIN_CONFIG.read_text())
    gpu = raw["cost"]["backends"]["internal"]["gpu"]
    [internal] = [b for b in __import__("json").loads(result.stdout)["backends"] if b["backend"] == "internal"]
    expected = raw["capacity"]["replicas"] * gpu["gpus_per_replica"] * 24 * gpu["gpu_hourly_price"]
    assert internal["cost"] == pytest.approx(expected)


def test_a_gpu_price_without_replicas_needs_a_static_capacity_for_that_backend(tmp_path):
    cfg = write_config(tmp_path, "cost: {backends: {internal: {gpu: {gpu_hourly_price: 3.5}}}}\n")
    result = invoke("--config", cfg, "config", "validate")
    assert result.exit_code == 2
    assert "cost.backends.internal.gpu: give replicas or replicas_query" in result.stderr


@pytest.mark.parametrize("path", sorted((REPO / "chaos").glob("*.yaml")), ids=lambda p: p.stem)
def test_a_scenario_states_the_rate_its_fault_injects(path):
    text = path.read_text()
    data = yaml.safe_load(text)
    rates = {value for step in data.get("method", []) if "fault" in step
             for key, value in step["fault"].items() if key in ("rate", "auth_rate")}  # auth_rate: the 401s
    stated = stated_rates(text)
    for rate in stated:
        assert any(rate == pytest.approx(r) for r in rates), f"{path.name} states {rate:g}, injects {sorted(rates)}"
    if rates and len(rates) == 1:
        assert stated, f"{path.name} never says what share of requests fails"


def test_stated_rates_reads_the_forms_the_scenarios_use():
    assert stated_rates("answers 5xx to a fifth of its requests") == [0.2]
    assert stated_rates("(one request in ten)") == [0.1]
    assert stated_rates("three requests in ten get 429") == [0.3]
    assert stated_rates("answers 429 to 30% of requests") == [0.3]
