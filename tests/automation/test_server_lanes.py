"""The trigger path in team mode (issue 22 item 9): a delivery some policy acts on is recorded on a
lane of its own, never behind a burst of alerts nothing acts on. On the loopback API the writes of
the quiet deliveries' pieces are held in flight (every recorder thread of the quiet lane waits on
them); the actionable delivery is still answered, and its failover written, while they are held.
Before the lanes, it queued on the same 16 threads behind them and nothing moved until they were
released. Ordered by what the API server holds, never timed."""

from __future__ import annotations

import json
import threading

import pytest

from opsctl.automation.delivery_pieces import piece_name, piece_of
from opsctl.automation.idempotency import alert_event_key
from opsctl.automation.payloads import AlertmanagerMessage
from tests.automation.helpers import Serve, alert, bearer, message, request, wait_for
from tests.automation.test_ha import NS, SPLIT_CM, ha_config, holder, split
from tests.conftest import split_configmap

pytestmark = pytest.mark.slow

QUIET = 20  # more quiet deliveries than the 16 threads that recorded every delivery before the lanes


def key_of(body: dict) -> str:
    a = AlertmanagerMessage.parse(body).alerts[0]
    return alert_event_key(a.fingerprint, a.starts_at.canonical, a.status)


def document(index: int) -> str:
    return f"opsctl-llm-inference-{piece_name(index)}"


@pytest.fixture
def api(kube_api):
    from opsctl.automation.delivery_pieces import SHARDS
    from opsctl.config.traffic import KubernetesSettings
    from opsctl.state.kubernetes import KubernetesStateStore
    from opsctl.traffic.kube import Kube

    kube_api.seed(split_configmap(SPLIT_CM, NS, {"databricks": 80, "internal": 20}))
    store = KubernetesStateStore(Kube(KubernetesSettings(host=kube_api.url, namespace=NS, timeout=10)),
                                 namespace=NS, service="llm-inference")
    for i in range(SHARDS):  # every piece exists (as after the first deliveries): its writes are replaces
        store.put(piece_name(i), {"events": {}}, version=None)
    return kube_api


def test_an_actionable_delivery_fails_over_while_every_quiet_recorder_waits_on_the_api_server(
        tmp_path, api, healthy_store):
    trigger = message(alert(fingerprint="7a11e5000000cafe"))
    piece = piece_of(key_of(trigger))
    quiet: list[dict] = []
    n = 0
    while len(quiet) < QUIET:  # ticket-level alerts no policy matches, none in the trigger's piece
        body = message(alert(fingerprint=f"{n:016x}", alertname="SloBurnRateTicket", severity="ticket",
                             slo="llm-inference-internal-latency-1s", backend="internal"), group_key=f"quiet-{n}")
        n += 1
        if piece_of(key_of(body)) != piece:
            quiet.append(body)
    held_pieces = sorted({piece_of(key_of(b)) for b in quiet})
    config = ha_config(tmp_path / "a", api.url, healthy_store)
    # A held write waits for its answer past the whole test (the client's attempt deadline, at most
    # 30 s): no quiet delivery gives up (503) and frees its thread while the trigger is timed.
    config.write_text(config.read_text().replace(f'kubernetes: {{host: "{api.url}"', f'kubernetes: {{timeout: 30, host: "{api.url}"'))
    server = Serve(config, env={"POD_NAME": "serve-a"})
    replies: list = []
    try:
        wait_for(lambda: holder(api) == "serve-a", what="serve-a to lead")
        for index in held_pieces:  # the quiet deliveries' writes wait at the API server until released
            api.inject(verb="update", resource="configmaps", name=document(index), hold=True)

        def deliver(body: dict) -> None:
            replies.append(request(f"{server.url}/v1/alertmanager", json.dumps(body).encode(), headers=bearer(),
                                   timeout=120))

        senders = [threading.Thread(target=deliver, args=(b,), daemon=True) for b in quiet]
        for sender in senders:
            sender.start()
        wait_for(lambda: api.held() == len(held_pieces), what="a write of every quiet piece held in flight")
        wait_for(lambda: server.metrics().get("opsctl_serve_recording") == QUIET,
                 what="every quiet delivery taken up (16 recording, the rest waiting for a thread)")

        answer = request(f"{server.url}/v1/alertmanager", json.dumps(trigger).encode(), headers=bearer(), timeout=20)
        assert answer.status == 202 and answer.json()["queued"] == 1
        wait_for(lambda: split(api) == {"databricks": 0, "internal": 100}, timeout=20,
                 what="the trigger's failover while the quiet writes are held")
        assert api.held() == len(held_pieces) and not replies, "the quiet deliveries were still held meanwhile"

        api.clear_faults()  # released: every quiet delivery is recorded and answered
        for sender in senders:
            sender.join(timeout=60)
        assert sorted(r.status for r in replies) == [202] * QUIET
        recorded = {}
        for index in held_pieces:
            recorded.update(json.loads(api.get("", "configmaps", NS, document(index))["data"]["state.json"])["events"])
        assert all(recorded[key_of(b)]["state"] == "done" for b in quiet)
    finally:
        api.clear_faults()
        server.stop()
