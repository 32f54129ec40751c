"""Traffic test environment: a config with the file actuator, healthy metrics in the embedded store,
the real CLI in-process (child processes where races between processes are the point), and a loopback fake Kubernetes API server."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from opsctl.metrics.embedded import EmbeddedStore
from tests.conftest import REPO, run_opsctl, wait_until, write_config
from tests.slo import data as d

END = 1_795_000_000  # the newest data point; guards evaluate the SLOs here (embedded: newest data)
DAY = 8640  # 10-second steps
# Requests per 10-second step: databricks 800 rps + internal 200 rps = 1000 rps in all. (Multiples
# of 2000 keep tests/slo/data.py's latency shares exact, so healthy data meets every SLO.)
PER_STEP = {"databricks": 8000, "internal": 2000}
TOTAL_RPS = 1000.0


def healthy_traffic() -> dict[str, d.Traffic]:
    return {b: d.make_traffic(END, DAY, n) for b, n in PER_STEP.items()}


def write_metrics(path: Path, traffic: dict[str, d.Traffic]) -> None:
    store = EmbeddedStore.open(path, create=True)
    try:
        d.write(store, traffic)
    finally:
        store.close()


@pytest.fixture(scope="session")
def healthy_store(tmp_path_factory) -> Path:
    """One day of healthy traffic for both backends, built once and copied into each test."""
    path = tmp_path_factory.mktemp("metrics") / "metrics.sqlite"
    write_metrics(path, healthy_traffic())
    return path


def traffic_yaml(*, actuator: str = "file", capacity: str | None = None, freezes: str = "freezes: []",
                 rate: str = "{max_changes: 50, window: 1h}", extra_traffic: str = "", conflict_attempts: int = 3) -> str:
    capacity = capacity if capacity is not None else textwrap.dedent("""\
        capacity:
          backend: internal
          source: static
          replicas: 10
          rps_per_replica: 150
          headroom: 0.25
          max_replicas: 10
        """)
    return (textwrap.dedent(f"""\
        traffic:
          actuator: {actuator}
          default_split: {{databricks: 80, internal: 20}}
          rate_limit: {rate}
          conflict_attempts: {conflict_attempts}
        """) + textwrap.indent(textwrap.dedent(extra_traffic), "  ") + capacity + freezes + "\n")


class Env:
    """A test's opsctl world: its config file, state dir, and a CLI runner that uses it."""

    def __init__(self, root: Path, config: Path):
        self.root = root
        self.config = config
        self.state = root / "state"

    def run(self, *args: str, env: dict | None = None, input: str | None = None):
        return run_opsctl("--config", str(self.config), *args, env={"OPSCTL_ACTOR": "tester", **(env or {})},
                          cwd=self.root, input=input)

    def popen(self, *args: str, env: dict | None = None) -> subprocess.Popen:
        # A child process: for races between opsctl processes (one in-process run at a time).
        full_env = {k: v for k, v in os.environ.items() if k != "OPSCTL_CONFIG"}
        full_env.update({"PYTHONPATH": str(REPO), "OPSCTL_ACTOR": "tester", **(env or {})})
        return subprocess.Popen([sys.executable, "-m", "opsctl", "--config", str(self.config), *args],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=full_env, cwd=self.root)

    @property
    def split_file(self) -> Path:
        return self.state / "traffic" / "split.json"

    def stored(self) -> dict:
        return json.loads(self.split_file.read_text())

    def audit(self) -> list[dict]:
        path = self.state / "audit.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def ramp_state(self) -> dict | None:
        """The ramp document in the local state store."""
        path = self.state / "state" / "ramp.json"
        return json.loads(path.read_text())["data"] if path.exists() else None

    def wait_for(self, predicate, timeout: float = 30.0, what: str = "condition"):
        return wait_until(predicate, timeout, 0.05, what)


@pytest.fixture
def make_env(tmp_path, healthy_store):
    """make_env(metrics=True, **traffic_yaml options) -> Env."""

    def make(*, metrics: bool | dict = True, **options) -> Env:
        root = tmp_path / f"env{len(list(tmp_path.iterdir()))}"
        root.mkdir()
        (root / "state").mkdir()
        if metrics is True:
            shutil.copy(healthy_store, root / "state" / "metrics.sqlite")
        elif metrics:
            write_metrics(root / "state" / "metrics.sqlite", metrics)
        config = write_config(root, traffic_yaml(**options))
        return Env(root, config)

    return make


@pytest.fixture
def env(make_env) -> Env:
    return make_env()




def deployment(namespace: str, name: str, replicas: int) -> dict:
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": name}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                         "spec": {"containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.6.3",
                                                  "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}},
        },
    }


def kube_capacity(*, max_replicas: int, timeout: str = "5s") -> str:
    return textwrap.dedent(f"""\
        capacity:
          backend: internal
          source: kubernetes
          deployment: vllm
          rps_per_replica: 100
          headroom: 0.25
          max_replicas: {max_replicas}
          ready_timeout: {timeout}
          poll_interval: 1s
        """)
