"""deploy/: the Kubernetes manifests of `opsctl serve` parse, and hold what least privilege and availability need."""

from __future__ import annotations

import os
import re
import subprocess

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


def _one(kind: str, name: str | None = None) -> dict:
    found = [d for d in _docs() if d.get("kind") == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def _config():
    data = yaml.safe_load(_one("ConfigMap")["data"]["opsctl.yaml"])
    return build(Config, data, "deploy/serve/configmap.yaml")


def test_every_manifest_parses_and_kustomization_lists_them_all():
    kustomization = yaml.safe_load((SERVE / "kustomization.yaml").read_text())
    listed = set(kustomization["resources"])
    on_disk = {p.name for p in SERVE.glob("*.yaml")} - {"kustomization.yaml"}
    assert listed == on_disk
    kinds = sorted(d["kind"] for d in _docs() if d["kind"] != "Kustomization")
    assert kinds == sorted(["Namespace", "ServiceAccount", "Role", "Role", "RoleBinding", "RoleBinding", "ConfigMap",
                            "Deployment", "Service", "PodDisruptionBudget", "NetworkPolicy"])


def test_the_role_has_no_wildcards_and_names_every_object_it_may_touch():
    role = _one("Role", "opsctl-traffic")
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


def test_the_state_role_allows_the_lease_and_the_state_documents_and_nothing_else():
    from opsctl.state.kubernetes import object_name
    from opsctl.traffic.rampstate import DOC as RAMP

    cfg = _config()
    role = _one("Role", "opsctl-serve-state")
    unnamed_get_update = None
    assert cfg.state.backend == "kubernetes"
    assert role["metadata"]["namespace"] == cfg.state.namespace == "opsctl"  # where the Lease and ConfigMaps live
    named = {}
    for rule in role["rules"]:
        for field in ("apiGroups", "resources", "verbs", "resourceNames"):
            assert "*" not in rule.get(field, []), f"wildcard in {field}: {rule}"
        if rule.get("resourceNames"):
            assert rule["verbs"] == ["get", "update"], rule
            named[rule["resources"][0]] = set(rule["resourceNames"])
        elif rule["verbs"] == ["get", "update"]:  # the incidents: named when they open (issue 36)
            assert rule["resources"] == ["configmaps"] and rule["apiGroups"] == [""], rule
            unnamed_get_update = rule
        else:  # create cannot be limited by name: only create is granted without names
            assert rule["verbs"] == ["create"], rule
    assert named == {
        "leases": {cfg.automation.leader_election.lease_name},
        "configmaps": {object_name(cfg.service, doc) for doc in (RAMP,)},
    }
    assert {tuple(r["apiGroups"]) for r in role["rules"] if r["resources"] == ["leases"]} == {("coordination.k8s.io",)}
    # One ConfigMap per incident, named when it opens (opsctl-<service>-incident-<instant>-<hex>):
    # get and update on the ConfigMaps of opsctl's own namespace, never list, watch or delete.
    assert unnamed_get_update is not None
    assert not {v for r in role["rules"] for v in r["verbs"]} & {"list", "watch", "delete", "deletecollection", "patch"}


def test_the_role_bindings_bind_the_service_account_of_the_deployment():
    account, deployment = _one("ServiceAccount"), _one("Deployment")
    for name in ("opsctl-traffic", "opsctl-serve-state"):
        binding = _one("RoleBinding", name)
        assert binding["roleRef"]["name"] == _one("Role", name)["metadata"]["name"]
        assert binding["metadata"]["namespace"] == _one("Role", name)["metadata"]["namespace"]
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account["metadata"]["name"],
                                        "namespace": account["metadata"]["namespace"]}]
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == account["metadata"]["name"]


