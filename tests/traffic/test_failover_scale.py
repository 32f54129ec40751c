"""Failover when capacity carries only part of the share (the seed's scale): exit 4 with what moved
applied, recorded and printed; the autoscaler's minimum raised on the loopback Kubernetes API; the
degradation destination (traffic.degradation) taking the remainder as its own recorded change.

Figures are worked out by hand from docs/design.md's capacity formula: needed = rps x share x (1 +
headroom); the healthy store carries 1000 rps (databricks 800, internal 200), so 100% needs 1250 rps
at 25% headroom, and N replicas of 100 rps carry floor(N x 100 / 1250 x 100)%.
"""

from __future__ import annotations

import json
import textwrap

import pytest

from tests.traffic.conftest import deployment, kube_capacity
from tests.traffic.test_kubernetes import NS, autoscaler, kube_env, seed_configmap


def static(replicas: int) -> str:
    return (f"capacity: {{backend: internal, source: static, replicas: {replicas}, rps_per_replica: 100,"
            f" headroom: 0.25, max_replicas: {replicas}}}\n")


def with_degradation(env):
    """Add a backend that answers with no suggestions and name it traffic.degradation."""
    text = env.config.read_text()
    text = text.replace("  databricks: {kind: vendor, vendor: databricks}\n",
                        "  databricks: {kind: vendor, vendor: databricks}\n"
                        "  nosuggest: {kind: internal, description: answers with no suggestions}\n", 1)
    text = text.replace("traffic:\n", "traffic:\n  degradation: nosuggest\n", 1)
    env.config.write_text(text)
    return env


def failovers(record: dict) -> list[dict]:
    return [c for c in record["changes"] if c["action"] == "failover"]


def test_a_failover_capacity_carries_only_in_part_exits_4_and_records_and_prints_what_moved(make_env):
    env = make_env(capacity=static(5))  # 5 x 100 = 500 rps: internal carries 40%
    result = env.run("traffic", "failover", "--from", "databricks", "--incident", "INC-S1", "--yes", "-o", "json")
    assert result.exit_code == 4, result.output
    out = json.loads(result.stdout)
    assert out["outcome"] == "applied" and out["after"]["weights"] == {"internal": 40, "databricks": 60}
    partial = out["partial"]
    assert (partial["asked"], partial["moved"], partial["not_moved"], partial["degraded"]) == (80, {"internal": 20}, 60, 0)
    assert partial["capacity_share"] == {"internal": 40}
    assert partial["change_ids"] == [out["change_id"]]
    assert "60 could not move and stay on databricks" in result.stderr  # the one-line error says the rest
    [change] = failovers(env.stored()["opsctl"])
    assert change["id"] == out["change_id"] and change["after"]["weights"] == {"internal": 40, "databricks": 60}
    table = env.run("traffic", "history", "--incident", "INC-S1", "-o", "json")
    assert [e["after"]["weights"]["internal"] for e in json.loads(table.stdout)] == [40]


def test_the_table_output_prints_the_partial_move(make_env):
    env = make_env(capacity=static(5))
    result = env.run("traffic", "failover", "--from", "databricks", "--incident", "INC-S2", "--yes")
    assert result.exit_code == 4
    assert "applied   failover: internal 20 / databricks 80 -> internal 40 / databricks 60" in result.stdout
    assert "PARTIAL   capacity refused part of the failover from databricks: moved 20 to internal" in result.stdout


def test_the_degradation_destination_takes_the_remainder_as_its_own_recorded_change(make_env):
    env = with_degradation(make_env(capacity=static(5)))
    result = env.run("traffic", "failover", "--from", "databricks", "--incident", "INC-D1", "--yes", "-o", "json")
    assert result.exit_code == 4, result.output
    out = json.loads(result.stdout)
    assert out["after"]["weights"] == {"internal": 40, "databricks": 0, "nosuggest": 60}
    partial = out["partial"]
    assert (partial["moved"], partial["degraded"], partial["not_moved"], partial["degradation"]) == (
        {"internal": 20}, 60, 0, "nosuggest")
    first, degraded = failovers(env.stored()["opsctl"])  # oldest first
    assert first["after"]["weights"] == {"internal": 40, "databricks": 60, "nosuggest": 0}
    assert degraded["before"]["weights"] == first["after"]["weights"]
    assert degraded["after"]["weights"] == {"internal": 40, "databricks": 0, "nosuggest": 60}
    assert first["id"] != degraded["id"] and first["operation"] == degraded["operation"]
    assert partial["change_ids"] == [first["id"], degraded["id"]] and out["degradation"]["change_id"] == degraded["id"]
    assert "60 went to nosuggest (no suggestions)" in result.stderr
    restored = env.run("traffic", "restore", "--incident", "INC-D1", "--step", "100", "--interval", "0s", "--yes")
    assert restored.exit_code == 0, restored.output
    assert env.stored()["weights"] == {"internal": 20, "databricks": 80, "nosuggest": 0}


