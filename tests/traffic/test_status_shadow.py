"""`opsctl traffic status` with `traffic.shadow_actuator`: the shadow object is shown beside the
assignment object (its mirror share and where it lives), read through its own actuator: an Istio
VirtualService on the loopback API server through the real kubernetes client, or a file. Unset, no
shadow object is reported; an unreachable one is said, the rest of the status still shown."""

from __future__ import annotations

import json
import socket

import pytest

from tests.conftest import run_opsctl, write_config
from tests.fakes.kube_api import FakeKubeAPI
from tests.rollout.test_two_objects import START_MIRROR, traffic_yaml, virtual_service


@pytest.fixture
def api():
    fake = FakeKubeAPI().start()
    fake.seed(virtual_service())  # the primary route mirrors START_MIRROR (5)% to databricks
    yield fake
    fake.stop()


def status(path, *args):
    return run_opsctl("--config", str(path), "traffic", "status", *args)


def test_the_istio_mirror_is_shown_beside_the_flagd_gate(tmp_path, api):
    path = write_config(tmp_path, traffic_yaml(api.url).replace("  actuator: flagd\n",
                                                                "  actuator: flagd\n  default_split: {internal: 100}\n"))
    result = status(path, "-o", "json")
    assert result.exit_code == 0, result.output
    d = json.loads(result.stdout)
    assert d["actuator"] == "flagd" and d["split"]["shadow"] == {}  # the gate assigns, never mirrors
    shadow = d["shadow_object"]
    assert shadow["actuator"] == "istio" and shadow["error"] is None
    assert shadow["mirror"] == {"databricks": START_MIRROR}
    assert "llm" in shadow["target"] and shadow["version"]  # the VirtualService llm/llm, at its resourceVersion
    table = status(path)
    assert table.exit_code == 0, table.output
    line = next(x for x in table.stdout.splitlines() if x.startswith("shadow "))
    assert line.startswith("shadow      istio: ") and line.endswith(f"mirrors databricks {START_MIRROR}%")
    assert shadow["target"] in line


def test_a_file_shadow_object_and_none_when_unset(tmp_path):
    (tmp_path / "state" / "traffic").mkdir(parents=True)
    (tmp_path / "state" / "traffic" / "split.json").write_text(
        json.dumps({"weights": {"internal": 100, "databricks": 0}, "shadow": {"databricks": 30}}))
    path = write_config(tmp_path, "traffic: {actuator: flagd, shadow_actuator: file, default_split: {internal: 100}}\n")
    d = json.loads(status(path, "-o", "json").stdout)
    assert d["shadow_object"]["mirror"] == {"databricks": 30}
    assert d["shadow_object"]["target"] == f"file {tmp_path / 'state' / 'traffic' / 'split.json'}"
    unset = write_config(tmp_path, "traffic: {actuator: file, default_split: {internal: 100}}\n")
    assert json.loads(status(unset, "-o", "json").stdout)["shadow_object"] is None
    assert not [x for x in status(unset).stdout.splitlines() if x.startswith("shadow ")]


def test_an_unreachable_shadow_object_is_said_not_fatal(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    path = write_config(tmp_path, traffic_yaml(f"http://127.0.0.1:{port}").replace(
        "  actuator: flagd\n", "  actuator: flagd\n  default_split: {internal: 100}\n").replace("timeout: 5", "timeout: 2"))
    result = status(path, "-o", "json")
    assert result.exit_code == 0, result.output
    shadow = json.loads(result.stdout)["shadow_object"]
    assert shadow["actuator"] == "istio" and shadow["error"] and shadow["mirror"] is None
    assert "shadow      istio: unknown (" in status(path).stdout
