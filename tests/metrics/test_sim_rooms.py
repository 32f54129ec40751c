"""The simulator's rooms: each part lives in the module named for it, and `opsctl.metrics.simulator`
still offers every name it held before the split (other code and branches import them from there),
as the same object. Importing the simulator does not import numpy (the CLI's start-up is measured)."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

# Every name simulator.py defined before the split, by the room it moved to.
ROOMS = {
    "sim_calendar": ["WEEKLY_PROFILE", "DAY_NOISE_SIGMA", "FIVE_MINUTE_NOISE_SIGMA", "us_holidays", "_nth_weekday",
                     "_eastern_offsets", "traffic_shape"],
    "sim_incidents": ["_StepParams", "Incident", "Vendor5xx", "LatencySpike", "AuthThrottling", "GpuCapacityLoss",
                      "QualityRegression", "INCIDENT_KINDS", "INCIDENT_SPEC_HELP", "MAX_INCIDENT_SECONDS",
                      "parse_incident"],
    "sim_draw": ["BackendProfile", "PROFILES", "REJECTED_MEDIAN_SECONDS", "REJECTED_SIGMA", "PROMPT_TOKENS_MEAN",
                 "PROMPT_TOKENS_SD", "COMPLETION_TOKENS_MEAN", "COMPLETION_TOKENS_SD", "SUGGESTIONS_PER_ANSWER",
                 "TIMEOUT_SECONDS", "LAT_SUM_QUANTUM", "MU_QUANTUM", "DRAW_CHUNK_STEPS", "_survival",
                 "_lognormal_buckets", "_lognormal_buckets_exact", "_draw", "_draw_chunked", "_rng", "_stream_id"],
    "sim_series": ["SimSeries", "Progress"],
    "sim_split": ["DEFAULT_SPLIT_BY_KIND", "parse_split", "check_split", "default_split"],
    "sim_store": ["write_to_store"],
    "sim_openmetrics": ["export_openmetrics", "_columns", "_labels", "_FAMILIES", "_FAMILY_SAMPLES"],
    "simulator": ["STEP", "DEFAULT_PEAK_RPS", "DEFAULT_SEED", "DEFAULT_BACKENDS", "step_grid", "simulate"],
}


@pytest.mark.parametrize("room", sorted(ROOMS))
def test_each_name_lives_in_its_room_and_the_old_path_still_offers_it(room):
    simulator = importlib.import_module("opsctl.metrics.simulator")
    module = importlib.import_module(f"opsctl.metrics.{room}")
    for name in ROOMS[room]:
        value = getattr(module, name)
        assert getattr(simulator, name) is value, name
        if callable(value) and hasattr(value, "__module__") and not name == "Progress":
            assert value.__module__ == module.__name__, f"{name} is defined in {value.__module__}"


def test_no_room_imports_the_simulator():
    """A room that imported its facade would tie the two in a cycle (tests/test_layering.py)."""
    import ast
    from pathlib import Path

    for room in ROOMS:
        if room == "simulator":
            continue
        path = Path(importlib.import_module(f"opsctl.metrics.{room}").__file__)
        imported = {n.module for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.ImportFrom)}
        assert "opsctl.metrics.simulator" not in imported, room


def test_importing_the_simulator_and_its_rooms_leaves_numpy_unloaded():
    code = ("import sys\nimport opsctl.metrics.simulator\n"
            + "".join(f"import opsctl.metrics.{room}\n" for room in ROOMS)
            + "print('numpy' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False"