def test_a_dry_run_of_a_partial_failover_exits_4_says_what_would_move_and_writes_nothing(make_env):
    env = with_degradation(make_env(capacity=static(5)))
    result = env.run("traffic", "failover", "--from", "databricks", "--incident", "INC-DRY", "--dry-run", "-o", "json")
    assert result.exit_code == 4, result.output
    partial = json.loads(result.stdout)["partial"]
    assert (partial["dry_run"], partial["moved"], partial["degraded"], partial["change_ids"]) == (
        True, {"internal": 20}, 60, [])
    assert "would move 20 to internal" in result.stderr and "60 would go to nosuggest" in result.stderr
    assert "a dry run: nothing changed" in result.stderr
    assert not env.split_file.exists()


def test_when_nothing_fits_the_degradation_destination_takes_the_whole_share(make_env):
    env = with_degradation(make_env(capacity=static(2)))  # 200 rps carry 16%: less than internal's 20% now
    result = env.run("traffic", "failover", "--from", "databricks", "--incident", "INC-D2", "--yes", "-o", "json")
    assert result.exit_code == 4, result.output
    out = json.loads(result.stdout)
    assert out["after"]["weights"] == {"internal": 20, "databricks": 0, "nosuggest": 80}
    assert (out["partial"]["moved"], out["partial"]["degraded"]) == ({}, 80)
    [change] = failovers(env.stored()["opsctl"])
    assert change["after"]["weights"] == out["after"]["weights"]


def test_without_a_degradation_destination_a_full_failover_still_exits_0(make_env):
    env = make_env(capacity=static(13))  # 1300 rps carry 100% (1250 needed)
    result = env.run("traffic", "failover", "--from", "databricks", "--incident", "INC-F", "--yes", "-o", "json")
    assert result.exit_code == 0, result.output
    assert "partial" not in json.loads(result.stdout)


def test_at_the_autoscalers_maximum_the_failover_raises_its_minimum_tops_up_then_exits_4(make_env, kube_api):
    seed_configmap(kube_api)
    kube_api.seed(deployment(NS, "vllm", 6))
    kube_api.seed(autoscaler("hpa", 6, 8))
    kube_api.simulate_deployment(NS, "vllm", ready_delay=0.3)
    capacity = kube_capacity(max_replicas=8, timeout="20s") + "  autoscaler: hpa\n"
    env = with_degradation(kube_env(make_env, kube_api, actuator="configmap", capacity=capacity,
                                    destinations="destinations: {}\n"))
    result = env.run("traffic", "failover", "--from", "databricks", "--incident", "INC-H", "--yes", "-o", "json")
    assert result.exit_code == 4, result.output
    hpa = kube_api.get("autoscaling", "horizontalpodautoscalers", NS, "vllm")
    # 100% needs 13 replicas; the HPA's maximum is 8, so its minimum goes to 8 (the original saved).
    assert hpa["spec"]["minReplicas"] == 8
    assert hpa["metadata"]["annotations"]["opsctl.io/saved-min-replicas"] == "6"
    record = json.loads(kube_api.get("", "configmaps", NS, "grammar-split")["metadata"]["annotations"][
        "opsctl.io/traffic-record"])
    steps = [c["after"]["weights"] for c in failovers(record)]
    # 6 ready carry 48% at once; the degradation backend takes the other 52; 8 ready carry 64%, taken
    # back from the degradation backend; then no more replicas can come (maximum 8).
    assert steps[0] == {"internal": 48, "databricks": 52, "nosuggest": 0}
    assert steps[1] == {"internal": 48, "databricks": 0, "nosuggest": 52}
    assert steps[-1] == {"internal": 64, "databricks": 0, "nosuggest": 36}
    out = json.loads(result.stdout)
    assert (out["partial"]["moved"], out["partial"]["degraded"], out["partial"]["not_moved"]) == ({"internal": 44}, 36, 0)
    assert out["partial"]["capacity_share"] == {"internal": 64}
    assert "8 replicas" in out["partial"]["scaled"]


def seed_sizing() -> tuple[dict, dict]:
    """The capacity section of the shipped cluster config and the shipped HPA (deploy/)."""
    import yaml

    from tests.conftest import REPO

    [configmap] = [d for d in yaml.safe_load_all((REPO / "deploy" / "serve" / "configmap.yaml").read_text()) if d]
    shipped = yaml.safe_load(configmap["data"]["opsctl.yaml"])
    hpa = yaml.safe_load((REPO / "deploy" / "capacity" / "hpa.yaml").read_text())
    return shipped, hpa


