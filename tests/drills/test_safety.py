"""A drill never turns into an outage: preflight refuses while real incidents are open or alerts fire,
stop conditions abort it, and whatever stops it (a stop condition, Ctrl-C, SIGTERM, kill -9 and
`opsctl drill cleanup`) leaves no fault, no changed split and no open drill incident behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from tests.conftest import REPO
from tests.drills.conftest import CHAOS, ledger, split_file


def assert_nothing_left_behind(env, run):
    state = env.state_of(run)
    assert state["phase"] == "done"
    assert state["faults"] and all(f["removed_at"] is not None for f in state["faults"])
    stored = split_file(run)
    assert stored is None or stored["weights"] == {"internal": 20, "databricks": 80}
    if (run / "paging" / "ledger.json").exists():
        assert [i["status"] for i in ledger(run)["incidents"]] == ["resolved"] * len(ledger(run)["incidents"])
    report = env.report(run)
    assert report["clean"] and report["leftovers"] == []
    return report


def paced(data, pace=300):
    data["environment"]["embedded"]["pace"] = pace  # 5 simulated minutes per wall second


def test_a_stop_condition_aborts_the_drill_and_its_rollbacks_leave_nothing_behind(drill_env):
    def tight_budget(data):
        data["stop-conditions"][0]["above"] = 0.05  # 5% of the month's budget: spent minutes into the fault

    result = drill_env.run("drill", "run", str(drill_env.scenario("vendor-outage", tight_budget)), "-o", "json")
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["outcome"] == "aborted"
    assert report["abort_reason"].startswith('stop condition "the drill has spent half')
    assert "spent" in report["abort_reason"] and "(limit 5%)" in report["abort_reason"]
    run = drill_env.run_dir()
    assert_nothing_left_behind(drill_env, run)
    assert [r["action"] for r in report["rollbacks"]] == ["remove-faults", "restore-traffic", "resolve-pages"]
    assert any("aborted" in item for item in report["action_items"])


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_mid_drill_runs_the_rollbacks_before_exiting(drill_env, sig):
    path = drill_env.scenario("vendor-outage", paced)
    proc = drill_env.popen("drill", "run", str(path))
    try:
        state = drill_env.wait_state(lambda s: s["split"]["written"] is not None, timeout=60,
                                     what="the drill's failover")
        assert state["phase"] == "method" and any(f["removed_at"] is None for f in state["faults"])
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, err
    run = drill_env.run_dir()
    report = assert_nothing_left_behind(drill_env, run)
    assert report["outcome"] == "aborted"
    assert report["abort_reason"] == f"interrupted by {signal.Signals(sig).name}"
    assert "restore-traffic: done: applied" in err


def test_kill_9_mid_drill_then_cleanup_finishes_the_rollbacks_from_the_saved_state(drill_env):
    path = drill_env.scenario("vendor-outage", paced)
    proc = drill_env.popen("drill", "run", str(path))
    try:
        drill_env.wait_state(lambda s: s["split"]["written"] is not None and s["pages"], timeout=60,
                             what="the drill's failover")
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    run = drill_env.run_dir()
    killed = drill_env.state_of(run)
    assert killed["phase"] == "method"
    assert [f["removed_at"] for f in killed["faults"]] == [None]
    assert split_file(run)["weights"] == {"internal": 100, "databricks": 0}
    assert [i["status"] for i in ledger(run)["incidents"]] != ["resolved"]
    listed = json.loads(drill_env.run("drill", "list", "--runs", "-o", "json").stdout)
    assert listed[0]["outcome"].startswith("interrupted")

    dry = drill_env.run("drill", "cleanup", "--dry-run", "-o", "json")
    assert dry.exit_code == 0, dry.output
    [planned] = json.loads(dry.stdout)
    assert planned["status"] == "dry-run" and planned["faults"] == ["vendor-5xx on databricks (simulated)"]
    # Every page the killed run had opened (the policy's, and the alert's own once its group wait passed).
    assert len(planned["pages"]) == len(killed["pages"]) >= 1
    assert drill_env.state_of(run)["phase"] == "method", "a dry run changes nothing"

    result = drill_env.run("drill", "cleanup", "-o", "json")
    assert result.exit_code == 0, result.output
    [cleaned] = json.loads(result.stdout)
    assert cleaned["status"] == "cleaned" and cleaned["run_id"] == killed["run_id"]
    report = assert_nothing_left_behind(drill_env, run)
    assert report["outcome"] == "aborted" and "rolled back by `opsctl drill cleanup`" in report["abort_reason"]
    [restore] = [json.loads(line) for line in (run / "audit.jsonl").read_text().splitlines()
                 if json.loads(line).get("action") == "restore"]
    assert restore["drill"] is True and restore["emergency"] is True
    # A second cleanup finds nothing to do.
    again = drill_env.run("drill", "cleanup", "-o", "json")
    assert again.exit_code == 0 and json.loads(again.stdout) == []


def test_cleanup_leaves_a_running_drill_alone(drill_env):
    path = drill_env.scenario("vendor-outage", lambda d: paced(d, pace=60))
    proc = drill_env.popen("drill", "run", str(path))
    try:
        state = drill_env.wait_state(lambda s: s["phase"] == "method", timeout=60, what="the method")
        assert json.loads(drill_env.run("drill", "cleanup", "-o", "json").stdout) == []
        named = drill_env.run("drill", "cleanup", state["run_id"])
        assert named.exit_code == 5 and "still running" in named.stderr
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
    assert drill_env.state_of()["phase"] == "done"


def test_a_real_incident_opened_during_the_drill_aborts_it(drill_env):
    path = drill_env.scenario("vendor-outage", paced)
    proc = drill_env.popen("drill", "run", str(path))
    try:
        drill_env.wait_state(lambda s: s["faults"], timeout=60, what="the fault")
        page = drill_env.run("page", "trigger", "-s", "checkout is down (real)", "--source", "oncall")
        assert page.exit_code == 0, page.output
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1
    report = assert_nothing_left_behind(drill_env, drill_env.run_dir())
    assert report["abort_reason"].startswith("stop condition 'a real incident is open': real incident LP00001")
    real = json.loads((drill_env.state / "paging" / "ledger.json").read_text())["incidents"]
    assert [i["status"] for i in real] == ["triggered"], "the drill never touches the real incident"


def test_preflight_refuses_while_a_real_incident_is_open_and_injects_nothing(drill_env):
    assert drill_env.run("page", "trigger", "-s", "vendor errors (real)", "--source", "oncall").exit_code == 0
    result = drill_env.run("drill", "run", str(CHAOS / "vendor-outage.yaml"), "-o", "json")
    assert result.exit_code == 4
    report = json.loads(result.stdout)
    assert report["outcome"] == "refused"
    assert "1 real incident(s) open: LP00001 'vendor errors (real)' (triggered)" in report["refusal"]
    state = drill_env.state_of()
    assert state["faults"] == [] and state["pages"] == []
    assert not (drill_env.run_dir() / "metrics.sqlite").exists(), "refused before anything was set up"
    dry = drill_env.run("drill", "run", str(CHAOS / "vendor-outage.yaml"), "--dry-run")
    assert dry.exit_code == 4 and "REFUSED" in dry.stdout


def test_preflight_refuses_while_burn_rate_alerts_fire_on_the_configured_metrics(drill_env):
    gen = drill_env.run("sim", "generate", "--days", "3", "--seed", "3",
                        "--incident", "vendor-5xx@end-20m+20m:rate=0.3")
    assert gen.exit_code == 0, gen.output
    result = drill_env.run("drill", "run", str(CHAOS / "escalation-only.yaml"), "-o", "json")
    assert result.exit_code == 4
    report = json.loads(result.stdout)
    assert "burn-rate alert(s) firing on embedded store" in report["refusal"]
    assert "SloBurnRatePage llm-inference-databricks-availability" in report["refusal"]


def test_a_steady_state_that_does_not_hold_refuses_the_drill(drill_env):
    def expect_other_split(data):
        data["steady-state-hypothesis"]["probes"][2]["tolerance"] = {"databricks": 50, "internal": 50}

    result = drill_env.run("drill", "run", str(drill_env.scenario("vendor-outage", expect_other_split)), "-o", "json")
    assert result.exit_code == 4
    report = json.loads(result.stdout)
    assert report["refusal"] == ("steady state not met: traffic split as configured: split internal 20 / databricks 80")
    assert [p["ok"] for p in report["hypothesis"]["probes"]] == [True, True, False]
    assert drill_env.state_of()["faults"] == []


def test_a_dry_run_shows_the_plan_and_creates_nothing(drill_env):
    result = drill_env.run("drill", "run", str(CHAOS / "vendor-outage.yaml"), "--dry-run", "-o", "json")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert plan["dry_run"] is True and not plan["would_refuse"]
    assert plan["method"][0].startswith("method[0] after 1m00s: inject vendor-5xx on databricks (rate 0.1)")
    assert any("category inference -> 'Model Serving'" in r for r in plan["responders"])
    assert not drill_env.state.exists(), "a dry run creates no run directory"


def test_a_live_dry_run_names_the_real_targets_and_refuses_namespaces_not_allowed(drill_env):
    result = drill_env.run("drill", "run", str(CHAOS / "vendor-outage.yaml"), "--live", "--dry-run")
    assert result.exit_code == 2
    assert "method[0].fault.live.namespace: 'llm-staging' is not in drills.live.fault_namespaces" in result.stderr
    drill_env.config.write_text(drill_env.config.read_text().replace(
        "fault_namespaces: []", "fault_namespaces: [llm-staging]"))
    result = drill_env.run("drill", "run", str(CHAOS / "internal-capacity-loss.yaml"), "--live", "--dry-run")
    assert "Deployment llm-staging/vllm scaled to current x (1 - rate) replicas" in result.stdout


# The drill process dies on its first page, after the page is recorded in the run's state and before
# the pager has it: the one window kill -9 can hit between the two (seen as a flaky cleanup exit 1).
_DIES_ON_FIRST_PAGE = (
    "import os, signal\n"
    "from opsctl.paging.local import LocalPager\n"
    "LocalPager.trigger = lambda self, event: os.kill(os.getpid(), signal.SIGKILL)\n"
    "from opsctl.cli.main import main\n"
    "main()\n"
)


def test_cleanup_counts_a_page_recorded_but_never_created_as_done_and_says_so(drill_env):
    path = drill_env.scenario("vendor-outage")
    env = {k: v for k, v in os.environ.items() if k != "OPSCTL_CONFIG"}
    env["PYTHONPATH"] = str(REPO)
    proc = subprocess.run([sys.executable, "-c", _DIES_ON_FIRST_PAGE, "--config", str(drill_env.config),
                           "drill", "run", str(path)], capture_output=True, text=True, env=env, cwd=drill_env.root,
                          timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    run = drill_env.run_dir()
    killed = drill_env.state_of(run)
    assert killed["phase"] == "method"
    [recorded] = killed["pages"]
    assert recorded["resolved"] is False
    pager_ledger = run / "paging" / "ledger.json"
    held = ledger(run)["incidents"] if pager_ledger.exists() else []
    assert held == [], "the pager never had the page"

    result = drill_env.run("drill", "cleanup", "-o", "json")
    assert result.exit_code == 0, result.output
    [cleaned] = json.loads(result.stdout)
    assert cleaned["status"] == "cleaned" and cleaned["leftovers"] == []
    [pages] = [r for r in cleaned["rollbacks"] if r["action"] == "resolve-pages"]
    assert pages["status"] == "done"
    assert f"{recorded['dedup_key']} was recorded but never created" in pages["message"]
    report = assert_nothing_left_behind(drill_env, run)
    assert report["outcome"] == "aborted"
    assert drill_env.state_of(run)["pages"][0]["never_created"] is True
