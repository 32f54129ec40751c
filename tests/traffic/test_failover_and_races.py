"""Failover and restore on the file actuator, and concurrent `traffic set` processes: never a torn
split, a clean serial order (or exit 5), every attempt in the audit log."""

from __future__ import annotations

import json
import threading

import pytest


def test_failover_moves_the_whole_share_stops_shadow_and_overrides_the_freeze(make_env):
    from tests.traffic.test_set_and_guards import freeze_around_now

    env = make_env(freezes=freeze_around_now("holiday"))
    env.run("traffic", "set", "databricks=80", "internal=20", "--shadow", "internal=5",
            "--emergency", "--incident", "PREP", "--reason", "mirror", "--yes")
    result = env.run("traffic", "failover", "--from", "databricks", "--incident", "INC-77",
                     "--reason", "vendor 5xx", "--yes", "-o", "json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["after"] == {"weights": {"internal": 100, "databricks": 0}, "shadow": {}}
    assert out["emergency"] is True and "freeze" in out["overrides"]
    assert env.stored()["weights"] == {"internal": 100, "databricks": 0}


def test_failover_needs_an_incident_and_a_known_backend(env):
    assert env.run("traffic", "failover", "--from", "databricks", "--yes").exit_code == 2
    bad = env.run("traffic", "failover", "--from", "vendorx", "--incident", "I", "--yes")
    assert bad.exit_code == 2 and "unknown backend 'vendorx'" in bad.stderr


def test_failover_limited_by_static_capacity_moves_only_what_fits_and_reports_the_rest(make_env):
    capacity = "capacity: {backend: internal, source: static, replicas: 5, rps_per_replica: 100, headroom: 0.25, max_replicas: 5}\n"
    env = make_env(capacity=capacity)
    # 5 x 100 = 500 rps; 1000 rps x 1.25 = 1250 rps per 100% -> internal carries floor(40%) = 40%.
    result = env.run("traffic", "failover", "--from", "databricks", "--incident", "INC-3", "--yes", "-o", "json")
    assert result.exit_code == 4, "a move capacity allows only in part is refused in part (exit 4), never 0"
    out = json.loads(result.stdout)
    assert out["after"]["weights"] == {"internal": 40, "databricks": 60}
    assert out["requested"]["weights"] == {"internal": 100, "databricks": 0}
    assert out["shortfall"]["internal"] == {"asked": 100, "moved_to": 40, "capacity_share": 40, "not_moved": 60}
    again = env.run("traffic", "failover", "--from", "databricks", "--incident", "INC-3", "--yes")
    assert again.exit_code == 4, "nothing more fits: the move is refused, not silently skipped"
    assert "none of the requested move fits" in again.stderr and "add GPUs" in again.stderr


def test_restore_returns_gradually_to_the_split_saved_when_the_failover_began(make_env):
    env = make_env()
    env.run("traffic", "set", "databricks=70", "internal=30", "--reason", "baseline", "--yes")
    assert env.run("traffic", "failover", "--from", "databricks", "--incident", "INC-9", "--yes").exit_code == 0
    assert env.run("traffic", "failover", "--from", "databricks", "--incident", "INC-9", "--yes").exit_code == 0
    result = env.run("traffic", "restore", "--incident", "INC-9", "--step", "35", "--interval", "0s", "--yes",
                     "-o", "json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert [s["after"]["weights"] for s in out["steps"]] == [
        {"internal": 65, "databricks": 35}, {"internal": 30, "databricks": 70}]
    assert env.stored()["weights"] == {"internal": 30, "databricks": 70}
    restores = [e for e in env.audit() if e["action"] == "restore" and e["outcome"] == "applied"]
    assert len(restores) == 2 and all(e["incident"] == "INC-9" for e in restores)
    history = json.loads(env.run("traffic", "history", "--incident", "INC-9", "--applied", "-o", "json").stdout)
    assert [e["action"] for e in history] == ["restore", "restore", "failover"]


def test_restore_for_an_unknown_incident_is_a_usage_error(env):
    result = env.run("traffic", "restore", "--incident", "NOPE", "--yes")
    assert result.exit_code == 3 and "no applied failover is recorded for incident 'NOPE'" in result.stderr


@pytest.mark.parametrize("attempts", [1, 3])
def test_concurrent_sets_never_tear_the_split_and_end_in_a_serial_order_or_exit_5(make_env, attempts):
    env = make_env(conflict_attempts=attempts)
    wanted = [{"internal": i, "databricks": 100 - i} for i in (31, 42, 53, 64)]
    torn: list[str] = []
    stop = threading.Event()

    def reader():
        while not stop.is_set():
            try:
                text = env.split_file.read_text()
            except FileNotFoundError:
                continue
            try:
                data = json.loads(text)
                assert sum(data["weights"].values()) == 100
            except Exception as exc:  # noqa: BLE001 - any unreadable state is a torn write
                torn.append(f"{exc}: {text!r}")

    watcher = threading.Thread(target=reader)
    watcher.start()
    try:
        procs = [env.popen("traffic", "set", f"internal={w['internal']}", f"databricks={w['databricks']}",
                           "--reason", f"race {i}", "--yes") for i, w in enumerate(wanted)]
        results = [(p, *p.communicate(timeout=120)) for p in procs]
    finally:
        stop.set()
        watcher.join()
    assert not torn
    for proc, _out, err in results:
        assert proc.returncode in (0, 5), err
        if proc.returncode == 5:
            assert "concurrent change" in err
    audit = env.audit()
    by_pid = {p.pid for p, _o, _e in results}
    assert {e["pid"] for e in audit} == by_pid, "every process's attempt is in the audit log"
    applied = sorted((e for e in audit if e["outcome"] == "applied"), key=lambda e: int(e["version"]))
    winners = [p for p, _o, _e in results if p.returncode == 0]
    assert len(applied) == len(winners) >= 1
    # A clean serial order: versions 1..n, each change starting from the one before it.
    assert [e["version"] for e in applied] == [str(i) for i in range(1, len(applied) + 1)]
    previous = {"internal": 20, "databricks": 80}
    for e in applied:
        assert e["before"]["weights"] == previous
        previous = e["after"]["weights"]
    assert env.stored()["weights"] == previous
    assert env.stored()["version"] == len(applied)
    for proc, _out, _err in results:
        if proc.returncode == 5:
            lost = [e for e in audit if e["pid"] == proc.pid]
            assert len(lost) == attempts and all(e["outcome"] == "conflict" for e in lost)


def test_the_file_actuator_leaves_no_temp_files_behind(env):
    for i in range(3):
        env.run("traffic", "set", f"internal={30 + i}", f"databricks={70 - i}", "--reason", "x", "--yes")
    leftovers = [p.name for p in (env.state / "traffic").iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []
