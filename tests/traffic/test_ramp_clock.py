"""Ramp heartbeats on one time base (issue 22 item 5): a ramp's owner writes its heartbeat, and every
other host judges it, on the API server's clock when the state is on Kubernetes, so a laptop whose
clock is 10 minutes off neither makes its live ramp look dead nor a dead one look live.
The writer runs in a process of its own under Debian's faketime; the reader is this process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from opsctl.config import KubernetesSettings
from opsctl.state.kubernetes import KubernetesStateStore
from opsctl.traffic.kube import Kube
from opsctl.traffic.rampstate import HEARTBEAT_TTL, RampState
from tests.conftest import require_binary

pytestmark = pytest.mark.slow

NS = "llm"
SKEW = 600  # seconds: far past HEARTBEAT_TTL either way
ROOT = Path(__file__).resolve().parents[2]

WRITER = """
import sys
from opsctl.config import KubernetesSettings
from opsctl.state.kubernetes import KubernetesStateStore
from opsctl.traffic.kube import Kube
from opsctl.traffic.ramp_record import RampDocument, RampOwner
from opsctl.traffic.rampstate import RampState
store = KubernetesStateStore(Kube(KubernetesSettings(host=sys.argv[1], namespace="llm")), namespace="llm",
                             service="llm-inference")
state = RampState(RampDocument.new(id="r1", status="running", steps=()), store)
state.update(owner=RampOwner(pid=1, host="laptop-elsewhere", actor="alice"))  # another host's ramp
state.save()
"""


@pytest.fixture
def api(kube_api):
    return kube_api


def store_for(api) -> KubernetesStateStore:
    return KubernetesStateStore(Kube(KubernetesSettings(host=api.url, namespace=NS)), namespace=NS,
                                service="llm-inference")


def write_ramp_under(faketime: str, offset: str, api) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([faketime, "-f", offset, sys.executable, "-c", WRITER, api.url], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("offset", [f"-{SKEW}s", f"+{SKEW}s"])
def test_a_ramp_written_by_a_host_with_a_skewed_clock_is_live_on_the_api_servers_clock(api, offset):
    write_ramp_under(require_binary("faketime"), offset, api)
    state = RampState.load(store_for(api))
    assert state is not None and state.status == "running"
    assert state.live  # its heartbeat is the API server's time, judged on the API server's time


def test_a_ramp_whose_heartbeat_stopped_is_not_live_whatever_the_writers_clock(api):
    store = store_for(api)
    before = store.kube.server_now()
    write_ramp_under(require_binary("faketime"), f"+{SKEW}s", api)  # a laptop 10 min ahead, then it died
    state = RampState.load(store)
    server_now = store.kube.server_now()
    # The API server's time, not the laptop's: inside the write's interval on the server's clock (its
    # Date header has whole seconds), however long the write took; the laptop's would be 600 s past it.
    assert before - 1 <= float(state.doc.heartbeat) <= server_now + 1
    from opsctl.traffic.rampstate import is_live

    assert not is_live(state.doc, now=server_now + HEARTBEAT_TTL + 1)
