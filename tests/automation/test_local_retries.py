"""Local mode retries follow the incident, not a counter (issue 36 item 3).

`opsctl serve` without shared state (the real server on 127.0.0.1, a subprocess) fails traffic over
through the configmap actuator on the loopback API server (tests/fakes/kube_api.py). The actuator is
down when the page-level alert arrives, for 10 s in one run and 60 s in the other. Before issue 36,
local mode gave up after three tries (about 6 s) and the split stayed 80/20 for the rest of the
outage. Now the failover is retried with capped backoff until it acts: once the API server is back
it applies, once, and the incident has at most one "FAILED; act now" page (later failures are notes).

Counted, not timed: the failover attempts the service recorded while the actuator was down (more
than the old three for the 60 s outage), the split changes on the ConfigMap (one), and the pages.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from tests.automation.helpers import FAILOVER_POLICY, Serve, actions, alert, message, wait_for, write_serve_config
from tests.fakes.kube_api import FakeKubeAPI

pytestmark = [pytest.mark.slow]

NS = "llm"
SPLIT_CM = "grammar-traffic-split"
NORMAL = {"databricks": 80, "internal": 20}
FAILED_OVER = {"databricks": 0, "internal": 100}
FIRING = message(alert(fingerprint="d1", starts_at="2026-11-29T12:00:00.5Z"))
OLD_MAX_ATTEMPTS = 3  # what local mode used to stop at (idempotency.MAX_ATTEMPTS, deleted)


def local_config(directory: Path, api_url: str, healthy_store: Path) -> Path:
    (directory / "state").mkdir(parents=True, exist_ok=True)
    shutil.copy(healthy_store, directory / "state" / "metrics.sqlite")
    extra = f"""\
metrics: {{max_data_age: 3650d}}  # the healthy store holds a day ending at a fixed past instant
traffic:
  actuator: configmap
  kubernetes: {{host: "{api_url}", namespace: {NS}, timeout: 1}}
  configmap: {{name: {SPLIT_CM}, key: split.json}}
  rate_limit: {{max_changes: 50, window: 1h}}
capacity: {{backend: internal, source: static, replicas: 10, rps_per_replica: 150, headroom: 0.25, max_replicas: 10}}
paging: {{provider: local}}
tickets:
  provider: local
  vendors:
    databricks:
      categories: {{inference: Model Serving, platform: Workspace}}
      severities: {{Sev1: "Severity 1", Sev2: "Severity 2", Sev3: "Severity 3", Sev4: "Severity 4"}}
freezes: []
"""
    return write_serve_config(directory, policies=FAILOVER_POLICY, automation_extra="hold_down: 1h\n", extra=extra)


def split(api: FakeKubeAPI) -> dict | None:
    cm = api.get("", "configmaps", NS, SPLIT_CM)
    return json.loads(cm["data"]["split.json"])["weights"] if cm else None


def paging(directory: Path) -> dict:
    path = directory / "state" / "paging" / "ledger.json"
    return json.loads(path.read_text()) if path.exists() else {}


def triggers(directory: Path) -> list[dict]:
    return [e for i in paging(directory).get("incidents", []) for e in i["log"] if e["type"] == "trigger"]


def failed_pages(directory: Path) -> list[dict]:
    """Triggers whose summary is the "FAILED; act now" page."""
    return [e for e in triggers(directory) if "FAILED" in json.dumps(e)]


@pytest.mark.parametrize("outage", [10.0, 60.0], ids=["actuator-down-10s", "actuator-down-60s"])
def test_local_mode_retries_the_failover_until_the_actuator_is_back_and_pages_failed_at_most_once(
        tmp_path, healthy_store, outage):
    api = FakeKubeAPI().start()
    api.seed({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": SPLIT_CM, "namespace": NS},
              "data": {"split.json": json.dumps({"weights": NORMAL, "shadow": {}})}})
    server = None
    try:
        server = Serve(local_config(tmp_path, api.url, healthy_store))
        api.down()  # the actuator is gone when the alert arrives
        went_down = time.monotonic()
        assert server.post_alertmanager(FIRING).status == 202
        wait_for(lambda: [a for a in actions(tmp_path, "failover") if a["status"] == "failed"], timeout=30,
                 what="the first failover attempt to fail")
        time.sleep(max(0.0, outage - (time.monotonic() - went_down)))
        tried_while_down = len([a for a in actions(tmp_path, "failover") if a["status"] == "failed"])
        api.up()
        # Back: the next retry (at most the 30 s backoff cap plus the 5 s sweep grace away) applies.
        wait_for(lambda: split(api) == FAILED_OVER, timeout=60, what="the failover once the actuator is back")
        wait_for(lambda: [a for a in actions(tmp_path, "failover") if a["status"] == "applied"], timeout=30,
                 what="the applied failover recorded")
        applied = [a for a in actions(tmp_path, "failover") if a["status"] == "applied"]
        assert len(applied) == 1  # moved once
        assert tried_while_down >= 1
        if outage >= 60:  # 0, 2, 6, 14, 30 s ... : more tries than the old limit, and none gave up
            assert tried_while_down > OLD_MAX_ATTEMPTS
        assert len(failed_pages(tmp_path)) <= 1  # "FAILED; act now" once at most, then notes
        # One PagerDuty incident for the outage (the incident's one dedup key).
        assert len(paging(tmp_path).get("incidents", [])) == 1
    finally:
        if server is not None:
            server.stop()
        api.stop()
