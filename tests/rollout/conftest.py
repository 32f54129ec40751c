"""Rollout test environment: one day of healthy client-side metrics (built once), configs with the
file actuator and local state, or the ConfigMap actuator and the Kubernetes state store on the
loopback fake API server."""

from __future__ import annotations

from pathlib import Path

import pytest

from opsctl.metrics.embedded import EmbeddedStore
from tests.slo import data as d

END = 1_795_000_000  # newest data point: the analyses' evidence and the guards' instant
DAY = 8640  # 10-second steps
PER_STEP = {"databricks": 8000, "internal": 2000}  # 800 + 200 rps: 1000 rps in all


@pytest.fixture(scope="session")
def healthy_store(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("rollout-metrics") / "metrics.sqlite"
    store = EmbeddedStore.open(path, create=True)
    try:
        d.write(store, {b: d.make_traffic(END, DAY, n) for b, n in PER_STEP.items()})
    finally:
        store.close()
    return path
