"""`opsctl traffic ramp`: steps with progress, the burn check between steps (abort and return to the
start), one ramp at a time, kill -9 in the middle and `--resume`, `--abort`."""

from __future__ import annotations

import json
import os
import signal

import pytest

from tests.traffic.conftest import DAY, END, d, healthy_traffic, write_metrics

PLAN_80_20_TO_40_60 = [
    {"internal": 30, "databricks": 70},
    {"internal": 40, "databricks": 60},
    {"internal": 50, "databricks": 50},
    {"internal": 60, "databricks": 40},
]


def ramp_in_background(env, interval: str, steps_done: int = 1):
    """Start `ramp internal=60 --step 10` (4 steps from 80/20) and wait until `steps_done` are recorded."""
    proc = env.popen("traffic", "ramp", "internal=60", "--step", "10", "--interval", interval,
                     "--reason", "rollout", "--yes")
    env.wait_for(lambda: (env.ramp_state() or {}).get("done") == steps_done, what=f"{steps_done} step(s)")
    return proc


def applied(env, operation: str | None = None) -> list[dict]:
    return [e for e in env.audit() if e["outcome"] == "applied" and (operation is None or e["operation"] == operation)]


def test_ramp_steps_to_the_target_showing_progress_and_counts_once_for_the_rate_limit(make_env):
    env = make_env(rate="{max_changes: 2, window: 1h}")
    result = env.run("traffic", "ramp", "internal=60", "--step", "10", "--interval", "0s",
                     "--reason", "rollout", "--yes", "-o", "json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["status"] == "completed"
    assert [step["after"]["weights"] for step in out["steps"]] == PLAN_80_20_TO_40_60
    for n in range(1, 5):
        assert f"step {n}/4: internal {20 + 10 * n} / databricks {80 - 10 * n} applied" in result.stderr
    assert result.stderr.count("burn check ok for internal") == 4
    assert env.stored()["weights"] == {"internal": 60, "databricks": 40}
    entries = applied(env)
    assert len({e["operation"] for e in entries}) == 1 and len(entries) == 4
    assert [e["version"] for e in entries] == ["1", "2", "3", "4"]
    # Four steps, one operation: the rate limit of 2 still allows one more change.
    assert env.run("traffic", "set", "databricks=50", "internal=50", "--reason", "after", "--yes").exit_code == 0
    assert env.ramp_state()["status"] == "completed"


def test_ramp_to_one_backend_lets_the_others_share_the_rest(make_env):
    env = make_env()
    result = env.run("traffic", "ramp", "databricks=100", "--step", "50", "--interval", "0s",
                     "--reason", "back to vendor", "--yes", "-o", "json")
    assert result.exit_code == 0, result.output
    assert env.stored()["weights"] == {"internal": 0, "databricks": 100}


def test_ramp_dry_run_plans_the_steps_checks_the_first_and_writes_nothing(env):
    result = env.run("traffic", "ramp", "internal=60", "--step", "20", "--interval", "5m", "--dry-run",
                     "-o", "json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["status"] == "planned"
    assert [s["weights"] for s in out["ramp"]["steps"]] == [{"internal": 40, "databricks": 60},
                                                           {"internal": 60, "databricks": 40}]
    assert out["steps"][0]["outcome"] == "dry-run"
    assert not env.split_file.exists() and env.ramp_state() is None


def burning(first_step: int, last_step: int) -> dict:
    traffic = healthy_traffic()
    traffic["internal"] = d.make_traffic(END + 3600, DAY, 2000, incidents=[(first_step, last_step, 0.05)])
    traffic["databricks"] = d.make_traffic(END + 3600, DAY, 8000)
    return traffic


def test_a_page_level_burn_after_a_step_aborts_the_ramp_and_returns_to_the_start(make_env):
    env = make_env()
    proc = ramp_in_background(env, "3s")
    # While the ramp watches step 1, the proxy reports internal failing 5% of requests for an hour.
    write_metrics(env.state / "metrics.sqlite", burning(DAY - 360, DAY - 1))
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 4, err
    assert "burn check after step 1/4" in err and "burns at page level" in err
    assert "returned to internal 20 / databricks 80" in err
    assert env.stored()["weights"] == {"internal": 20, "databricks": 80}
    entries = applied(env)
    assert [e["action"] for e in entries] == ["ramp", "rollback"]
    assert entries[0]["operation"] == entries[1]["operation"]
    assert env.ramp_state()["status"] == "aborted"


def test_an_aborted_ramp_still_prints_its_steps_with_o_json(make_env):
    env = make_env()
    proc = env.popen("traffic", "ramp", "internal=60", "--step", "10", "--interval", "3s",
                     "--reason", "rollout", "--yes", "-o", "json")
    env.wait_for(lambda: (env.ramp_state() or {}).get("done") == 1, what="1 step")
    write_metrics(env.state / "metrics.sqlite", burning(DAY - 360, DAY - 1))
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 4, err
    shown = json.loads(out)  # the error's one line goes to stderr; stdout is the ramp as it ended
    assert shown["status"] == "aborted" and shown["ramp"]["status"] == "aborted"
    assert [(s["action"], s["outcome"]) for s in shown["steps"]] == [("ramp", "applied"), ("rollback", "applied")]
    assert shown["steps"][0]["after"]["weights"] == {"internal": 30, "databricks": 70}
    assert shown["steps"][1]["after"]["weights"] == {"internal": 20, "databricks": 80}


def test_missing_data_after_a_step_aborts_the_ramp_too(make_env):
    env = make_env()
    proc = ramp_in_background(env, "3s")
    os.unlink(env.state / "metrics.sqlite")  # the metric source is gone: no data is never healthy
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 4, err
    assert "no data" in err
    assert env.stored()["weights"] == {"internal": 20, "databricks": 80}


def test_kill_9_in_the_middle_of_a_ramp_then_resume_finishes_it_without_repeating_a_step(make_env):
    env = make_env()
    proc = ramp_in_background(env, "1s", steps_done=2)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=10)
    state = env.ramp_state()
    assert state["status"] == "running" and state["done"] == 2
    killed_at = env.stored()["weights"]
    assert killed_at in PLAN_80_20_TO_40_60[1:3]  # step 2 done, step 3 maybe written but not recorded

    # The interrupted ramp blocks a new one until it is resumed or aborted.
    other = env.run("traffic", "ramp", "internal=90", "--interval", "0s", "--reason", "x", "--yes")
    assert other.exit_code == 5 and "--resume" in other.stderr
    status = env.run("traffic", "status")
    assert "INTERRUPTED" in status.stdout

    resumed = env.run("traffic", "ramp", "--resume")
    assert resumed.exit_code == 0, resumed.output
    assert "resuming ramp" in resumed.stderr
    assert env.stored()["weights"] == {"internal": 60, "databricks": 40}
    entries = applied(env, state["id"])
    assert [e["after"]["weights"] for e in entries] == PLAN_80_20_TO_40_60
    assert [e["version"] for e in entries] == ["1", "2", "3", "4"]
    assert env.ramp_state()["status"] == "completed"


def test_a_second_ramp_and_a_manual_set_are_refused_while_one_runs_and_abort_returns_to_the_start(make_env):
    env = make_env()
    proc = ramp_in_background(env, "30s")
    second = env.run("traffic", "ramp", "internal=90", "--interval", "0s", "--reason", "x", "--yes")
    assert second.exit_code == 5
    assert f"another ramp is running (pid {proc.pid}" in second.stderr
    manual = env.run("traffic", "set", "databricks=50", "internal=50", "--reason", "x", "--yes")
    assert manual.exit_code == 5 and "a ramp is running" in manual.stderr
    status = json.loads(env.run("traffic", "status", "-o", "json").stdout)
    assert status["ramp"]["live"] is True and status["ramp"]["holder"]["pid"] == proc.pid

    proc.send_signal(signal.SIGINT)  # Ctrl-C: the state stays resumable
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and "--resume" in err
    aborted = env.run("traffic", "ramp", "--abort", "--reason", "changed my mind", "-o", "json")
    assert aborted.exit_code == 0, aborted.output
    assert env.stored()["weights"] == {"internal": 20, "databricks": 80}
    assert env.ramp_state()["status"] == "aborted"
    assert applied(env)[-1]["action"] == "rollback"


def test_a_change_outside_the_ramp_stops_it_without_fighting_back(make_env):
    env = make_env()
    proc = ramp_in_background(env, "2s")
    failover = env.run("traffic", "failover", "--from", "internal", "--incident", "INC-8", "--yes")
    assert failover.exit_code == 0, failover.output
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 5, err
    assert "changed outside the ramp" in err
    assert env.stored()["weights"] == {"internal": 0, "databricks": 100}
    assert env.ramp_state()["status"] == "stopped"


def test_resume_without_an_interrupted_ramp_is_a_usage_error(env):
    result = env.run("traffic", "ramp", "--resume")
    assert result.exit_code == 2 and "no interrupted ramp" in result.stderr


@pytest.mark.slow
def test_resume_finishes_the_interrupted_steps_soak_and_burn_check_before_the_next_step(make_env):
    env = make_env()
    proc = env.popen("traffic", "ramp", "internal=60", "--step", "20", "--interval", "4s",
                     "--reason", "rollout", "--yes")
    state = env.wait_for(lambda: (s := env.ramp_state() or {}).get("soak") and s["soak"]["step"] == 0 and s,
                         what="step 1's soak to start")
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=10)
    until = state["soak"]["until"]
    result = env.run("traffic", "ramp", "--resume", "-o", "json")
    assert result.exit_code == 0, result.output
    err = result.stderr
    assert "step 1/2: finishing its soak and burn check" in err
    assert err.index("step 1/2: burn check ok") < err.index("step 2/2: internal 60")
    step2 = next(c for c in env.stored()["opsctl"]["changes"] if c["after"]["weights"]["internal"] == 60)
    assert step2["ts"] >= until, "the next step waited for the rest of the interrupted soak"
    assert env.ramp_state()["status"] == "completed" and env.ramp_state()["soak"] is None