@pytest.mark.slow  # about 10 s: the top-ups wait out ready_timeout for GPUs that never come
def test_the_shipped_seed_sizing_at_200k_requests_per_second_fails_over_in_part_into_degradation(make_env, kube_api):
    from tests.slo import data as d
    from tests.traffic.conftest import END

    shipped, hpa = seed_sizing()
    cap = shipped["capacity"]
    assert (cap["rps_per_replica"], cap["headroom"], cap["max_replicas"], cap["autoscaler"]) == (200, 0.25, 400, "hpa")
    assert hpa["spec"]["maxReplicas"] == cap["max_replicas"] and shipped["traffic"]["degradation"] == "no-suggestions"
    # The seed: 200,000 requests/s, databricks 80% (1,600,000 per 10 s step), internal 20% (400,000).
    hour = 360  # 10-second steps: the capacity guard reads the last 5 minutes
    metrics = {"databricks": d.make_traffic(END, hour, 1_600_000), "internal": d.make_traffic(END, hour, 400_000)}
    seed_configmap(kube_api)
    # At peak the HPA holds internal at 40,000 x 1.25 / 200 = 250 pods; GPUs for 300 pods only.
    kube_api.seed(deployment(NS, "vllm", 250))
    kube_api.seed(autoscaler("hpa", hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]))
    kube_api.set_autoscaler_desired(NS, "vllm", 250)
    kube_api.simulate_deployment(NS, "vllm", ready_delay=0.3, schedulable=300)
    capacity = textwrap.dedent(f"""\
        capacity:
          backend: internal
          source: kubernetes
          deployment: vllm
          rps_per_replica: {cap['rps_per_replica']}
          headroom: {cap['headroom']}
          max_replicas: {cap['max_replicas']}
          autoscaler: hpa
          ready_timeout: 3s
          poll_interval: 1s
        """)
    env = make_env(metrics=metrics, actuator="configmap", capacity=capacity, extra_traffic=textwrap.dedent(f"""\
        kubernetes: {{host: "{kube_api.url}", namespace: {NS}, timeout: 5}}
        configmap: {{name: grammar-split, key: split.json}}
        """))
    text = env.config.read_text().replace("  databricks: {kind: vendor, vendor: databricks}\n",
                                          "  databricks: {kind: vendor, vendor: databricks}\n"
                                          "  no-suggestions: {kind: internal}\n", 1)
    env.config.write_text(text.replace("traffic:\n", "traffic:\n  degradation: no-suggestions\n", 1))
    result = env.run("traffic", "failover", "--from", "databricks", "--incident", "INC-SEED", "--yes", "-o", "json")
    assert result.exit_code == 4, result.output
    # All of it needs ceil(200000 x 1.25 / 200) = 1250 replicas: the minimum goes to the maximum, 400.
    assert kube_api.get("autoscaling", "horizontalpodautoscalers", NS, "vllm")["spec"]["minReplicas"] == 400
    # 250 ready carry floor(250 x 200 / 250000 x 100) = 20%: nothing more at first, so no-suggestions
    # takes databricks' 80 at once; 300 ready (all the GPUs) carry 24%, taken back from no-suggestions.
    record = json.loads(kube_api.get("", "configmaps", NS, "grammar-split")["metadata"]["annotations"][
        "opsctl.io/traffic-record"])
    assert [c["after"]["weights"] for c in failovers(record)] == [
        {"internal": 20, "databricks": 0, "no-suggestions": 80},
        {"internal": 24, "databricks": 0, "no-suggestions": 76}]
    out = json.loads(result.stdout)
    assert (out["partial"]["moved"], out["partial"]["degraded"], out["partial"]["not_moved"]) == ({"internal": 4}, 76, 0)


def test_traffic_degradation_must_name_a_configured_backend_other_than_the_capacity_one(make_env):
    env = make_env()
    env.config.write_text(env.config.read_text().replace("traffic:\n", "traffic:\n  degradation: nowhere\n", 1))
    unknown = env.run("traffic", "status")
    assert unknown.exit_code == 2 and "traffic.degradation: unknown backend 'nowhere'" in unknown.stderr
    env.config.write_text(env.config.read_text().replace("degradation: nowhere", "degradation: internal"))
    own = env.run("traffic", "status")
    assert own.exit_code == 2 and "'internal' is the capacity-modelled backend" in own.stderr


def test_serve_fails_over_in_part_into_degradation_and_says_so(make_env, monkeypatch):
    """The automation's failover (opsctl serve's executor) goes through the same path: the
    degradation backend is no receiver of its own, it takes only the remainder."""
    from opsctl.automation.actions import Context, FailoverRequest
    from opsctl.automation.executors import LiveExecutor
    from opsctl.config import load_config_file

    env = with_degradation(make_env(capacity=static(5)))
    monkeypatch.chdir(env.root)
    executor = LiveExecutor(load_config_file(env.config))
    context = Context("failover-on-availability-page", "SloBurnRatePage", {"backend": "databricks"},
                      "databricks availability burning", "key-1")
    outcome = executor.failover(FailoverRequest(context, "databricks", True, "INC-SERVE"))
    assert outcome.status == "applied"
    assert "60 went to nosuggest (no suggestions)" in outcome.detail
    assert env.stored()["weights"] == {"internal": 40, "databricks": 0, "nosuggest": 60}
