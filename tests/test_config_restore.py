"""automation.restore (the canary restore): every bad value refused with exit 2, one line naming the
field and what it takes."""

from __future__ import annotations

import pytest

from tests.conftest import write_config


@pytest.mark.parametrize("value, message", [
    ("{canary: 0}", "automation.restore: canary must be between 1 and 50 points (got 0)"),
    ("{canary: 80}", "automation.restore: canary must be between 1 and 50 points (got 80)"),
    ("{judge: 30s}", "automation.restore: judge must be between 1m and 1h"),
    ("{steps: [50, 25, 100]}", "automation.restore: steps must rise strictly from 1 to 100 and end at 100"),
    ("{steps: [25, 50]}", "automation.restore: steps must rise strictly from 1 to 100 and end at 100"),
    ("{fail_factor: 1}", "automation.restore: fail_factor must be a burn rate above 1"),
    ("{backoff: 30s}", "automation.restore: need 1m <= backoff <= backoff_max"),
    ("{backoff: 10m, backoff_max: 5m}", "automation.restore: need 1m <= backoff <= backoff_max"),
    ("{step_judge: 5s}", "automation.restore: step_judge must be between 10s and 1h"),
    ("{canary: five}", "automation.restore.canary: expected"),
])
def test_a_bad_restore_setting_is_refused_naming_its_field(opsctl, tmp_path, value, message):
    path = write_config(tmp_path, f"automation:\n  restore: {value}\n")
    result = opsctl("--config", str(path), "config", "validate")
    assert result.exit_code == 2, result.output
    assert message in result.stderr, result.stderr


def test_restore_unset_keeps_the_hold_down_restore_and_empty_takes_the_defaults(tmp_path):
    from opsctl.config import load_config
    from opsctl.traffic.canary import CanarySettings

    assert CanarySettings.from_config(load_config(str(write_config(tmp_path)))) is None
    other = tmp_path / "b"
    other.mkdir()
    settings = CanarySettings.from_config(load_config(str(write_config(other, "automation:\n  restore: {}\n"))))
    assert settings == CanarySettings()  # 5 points, 5m, 25/50/100%, 1m steps, 300x (alerting.fast.factor), 1m..5m
