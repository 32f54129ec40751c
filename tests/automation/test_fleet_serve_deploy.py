"""deploy/serve/fleet: one Deployment serving the catalog in its ConfigMap, and Roles naming exactly every
service's objects (least privilege), rendered by the real kustomize in kubectl."""

from __future__ import annotations

import subprocess

import pytest
import yaml

from opsctl.automation.fleet import check_fleet
from opsctl.config.catalog import Catalog
from tests.conftest import REPO, require_binary

FLEET = REPO / "deploy" / "serve" / "fleet"


@pytest.fixture(scope="module")
def rendered() -> list[dict]:
    kubectl = require_binary("kubectl")
    out = subprocess.run([kubectl, "kustomize", str(FLEET)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def one(docs, kind, name=None):
    found = [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, (kind, name, len(found))
    return found[0]


@pytest.fixture(scope="module")
def services(rendered, tmp_path_factory):
    """The catalog as the pod sees it: each key of the ConfigMap a file under /etc/opsctl."""
    directory = tmp_path_factory.mktemp("etc-opsctl")
    for key, text in one(rendered, "ConfigMap", "opsctl-catalog")["data"].items():
        (directory / key).write_text(text)
    return Catalog(directory).load_all()


def test_one_deployment_serves_the_catalog_mounted_from_its_configmap(rendered, services):
    deployment = one(rendered, "Deployment")
    spec = deployment["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    args = container["args"]
    assert args[:3] == ["--catalog", "/etc/opsctl", "serve"] and "--config" not in args and "--service" not in args
    mount = [m for m in container["volumeMounts"] if m["mountPath"] == "/etc/opsctl"][0]
    volume = [v for v in spec["volumes"] if v["name"] == mount["name"]][0]
    assert volume["configMap"]["name"] == "opsctl-catalog"
    assert deployment["spec"]["replicas"] == 2
    assert [c.service for c in services] == ["chat", "llm-inference"]
    assert check_fleet(services) == "service"  # one label, one token and one server's settings for all


def test_each_service_has_its_own_lease_and_split(services):
    assert {c.service: c.automation.leader_election.lease_name for c in services} == {
        "chat": "opsctl-chat-serve", "llm-inference": "opsctl-llm-inference-serve"}
    assert len({c.traffic.istio.name for c in services}) == len(services)
    assert len({c.capacity.deployment for c in services}) == len(services)
    assert all(c.automation.policies for c in services)


def test_the_roles_name_exactly_every_services_objects_and_nothing_more(rendered, services):
    from opsctl.state.kubernetes import object_name
    from opsctl.traffic.rampstate import DOC as RAMP

    def named(role, *, incidents=False):
        out = {}
        for rule in role["rules"]:
            for field in ("apiGroups", "resources", "verbs", "resourceNames"):
                assert "*" not in rule.get(field, []), rule
            assert not set(rule["verbs"]) & {"list", "watch", "delete", "deletecollection", "escalate", "bind",
                                             "impersonate"}, rule
            if rule.get("resourceNames"):
                out[rule["resources"][0]] = set(rule["resourceNames"])
            elif incidents and rule["verbs"] == ["get", "update"]:
                # Incidents: one ConfigMap each, named when it opens (issue 36): not limited by name.
                assert rule["resources"] == ["configmaps"] and rule["apiGroups"] == [""], rule
                out["incident configmaps"] = {"(any, in this namespace)"}
            else:
                assert rule["verbs"] == ["create"], rule
        return out

    state = named(one(rendered, "Role", "opsctl-serve-state"), incidents=True)
    assert state.pop("incident configmaps") == {"(any, in this namespace)"}
    assert state == {
        "leases": {c.automation.leader_election.lease_name for c in services},
        "configmaps": {object_name(c.service, doc) for c in services for doc in (RAMP,)},
    }
    traffic = named(one(rendered, "Role", "opsctl-traffic"))
    assert traffic["virtualservices"] == {c.traffic.istio.name for c in services}
    for sub in ("deployments/scale", "deployments/status", "horizontalpodautoscalers"):
        assert traffic[sub] == {c.capacity.deployment for c in services}
    for binding in ("opsctl-traffic", "opsctl-serve-state"):
        assert one(rendered, "RoleBinding", binding)["subjects"][0]["name"] == \
            one(rendered, "Deployment")["spec"]["template"]["spec"]["serviceAccountName"]
