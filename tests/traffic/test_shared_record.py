"""The change and its record in one write: the rate guard counts exactly what was applied, a process
killed at any point leaves no applied-but-unrecorded change, every refusal is audited, and a corrupt
stored split does not block an emergency (issue 14 items 3 and 8)."""

from __future__ import annotations

import json
import os
import shlex
import signal
import time

import pytest


def record_of(env) -> dict:
    return env.stored()["opsctl"]


def assert_record_matches_the_split(env) -> list[dict]:
    """The split in the file is the `after` of the newest record entry; entries chain (each one's
    before is the previous one's after); one entry per version: nothing applied is unrecorded."""
    stored = env.stored()
    changes = stored["opsctl"]["changes"]
    assert len(changes) == stored["version"], "one record entry per applied write"
    assert changes[-1]["after"] == {"weights": stored["weights"], "shadow": stored["shadow"]}
    for older, newer in zip(changes, changes[1:]):
        assert newer["before"] == older["after"]
    assert len({c["id"] for c in changes}) == len(changes)
    return changes


@pytest.mark.slow
def test_20_concurrent_sets_against_a_limit_of_6_apply_at_most_6_each_recorded_once(make_env):
    env = make_env(rate="{max_changes: 6, window: 1h}", conflict_attempts=20)
    procs = [env.popen("traffic", "set", f"internal={i}", f"databricks={100 - i}", "--reason", f"race {i}",
                       "--yes", "-o", "json") for i in range(21, 41)]
    outcomes = []
    for proc in procs:
        out, err = proc.communicate(timeout=240)
        assert proc.returncode in (0, 4, 5), err
        outcomes.append((proc.returncode, json.loads(out) if out.strip() else None, err))
    applied = [o for code, o, _ in outcomes if code == 0]
    refused = [err for code, _o, err in outcomes if code == 4]
    assert 1 <= len(applied) <= 6
    assert all(o["outcome"] == "applied" for o in applied)
    assert all("rate limit reached" in err for err in refused)
    conflicts = sum(1 for code, *_ in outcomes if code == 5)
    assert len(applied) + len(refused) + conflicts == 20
    print(f"20 concurrent sets, limit 6: {len(applied)} applied, {len(refused)} refused by rate, {conflicts} exit 5")
    changes = assert_record_matches_the_split(env)
    # Each applied change recorded exactly once, and nothing else in the record.
    assert sorted(c["id"] for c in changes) == sorted(o["change_id"] for o in applied)
    assert sorted(c["operation"] for c in changes) == sorted(o["operation"] for o in applied)
    audited = [e for e in env.audit() if e["outcome"] == "applied"]
    assert sorted(e["change_id"] for e in audited) == sorted(o["change_id"] for o in applied)


@pytest.mark.slow
def test_a_process_killed_at_any_point_leaves_no_applied_change_unrecorded(make_env):
    env = make_env(rate="{max_changes: 100, window: 1h}", conflict_attempts=20)
    assert env.run("traffic", "set", "internal=25", "databricks=75", "--reason", "start", "--yes").exit_code == 0
    killed = 0
    for i in range(12):
        proc = env.popen("traffic", "set", f"internal={30 + i}", f"databricks={70 - i}", "--reason", f"k{i}", "--yes")
        # Kill at a different point each round, from start-up to just after the write: whatever the
        # point, the invariant below must hold (the kill point only decides whether the change lands).
        before = os.path.getmtime(env.split_file)
        for _ in range(i * 4):  # 0..44 polls of 25 ms
            if proc.poll() is not None or os.path.getmtime(env.split_file) != before:
                break
            time.sleep(0.025)
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            killed += 1
        proc.communicate(timeout=60)
        assert_record_matches_the_split(env)
    assert killed >= 1
    changes = assert_record_matches_the_split(env)
    audited = {e["change_id"] for e in env.audit() if e["outcome"] == "applied"}
    assert audited <= {c["id"] for c in changes}, "the audit log never holds a change the record lacks"


def test_emergency_without_incident_is_refused_and_audited(env):
    result = env.run("traffic", "set", "databricks=0", "internal=100", "--emergency", "--reason", "x", "--yes")
    assert result.exit_code == 2 and "--incident" in result.stderr
    [entry] = env.audit()
    assert entry["outcome"] == "refused" and entry["emergency"] is True and "--incident" in entry["message"]
    assert not env.split_file.exists(), "nothing was written"
    ramp = env.run("traffic", "ramp", "internal=50", "--emergency", "--reason", "x", "--yes")
    assert ramp.exit_code == 2
    assert [e["action"] for e in env.audit()] == ["set", "ramp"] and env.audit()[-1]["outcome"] == "refused"


