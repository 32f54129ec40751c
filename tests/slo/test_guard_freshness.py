"""Traffic guards judge the metrics' age one way on every source: data whose newest sample is older
than `metrics.max_data_age` is never "data present", and the age is shown."""

from __future__ import annotations

import json
import time

import pytest

from opsctl.metrics.embedded import EmbeddedStore
from tests.conftest import run_opsctl, write_config
from tests.slo import data as d
from tests.traffic.conftest import traffic_yaml

HOUR_STEPS = 360


def fresh_end(hours_ago: float) -> int:
    return int(time.time() - hours_ago * 3600) // 10 * 10


def traffic(end: int) -> dict:
    return {"databricks": d.make_traffic(end, 2 * HOUR_STEPS, 8000), "internal": d.make_traffic(end, 2 * HOUR_STEPS, 2000)}


def embedded_env(tmp_path, end: int):
    cfg = write_config(tmp_path, traffic_yaml(), max_data_age="5m")
    store = EmbeddedStore.open(tmp_path / "state" / "metrics.sqlite", create=True)
    d.write(store, traffic(end))
    store.close()
    return cfg


def move(cfg):
    return run_opsctl("--config", str(cfg), "traffic", "set", "databricks=70", "internal=30", "--reason", "rebalance",
                      "--yes", "-o", "json", env={"OPSCTL_ACTOR": "tester"})


def test_embedded_data_eleven_hours_old_is_refused_with_its_age(tmp_path):
    cfg = embedded_env(tmp_path, fresh_end(11))
    result = move(cfg)
    assert result.exit_code == 4, result.output
    guards = {g["name"]: g for g in json.loads(result.stdout)["guards"]}
    assert not guards["budget"]["ok"]
    assert "stale metrics" in guards["budget"]["message"] and "is 11h" in guards["budget"]["message"]
    assert "max_data_age 5m" in guards["budget"]["message"]


def test_fresh_embedded_data_passes_and_shows_its_age(tmp_path):
    cfg = embedded_env(tmp_path, fresh_end(0))
    result = move(cfg)
    assert result.exit_code == 0, result.output
    budget = {g["name"]: g for g in json.loads(result.stdout)["guards"]}["budget"]
    assert budget["ok"] and "newest sample" in budget["message"]
    assert 0 <= budget["details"]["data_age_seconds"] < 120


@pytest.mark.prometheus
@pytest.mark.slow
def test_prometheus_data_eleven_hours_old_is_refused_the_same_way(tmp_path):
    from tests.conftest import PrometheusServer

    om = tmp_path / "traffic.om"
    om.write_text(d.openmetrics(traffic(fresh_end(11))))
    (tmp_path / "prom").mkdir()
    server = PrometheusServer(tmp_path / "prom", openmetrics=om)
    try:
        cfg = write_config(tmp_path, traffic_yaml(), source="prometheus", prometheus_url=server.url, max_data_age="5m")
        result = move(cfg)
    finally:
        server.stop()
    assert result.exit_code == 4, result.output
    budget = {g["name"]: g for g in json.loads(result.stdout)["guards"]}["budget"]
    assert "stale metrics" in budget["message"] and "is 11h" in budget["message"], budget
