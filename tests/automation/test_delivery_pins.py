"""What the delivery logs store, pinned (issue 26 item 1): the lifecycle of
tests/automation/delivery_lifecycle.py, run through the shared pieces on the loopback API server
and through the SQLite log, stores exactly what the code before the typed record stored
(tests/automation/delivery_records.json, captured from 696bbb1 by that lifecycle): the same
ConfigMap text, byte for byte, and the same SQLite rows."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from opsctl.automation.delivery_pieces import SHARDS, piece_name
from opsctl.automation.delivery_store import SharedDeliveryLog
from opsctl.automation.idempotency import DeliveryLog
from opsctl.clock import SimClock
from tests.automation.delivery_lifecycle import START, local_lifecycle, shared_lifecycle

FIXTURES = json.loads((Path(__file__).parent / "delivery_records.json").read_text())


def kube_store(kube_api):
    from opsctl.config.traffic import KubernetesSettings
    from opsctl.state.kubernetes import KubernetesStateStore
    from opsctl.traffic.kube import Kube

    return KubernetesStateStore(Kube(KubernetesSettings(host=kube_api.url, namespace="ops", timeout=10)),
                                namespace="ops", service="llm-inference")


def stored_pieces(kube_api) -> dict[str, str]:
    """Each piece's ConfigMap text, as the API server holds it."""
    found = {piece_name(i): kube_api.get("", "configmaps", "ops", f"opsctl-llm-inference-{piece_name(i)}")
             for i in range(SHARDS)}
    return {name: cm["data"]["state.json"] for name, cm in found.items() if cm is not None}


def stored_rows(path: Path) -> list[dict]:
    conn = sqlite3.connect(path)
    conn.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in conn.execute("SELECT * FROM events ORDER BY key")]
    finally:
        conn.close()


def test_the_shared_pieces_hold_what_the_code_before_the_record_wrote(kube_api):
    clock = SimClock(START)
    leader = SharedDeliveryLog(kube_store(kube_api), clock=clock.now, owner="serve-a:1", term=lambda: "serve-a@3")
    old = SharedDeliveryLog(kube_store(kube_api), clock=clock.now, owner="serve-b:1", term=lambda: "serve-b@2")
    shared_lifecycle(leader, old, clock)
    assert stored_pieces(kube_api) == FIXTURES["pieces"]


def test_the_sqlite_rows_are_what_the_code_before_the_record_wrote(tmp_path):
    clock = SimClock(START)
    log = DeliveryLog(tmp_path / "serve.sqlite", clock=clock.now, owner="serve-a:1")
    local_lifecycle(log, clock)
    assert stored_rows(tmp_path / "serve.sqlite") == FIXTURES["rows"]
