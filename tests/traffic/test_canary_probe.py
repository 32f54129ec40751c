"""A vendor's readiness from the proxy's synthetic probes (opsctl/traffic/canary_readiness.py,
docs/decisions/0270): declared in the config, read through the metric source the guards read (the
embedded store and a real Prometheus backfilled by promtool), counted as the simulator draws them."""

from __future__ import annotations

import pytest

from opsctl.clock import parse_rfc3339
from opsctl.config import load_config
from opsctl.metrics import schema
from opsctl.metrics import simulator as sim
from opsctl.metrics.embedded import EmbeddedStore
from opsctl.traffic.canary_readiness import probe_queries, read_probe_readiness
from tests.conftest import run_opsctl, write_config

BACKENDS = {"databricks": "vendor", "internal": "internal"}
START = parse_rfc3339("2026-11-18T15:00:00Z")


def probed_config(directory, *, probe: str = "{success: 0.99, min_probes: 30}", **kwargs):
    path = write_config(directory, **kwargs)
    text = path.read_text().replace("databricks: {kind: vendor, vendor: databricks}",
                                    f"databricks: {{kind: vendor, vendor: databricks, probe: {probe}}}")
    path.write_text(text)
    return path


@pytest.mark.parametrize("probe, message", [
    ("{success: 1.5}", "backends.databricks.probe: success must be a share in (0, 1], e.g. 0.99 (got 1.5)"),
    ("{success: 0.99, min_probes: 0}",
     "backends.databricks.probe: min_probes must be a whole number from 1 to 1000000, e.g. 30 (got 0)"),
    ("{threshold: 0.99}", "backends.databricks.probe.threshold: unknown key (known keys: min_probes, success)"),
])
def test_a_bad_probe_in_the_config_is_one_line_naming_the_key_and_exit_2(tmp_path, probe, message):
    path = probed_config(tmp_path, probe=probe)
    result = run_opsctl("--config", str(path), "config", "validate")
    assert result.exit_code == 2
    assert message in result.stderr


def test_a_probe_on_the_backend_whose_pods_opsctl_counts_is_refused(tmp_path):
    path = write_config(tmp_path, "capacity: {backend: internal, source: static, replicas: 4, rps_per_replica: 100}\n")
    path.write_text(path.read_text().replace("internal: {kind: internal, description: vLLM pods}",
                                             "internal: {kind: internal, probe: {success: 0.99}}"))
    result = run_opsctl("--config", str(path), "config", "validate")
    assert result.exit_code == 2
    assert "backends.internal.probe: its readiness is its pods (capacity.backend)" in result.stderr


def test_the_shipped_configs_declare_the_vendors_probe():
    from tests.conftest import REPO

    for name in ("opsctl.yaml", "examples/production/opsctl.yaml"):
        probe = load_config(str(REPO / name)).backends["databricks"].probe
        assert probe is not None and (probe.success, probe.min_probes) == (0.99, 30), name


def storm() -> dict:
    """An hour at 200 requests/s; the vendor answers 503 + Retry-After to 40% (vendor-throttling) from
    15:20 to 15:40, failed over (0% of the traffic) from 15:10: its probes go on whatever its share."""
    from opsctl.drills.chain.faults import VendorThrottling

    fault = VendorThrottling("databricks", START + 1200, START + 2400, rate=0.4)
    return sim.simulate(START, START + 3600, seed=5, peak_rps=200, split={"databricks": 0, "internal": 100},
                        incidents=[fault])


def window_counts(series, at: float, window: int) -> dict[str, int]:
    """The probes of the steps ending in (at - window, at], counted from the simulated columns."""
    inside = (series.timestamps > at - window) & (series.timestamps <= at)
    return {o: int(series.columns[f"probe_{o}"][inside].sum()) for o in schema.PROBE_OUTCOMES}


def test_the_embedded_store_reads_the_vendors_probes_as_its_readiness(tmp_path):
    series = storm()
    path = probed_config(tmp_path)
    store = EmbeddedStore.open(tmp_path / "state" / "metrics.sqlite", create=True)
    sim.write_to_store(store, series)
    store.close()
    cfg = load_config(str(path))
    during, after = START + 1800, START + 2400 + 300  # in the storm; 5m after its end
    reading = read_probe_readiness(cfg, "databricks", during, 300)
    counts = window_counts(series["databricks"], during, 300)
    assert sum(counts.values()) == 300  # 10 a step for 30 steps, at 0% of the traffic
    assert (reading.ready, reading.desired) == (counts["ok"], 300)
    assert reading.failed == f"throttled {counts['throttled']}" and 90 < counts["throttled"] < 150  # 40% of 300
    assert reading.short and reading.known
    healed = read_probe_readiness(cfg, "databricks", after, 300)
    assert (healed.ready, healed.desired, healed.failed) == (300, 300, "") and not healed.short
    # The internal backend declares no probe: None (its pods are its readiness).
    assert read_probe_readiness(cfg, "internal", during, 300) is None
    # Before the store's data (nothing in the window): unknown, never ready.
    none = read_probe_readiness(cfg, "databricks", START - 3600, 300)
    assert not none.known and none.holds and none.error == "no probe of databricks in the last 300s"


def test_prometheus_answers_the_same_probe_readiness_from_the_exported_series(tmp_path, prometheus_factory):
    series = storm()
    exported = tmp_path / "probes.om"
    sim.export_openmetrics(series, str(exported))
    prom = prometheus_factory(openmetrics=exported)
    path = probed_config(tmp_path, source="prometheus", prometheus_url=prom.url)
    cfg = load_config(str(path))
    during, after = START + 1800, START + 2400 + 300
    reading = read_probe_readiness(cfg, "databricks", during, 300)
    counts = window_counts(series["databricks"], during, 300)
    # increase() over 5m of 10 s samples counts 29 steps' deltas and extrapolates to the window: 300
    # probes give or take a step's 10; the share of failures is the storm's.
    assert reading.known and reading.where.startswith(f"llm_proxy_probes_total in Prometheus at {prom.url}")
    assert abs(reading.desired - 300) <= 11
    assert abs(reading.ready / reading.desired - counts["ok"] / 300) < 0.05
    assert reading.short
    healed = read_probe_readiness(cfg, "databricks", after, 300)
    assert healed.failed == "" and not healed.short
    # Before the exported history (no sample in the window): unknown.
    silent = read_probe_readiness(cfg, "databricks", START - 7200, 300)
    assert not silent.known and silent.error == "no probe of databricks in the last 300s"


def test_the_probe_queries_carry_the_services_matcher_and_one_outcome_each(tmp_path):
    path = probed_config(tmp_path)
    path.write_text(path.read_text().replace("metrics:\n", "metrics:\n  service_label: service\n", 1))
    cfg = load_config(str(path))
    queries = probe_queries(cfg, "databricks", 300)
    assert queries[0] == ('sum(increase(llm_proxy_probes_total{service="llm-inference",backend="databricks",'
                          'outcome="ok"}[300s]))')
    assert [q.split('outcome="')[1].split('"')[0] for q in queries] == list(schema.PROBE_OUTCOMES)
