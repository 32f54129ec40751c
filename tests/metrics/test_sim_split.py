"""opsctl.metrics.sim_split, split from the simulator: the split parser and checks, still importable
from opsctl.metrics.simulator (others' code and branches import them from there)."""

from __future__ import annotations

import pytest

from opsctl.errors import UsageError
from opsctl.metrics import sim_split, simulator

BACKENDS = {"databricks": "vendor", "internal": "internal", "other": "vendor"}


def test_the_old_import_paths_name_the_same_functions():
    for name in ("parse_split", "default_split", "check_split", "DEFAULT_SPLIT_BY_KIND"):
        assert getattr(simulator, name) is getattr(sim_split, name)


def test_a_split_parses_checks_and_fills_the_backends_left_out():
    split = sim_split.parse_split(" databricks=70 , internal=30,")
    assert split == {"databricks": 70.0, "internal": 30.0}
    assert sim_split.check_split(split, BACKENDS) == {"databricks": 70.0, "internal": 30.0, "other": 0.0}


def test_the_default_shares_80_among_vendors_and_20_among_internal_backends():
    assert sim_split.default_split(BACKENDS) == {"databricks": 40.0, "internal": 20.0, "other": 40.0}
    assert sim_split.default_split({"internal": "internal"}) == {"internal": 100.0}


@pytest.mark.parametrize("text", ["databricks", "=5", "databricks=80,databricks=20", "databricks=x", ""])
def test_a_malformed_split_is_a_usage_error(text):
    with pytest.raises(UsageError):
        sim_split.parse_split(text)


@pytest.mark.parametrize("split", [{"nope": 100.0}, {"databricks": -1.0, "internal": 101.0}, {"databricks": 90.0}])
def test_a_split_that_names_an_unknown_backend_goes_negative_or_misses_100_is_refused(split):
    with pytest.raises(UsageError):
        sim_split.check_split(split, BACKENDS)
