"""`python -m opsctl` holds the cyclic collector off while it starts (opsctl/cli/startup.py, #26 item 6):
no collection runs between the interpreter handing over to opsctl and the config being loaded; then
what start-up made is frozen and the thresholds are as they were. A fresh interpreter each time:
what the collector did is only visible in a process of its own."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import REPO

PROBE = """\
import gc, json, runpy, sys
before = gc.get_threshold()
seen = []

def watch(phase, info):
    if phase == "start":
        seen.append(gc.get_freeze_count())  # 0: start-up not over yet

gc.callbacks.append(watch)
sys.argv = ["opsctl", *sys.argv[1:]]
code = 0
try:
    runpy.run_module("opsctl", run_name="__main__", alter_sys=True)
except SystemExit as exc:
    code = exc.code or 0
gc.callbacks.remove(watch)
print(json.dumps({"code": code, "during_startup": sum(1 for f in seen if f == 0), "after": len(seen),
                  "frozen": gc.get_freeze_count(), "threshold": [before, gc.get_threshold()]}), file=sys.stderr)
"""


def _run(tmp_path, *args):
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
           "XDG_STATE_HOME": str(tmp_path / "state"), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, cwd=tmp_path,
                          env=env, timeout=120)
    return json.loads(proc.stderr.strip().splitlines()[-1])


def test_no_collection_while_traffic_status_starts(tmp_path):
    _run(tmp_path, "traffic", "status")  # fills the parse cache, as a user's first run does
    seen = _run(tmp_path, "traffic", "status")
    assert seen["code"] == 0
    assert seen["during_startup"] == 0, seen  # the code before: about 20 collections by then
    assert seen["frozen"] > 10_000, seen  # modules, classes, commands and the config: out of later scans
    assert seen["threshold"][0] == seen["threshold"][1], seen  # restored once the config is loaded


def test_a_command_without_a_config_leaves_the_collector_running(tmp_path):
    """`--help` never loads a config: nothing is frozen, and the collector was only slowed, not off."""
    seen = _run(tmp_path, "--help")
    assert seen["code"] == 0
    assert seen["frozen"] == 0, seen