@pytest.mark.parametrize("args,code,why", [
    (["set", "databricks=70", "internal=30", "--yes"], 2, "say why"),
    (["set", "databricks=x", "--reason", "r", "--yes"], 2, "whole number"),
    (["set", "databricks=70", "internal=30", "--reason", "r"], 2, "--yes"),  # no terminal to confirm on
    (["ramp", "--resume", "--abort"], 2, "contradict"),
    (["restore", "--incident", "NOPE", "--yes"], 3, "no applied failover"),
])
def test_every_refused_attempt_is_audited_with_its_exit_code(env, args, code, why):
    result = env.run("traffic", *args)
    assert result.exit_code == code and why in result.stderr
    [entry] = env.audit()
    assert entry["action"] == args[0] and entry["outcome"] == "refused" and why in entry["message"]


@pytest.mark.parametrize("content", [
    '{"version": 3, "weights": {"databricks": 100, "internal": 20}, "shadow": {}}',  # sums to 120
    '{"version": 3, "weights": {"databricks": 8',  # truncated
])
def test_a_corrupt_split_blocks_only_routine_changes_and_the_hinted_repair_works(env, content):
    env.split_file.parent.mkdir(parents=True, exist_ok=True)
    env.split_file.write_text(content)
    status = env.run("traffic", "status")
    assert status.exit_code == 3 and "corrupt" in status.output
    routine = env.run("traffic", "set", "databricks=70", "internal=30", "--reason", "routine", "--yes")
    assert routine.exit_code == 3 and "corrupt" in routine.stderr
    assert env.audit()[-1]["outcome"] == "refused", "the refusal is audited"
    hint = routine.stderr.split("`")[1]  # the command the hint names
    assert hint.startswith("opsctl traffic set ") and "--emergency" in hint
    args = shlex.split(hint)[1:]
    args[args.index("ID")] = "INC-5"
    repaired = env.run(*args, "-o", "json")
    assert repaired.exit_code == 0, repaired.output
    out = json.loads(repaired.stdout)
    assert out["outcome"] == "applied" and out["before"] is None and out["incident"] == "INC-5"
    assert any("corrupt" in w for w in out["warnings"])
    assert env.stored()["weights"] == {"databricks": 80, "internal": 20}  # traffic.default_split, as hinted
    assert env.audit()[-1]["outcome"] == "applied" and env.audit()[-1]["emergency"] is True


def test_failover_works_from_the_configured_backends_when_the_split_is_corrupt(env):
    env.split_file.parent.mkdir(parents=True, exist_ok=True)
    env.split_file.write_text('{"version": 3, "weights": {"databricks": 100, "internal": 20}}')
    result = env.run("traffic", "failover", "--from", "databricks", "--incident", "INC-6", "--yes", "-o", "json")
    assert result.exit_code == 0, result.output
    assert env.stored()["weights"] == {"internal": 100, "databricks": 0}


def test_history_and_status_read_the_record_stored_with_the_split(make_env):
    env = make_env()
    assert env.run("traffic", "set", "databricks=70", "internal=30", "--reason", "base", "--yes").exit_code == 0
    assert env.run("traffic", "failover", "--from", "databricks", "--incident", "INC-1", "--yes").exit_code == 0
    os.unlink(env.state / "audit.jsonl")  # another laptop: no local audit log, the same split file
    history = json.loads(env.run("traffic", "history", "-o", "json").stdout)
    assert [(e["action"], e["incident"]) for e in history] == [("failover", "INC-1"), ("set", None)]
    status = json.loads(env.run("traffic", "status", "-o", "json").stdout)
    assert status["last_change"]["action"] == "failover"
    [opened] = status["open_failovers"]
    assert opened["incident"] == "INC-1" and opened["saved"]["weights"] == {"databricks": 70, "internal": 30}
    restored = env.run("traffic", "restore", "--incident", "INC-1", "--step", "100", "--interval", "0s", "--yes")
    assert restored.exit_code == 0, restored.output
    assert env.stored()["weights"] == {"databricks": 70, "internal": 30}
    assert json.loads(env.run("traffic", "status", "-o", "json").stdout)["open_failovers"] == []
