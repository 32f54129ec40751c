"""Start-up stays light (issue 26 item 6): `opsctl --help` and the read commands the start-up bench
times (`traffic status`, `slo report`, on the embedded default with data in its store) import none
of the heavy clients: kubernetes, pagerduty, slo-generator, numpy, starlette. Each runs in a fresh
interpreter (a separate process is the point: what a command imports is only visible in a process
of its own, and this one has imported them all)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from tests.conftest import REPO

HEAVY = ("kubernetes", "pagerduty", "slo_generator", "numpy", "starlette")
PROBE = f"""\
import sys
from opsctl.cli.main import main
code = None
try:
    code = main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
print("EXIT", code or 0, "HEAVY", [m for m in {HEAVY!r} if m in sys.modules], file=sys.stderr)
"""


@pytest.fixture(scope="module")
def seeded(tmp_path_factory):
    """The built-in default's state dir ($XDG_STATE_HOME/opsctl/<service>) with a day of healthy
    10-second steps for both backends ending now, as the start-up bench seeds it (for 28 days)."""
    from opsctl.metrics.embedded import EmbeddedStore
    from tests.slo import data as d

    root = tmp_path_factory.mktemp("startup")
    state = root / "state" / "opsctl" / "llm-inference"
    state.mkdir(parents=True)
    end = int(time.time()) // 10 * 10
    store = EmbeddedStore.open(state / "metrics.sqlite", create=True)
    d.write(store, {"databricks": d.make_traffic(end, 8640, 800), "internal": d.make_traffic(end, 8640, 200)})
    store.close()
    return root


@pytest.mark.parametrize("args", [["--help"], ["traffic", "status"], ["slo", "report"]],
                         ids=["help", "traffic-status", "slo-report"])
def test_the_command_imports_none_of_the_heavy_clients(seeded, args):
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "XDG_STATE_HOME": str(seeded / "state"),
           "XDG_CACHE_HOME": str(seeded / "cache"), "HOME": str(seeded)}
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, cwd=seeded,
                          env=env, timeout=120)
    last = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else ""
    assert last == "EXIT 0 HEAVY []", proc.stdout[-2000:] + proc.stderr[-2000:]
    assert proc.stdout.strip(), "the command printed what it read"
