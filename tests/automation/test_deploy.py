"""deploy/: the Kubernetes manifests of `opsctl serve` parse, and hold what least privilege and availability need."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from opsctl.config import build, Config
from tests.conftest import REPO, require_binary

SERVE = REPO / "deploy" / "serve"
RECEIVER = REPO / "deploy" / "alertmanager-opsctl-receiver.yml"


def _docs() -> list[dict]:
    docs = []
    for path in sorted(SERVE.glob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    return docs


def _one(kind: str) -> dict:
    found = [d for d in _docs() if d.get("kind") == kind]
    assert len(found) == 1, f"expected one {kind}, found {len(found)}"
    return found[0]


def test_every_manifest_parses_and_kustomization_lists_them_all():
    kustomization = yaml.safe_load((SERVE / "kustomization.yaml").read_text())
    listed = set(kustomization["resources"])
    on_disk = {p.name for p in SERVE.glob("*.yaml")} - {"kustomization.yaml"}
    assert listed == on_disk
    kinds = sorted(d["kind"] for d in _docs() if d["kind"] != "Kustomization")
    assert kinds == sorted(["Namespace", "ServiceAccount", "Role", "RoleBinding", "ConfigMap", "Deployment", "Service",
                            "PodDisruptionBudget", "NetworkPolicy"])


def test_the_role_has_no_wildcards_and_names_every_object_it_may_touch():
    role = _one("Role")
    for rule in role["rules"]:
        for field in ("apiGroups", "resources", "verbs", "resourceNames"):
            assert "*" not in rule.get(field, []), f"wildcard in {field}: {rule}"
        assert not set(rule["verbs"]) & {"list", "watch", "delete", "deletecollection", "update", "escalate",
                                         "bind", "impersonate"}, rule
        if rule["resources"] == ["events"]:
            assert rule["verbs"] == ["create"]
        else:
            assert rule.get("resourceNames"), f"rule without resourceNames: {rule}"
    scale = [r for r in role["rules"] if r["resources"] == ["deployments/scale"]]
    assert scale and scale[0]["verbs"] == ["get", "patch"]
    assert not [r for r in role["rules"] if r["resources"] == ["deployments"]], "the Deployment itself is off limits"


def test_the_role_binding_binds_the_service_account_of_the_deployment():
    binding, account, deployment = _one("RoleBinding"), _one("ServiceAccount"), _one("Deployment")
    assert binding["roleRef"]["name"] == _one("Role")["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account["metadata"]["name"],
                                    "namespace": account["metadata"]["namespace"]}]
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == account["metadata"]["name"]


def test_the_deployment_runs_two_hardened_replicas_with_probes_and_limits():
    deployment = _one("Deployment")
    assert deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    (container,) = pod["containers"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert set(container["resources"]["limits"]) == {"cpu", "memory"}
    assert set(container["resources"]["requests"]) == {"cpu", "memory"}
    sc = container["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"]["drop"] == ["ALL"]
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert {"/var/lib/opsctl", "/tmp"} <= mounts  # the only writable paths
    assert "--token-file" in container["args"]


def test_service_pdb_and_network_policy_select_the_deployments_pods():
    labels = _one("Deployment")["spec"]["template"]["metadata"]["labels"]
    service, pdb, policy = _one("Service"), _one("PodDisruptionBudget"), _one("NetworkPolicy")
    assert service["spec"]["selector"] == labels
    assert service["spec"]["ports"][0]["port"] == 9095
    assert pdb["spec"]["selector"]["matchLabels"] == labels and pdb["spec"]["minAvailable"] == 1
    assert policy["spec"]["podSelector"]["matchLabels"] == labels
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    (rule,) = policy["spec"]["ingress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": 9095}]
    (peer,) = rule["from"]
    assert peer["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "alertmanager"}
    assert "namespaceSelector" in peer  # both in one entry: Alertmanager's pods in its namespace only


def test_the_receiver_points_at_the_service_with_a_token_file():
    receiver = yaml.safe_load(RECEIVER.read_text())
    (config,) = receiver["receivers"][0]["webhook_configs"]
    service = _one("Service")
    assert config["url"] == f"http://{service['metadata']['name']}.{service['metadata']['namespace']}.svc:9095/v1/alertmanager"
    assert config["send_resolved"] is True
    assert config["http_config"]["authorization"]["credentials_file"]


def test_amtool_accepts_the_receiver_config():
    amtool = require_binary("amtool")
    result = subprocess.run([amtool, "check-config", str(RECEIVER)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_configmaps_opsctl_yaml_is_a_valid_config():
    data = yaml.safe_load(_one("ConfigMap")["data"]["opsctl.yaml"])
    cfg = build(Config, data, "deploy/serve/configmap.yaml")
    assert cfg.automation.policies[0].actions.restore is True
    assert cfg.automation.token.file == "/var/run/secrets/opsctl/webhook/token"


def test_the_full_alertmanager_config_sends_to_the_same_service_with_a_token():
    """deploy/alertmanager.yml (the whole routing) and the standalone receiver agree on where opsctl serve is."""
    full = yaml.safe_load((REPO / "deploy" / "alertmanager.yml").read_text())
    (receiver,) = [r for r in full["receivers"] if r["name"] == "opsctl"]
    standalone = yaml.safe_load(RECEIVER.read_text())["receivers"][0]
    assert receiver["webhook_configs"][0]["url"] == standalone["webhook_configs"][0]["url"]
    assert receiver["webhook_configs"][0]["send_resolved"] is True
    assert receiver["webhook_configs"][0]["http_config"]["authorization"]["credentials_file"]
