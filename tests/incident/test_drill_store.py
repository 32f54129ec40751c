"""Drills run production's incident store (issue 36 item 7): an embedded drill builds its policy
engine's `IncidentStore` with serve's own builder (`engine_factory.incident_store`), on the configured
state backend. The shipped `chaos/vendor-outage.yaml` runs twice, on the file store (state.backend
local: one JSON file per incident under the run's state) and on the kubernetes backend through the
loopback API server (tests/fakes/kube_api.py: one ConfigMap per incident); the pages (distinct
PagerDuty dedup keys) and tickets are the same, and each store holds the incident.
"""

from __future__ import annotations

import hashlib
import json

from tests.drills.conftest import DrillEnv, ledger, tickets
from tests.fakes.kube_api import FakeKubeAPI

NS = "llm"
# The incident's page: Alertmanager's dedup key for the service's group on the paging route,
# sha256('{}/{severity="page"}:{service="llm-inference"}') (notify/util.go Key.Hash).
INCIDENT_PAGE = hashlib.sha256(b'{}/{severity="page"}:{service="llm-inference"}').hexdigest()


def outcome(env: DrillEnv) -> tuple[int, dict, list, list]:
    result = env.run("drill", "run", str(env.scenario("vendor-outage")), "-o", "json")
    report = json.loads(result.stdout)
    run = env.run_dir()
    # The drill's stand-in for Alertmanager's own page carries Alertmanager's dedup key: the same
    # PagerDuty incident as the automation's page.
    pages = sorted(i["dedup_key"] for i in ledger(run)["incidents"])
    filed = [(t["vendor"], t["opsctl_category"]) for t in tickets(run)]
    return result.exit_code, report, pages, filed


def test_vendor_outage_embedded_on_the_file_store_and_on_the_kubernetes_backend_pages_and_tickets_alike(tmp_path):
    for name in ("local", "probe", "kubernetes"):
        (tmp_path / name).mkdir()
    local = DrillEnv(tmp_path / "local")
    code, _report, local_pages, local_tickets = outcome(local)
    assert code == 0
    stored = [json.loads(p.read_text())["data"] for p in (local.run_dir()).rglob("incident-*.json")]
    assert [i["page"]["dedup_key"] for i in stored] == [INCIDENT_PAGE]

    api = FakeKubeAPI().start()
    try:
        text = (DrillEnv(tmp_path / "probe").config.read_text()
                .replace("state:\n  backend: local\n", f"state:\n  backend: kubernetes\n  namespace: {NS}\n")
                .replace("    # host: http://127.0.0.1:8001", f'    host: "{api.url}"'))
        assert f'host: "{api.url}"' in text and "backend: kubernetes" in text
        team = DrillEnv(tmp_path / "kubernetes", text)
        code, _report, team_pages, team_tickets = outcome(team)
        assert code == 0
        with api.lock:  # the API server's objects, read directly
            incidents = [dict(obj) for (group, plural, ns, name), obj in api.objects.items()
                         if (group, plural, ns) == ("", "configmaps", NS) and "-incident-" in name]
        assert len(incidents) == 1
        (document,) = [json.loads(cm["data"]["state.json"]) for cm in incidents]
        assert document["page"]["dedup_key"] == INCIDENT_PAGE  # the ConfigMap holds the record itself
        assert not list(team.run_dir().rglob("incident-*.json"))  # not on the file store
    finally:
        api.stop()
    assert local_pages == [INCIDENT_PAGE], "one outage, one PagerDuty incident"
    assert team_pages == local_pages and team_tickets == local_tickets
    assert len(local_tickets) == 1
