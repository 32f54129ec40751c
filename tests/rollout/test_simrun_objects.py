"""`opsctl rollout run` drives files only: whatever objects the config names (a flagd gate and an
Istio mirror, or Istio alone), the simulated run writes the run directory's split file, and with
`traffic.shadow_actuator` a second file for the mirror, never a real object: the Kubernetes API of
these configs is a closed loopback port, so any attempt to reach it would fail the run. A config
whose actuator cannot mirror (flagd) and names no shadow object is refused before the run starts."""

from __future__ import annotations

import json
import socket

import yaml

from tests.conftest import run_opsctl, write_config

PLAN = {"name": "small", "backend": "databricks", "baseline": "internal", "start": "2026-11-03T15:00:00Z",
        "stages": [{"shadow": {"steps": [{"mirror": 10, "hold": "1h"}, {"mirror": 50, "hold": "1h"}]}},
                   {"ramp": {"steps": [{"weight": 30, "soak": "1h"}]}}]}


def closed_port() -> int:
    with socket.socket() as s:  # bound then closed: nothing listens there
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def setup(tmp_path, traffic: str):
    cfg = write_config(tmp_path, f"""\
traffic:
{traffic}
  kubernetes: {{host: "http://127.0.0.1:{closed_port()}", namespace: llm, timeout: 2}}
  istio: {{name: llm, route: primary}}
  destinations:
    internal: {{host: vllm.llm.svc.cluster.local, port: 8000}}
    databricks: {{host: databricks-egress.llm.svc.cluster.local, port: 443}}
  rate_limit: {{max_changes: 50, window: 1h}}
capacity: {{backend: internal, source: static, replicas: 10, rps_per_replica: 150, headroom: 0.25, max_replicas: 10}}
paging: {{provider: local}}
freezes: []
""")
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump(PLAN))
    return cfg, plan


def run(cfg, plan, out):
    return run_opsctl("--config", str(cfg), "rollout", "run", str(plan), "--out-dir", str(out), "-o", "json")


def records(path) -> list[dict]:
    from opsctl.traffic.record import newest_first, parse

    data = json.loads(path.read_text())
    return [e.to_dict() for e in reversed(newest_first(parse(data["opsctl"], str(path))))]


def test_a_gate_and_a_mesh_mirror_are_driven_as_two_files(tmp_path):
    cfg, plan = setup(tmp_path, "  actuator: flagd\n  flagd: {path: gate/flags.flagd.json, flag: llm-backend}\n"
                                "  shadow_actuator: istio")
    out = tmp_path / "run"
    result = run(cfg, plan, out)
    assert result.exit_code == 0, result.output
    d = json.loads(result.stdout)
    assert d["status"] == "completed" and d["step"] == 3
    split, shadow = out / "traffic" / "split.json", out / "traffic" / "shadow.json"
    assert not (out / "gate").exists()  # no flagd file either: the gate is simulated by the split file
    weights = [e["after"]["weights"] for e in records(split) if e.get("outcome") == "applied"]
    mirrors = [e["after"].get("shadow", {}) for e in records(shadow) if e.get("outcome") == "applied"]
    # the assignment object: the start (all on internal), then the ramp step; never a mirror share
    assert weights[0] == {"internal": 100, "databricks": 0} and weights[-1] == {"internal": 70, "databricks": 30}
    assert all(not e["after"].get("shadow") for e in records(split) if e.get("outcome") == "applied")
    # the shadow object: its start, 10%, 50%, then ended by the ramp step
    assert mirrors == [{}, {"databricks": 10}, {"databricks": 50}, {}]
    # the rollout's state says which step both objects hold, and that both are the run's files
    objects = json.loads((out / "state" / "rollout.json").read_text())["data"]["objects"]
    assert [(o["role"], o["actuator"], o["step"]) for o in objects] == [("assignment", "file", 3), ("shadow", "file", 3)]
    assert [o["target"] for o in objects] == [f"file {split}", f"file {shadow}"]


def test_one_mesh_object_is_simulated_by_the_split_file(tmp_path):
    cfg, plan = setup(tmp_path, "  actuator: istio")
    out = tmp_path / "run"
    result = run(cfg, plan, out)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["status"] == "completed"
    applied = [e["after"] for e in records(out / "traffic" / "split.json") if e.get("outcome") == "applied"]
    assert [a.get("shadow", {}) for a in applied] == [{}, {"databricks": 10}, {"databricks": 50}, {}]
    assert applied[-1]["weights"] == {"internal": 70, "databricks": 30}
    assert not (out / "traffic" / "shadow.json").exists()


def test_a_gate_without_a_shadow_object_is_refused_naming_it(tmp_path):
    cfg, plan = setup(tmp_path, "  actuator: flagd\n  flagd: {path: gate/flags.flagd.json, flag: llm-backend}")
    out = tmp_path / "run"
    result = run(cfg, plan, out)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "traffic.shadow_actuator is not set" in lines[0] and "step 1" in lines[0]
    assert "Traceback" not in result.output
    assert not (out / "traffic").exists()  # refused before anything was written


def test_a_real_start_with_a_gate_and_no_shadow_object_is_refused_too(tmp_path):
    cfg, plan = setup(tmp_path, "  actuator: flagd\n  flagd: {path: gate/flags.flagd.json, flag: llm-backend}\n"
                                "  default_split: {internal: 100}")
    result = run_opsctl("--config", str(cfg), "rollout", "start", str(plan), "-o", "json")
    assert result.exit_code == 2, result.output
    assert "traffic.shadow_actuator is not set" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "state" / "rollout.json").exists()