def test_replicas_elect_a_leader_named_after_their_pod():
    cfg = _config()
    from opsctl.automation.election import election_enabled

    assert election_enabled(cfg)
    (container,) = _one("Deployment")["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e for e in container["env"]}
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    duration, deadline, retry = cfg.automation.leader_election.seconds
    # A graceful stop (finish in-flight actions, release the Lease) fits in the grace period.
    assert _one("Deployment")["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] > 10 + retry


def test_the_dockerfile_is_multi_stage_pinned_non_root_and_installs_the_wheel_the_deployment_runs():
    """Checked statically: no Docker daemon runs where the tests run."""
    text = (REPO / "Dockerfile").read_text()
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]
    args = dict(re.findall(r"^ARG (\w+)=(\S+)$", "\n".join(lines), re.M))
    stages = [line.split()[1] for line in lines if line.startswith("FROM ")]
    assert len(stages) >= 2, "multi-stage: build, then a runtime image without the build tools"
    for image in stages:
        image = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], image)
        pinned = "@sha256:" in image or re.search(r":\d+\.\d+\.\d+(-[a-z0-9-]+)?$", image)
        assert pinned, f"base image not pinned to a digest or an exact version: {image}"
    final = lines[max(i for i, line in enumerate(lines) if line.startswith("FROM ")):]
    (user,) = [line.split()[1] for line in final if line.startswith("USER ")]
    assert user.split(":")[0] not in ("0", "root")
    assert any(line.startswith("COPY --from=build") for line in final)
    assert re.search(r"pip wheel .*--wheel-dir /dist", text) and re.search(r"pip install /dist/opsctl-\*\.whl", text)
    # The wheel ships opsctl/defaults, whose entries link outside the package: the build stage copies
    # their targets too, or the image's wheel lacks the default config, SLOs and scenarios.
    build = lines[:max(i for i, line in enumerate(lines) if line.startswith("FROM "))]
    copied = {line.split()[1] for line in build if line.startswith("COPY ") and not line.startswith("COPY --")}
    for link in sorted((REPO / "opsctl" / "defaults").iterdir()):
        if link.is_symlink():
            target = (link.parent / os.readlink(link)).resolve().relative_to(REPO)
            assert str(target) in copied, f"the build stage does not copy {target} (opsctl/defaults/{link.name})"
    assert 'ENTRYPOINT ["opsctl"]' in lines
    (container,) = _one("Deployment")["spec"]["template"]["spec"]["containers"]
    version = re.search(r'^version = "([^"]+)"', (REPO / "pyproject.toml").read_text(), re.M).group(1)
    assert container["image"] == f"ghcr.io/example/opsctl:{version}"
    assert f"docker build -t {container['image']} ." in text  # the image the Dockerfile says it builds
    assert container["command"] == ["opsctl"]
    pod_user = _one("Deployment")["spec"]["template"]["spec"]["securityContext"]["runAsUser"]
    assert user.split(":")[0] == str(pod_user)
    # The config the image runs reads its SLOs where the image puts them.
    assert "COPY slos /opt/opsctl/slos" in lines and _config().slos.dir == "/opt/opsctl/slos"


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
    cfg = _config()
    assert cfg.automation.policies[0].actions.restore is True
    assert cfg.automation.token.file == "/var/run/secrets/opsctl/webhook/token"


def test_the_full_alertmanager_config_sends_to_the_same_service_with_a_token():
    """deploy/alertmanager.yml (the whole routing) and the standalone receiver agree on where opsctl serve is."""
    full = yaml.safe_load((REPO / "deploy" / "alertmanager.yml").read_text())
    (receiver,) = [r for r in full["receivers"] if r["name"] == "pagerduty-and-opsctl"]
    standalone = yaml.safe_load(RECEIVER.read_text())["receivers"][0]
    assert receiver["webhook_configs"][0]["url"] == standalone["webhook_configs"][0]["url"]
    assert receiver["webhook_configs"][0]["send_resolved"] is True
    assert receiver["webhook_configs"][0]["http_config"]["authorization"]["credentials_file"]
