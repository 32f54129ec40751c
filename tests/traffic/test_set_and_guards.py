"""`opsctl traffic status|set|history` on the file actuator, and every guard: bounds (exit 2),
freeze, rate limit, error budget, capacity (exit 4), with emergency overrides recorded."""

from __future__ import annotations

import json
import textwrap
from datetime import datetime, timedelta

import pytest

from tests.traffic.conftest import END, TOTAL_RPS, d, healthy_traffic


def freeze_around_now(name: str = "launch-week", tz: str = "Europe/Berlin") -> str:
    """A fixed freeze from yesterday to tomorrow, in local times of `tz`."""
    from zoneinfo import ZoneInfo

    now = datetime.now(ZoneInfo(tz))
    start = (now - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M")
    end = (now + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M")
    return textwrap.dedent(f"""\
        freezes:
          - {{name: {name}, timezone: {tz}, start: "{start}", end: "{end}", reason: product launch}}
        """)


def weights(env) -> dict:
    return env.stored()["weights"]


def test_status_shows_the_configured_default_before_anything_is_written(env):
    result = env.run("traffic", "status", "-o", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["split"] == {"weights": {"internal": 20, "databricks": 80}, "shadow": {}}
    assert data["actuator"] == "file" and data["version"] == "0"
    assert "not written yet" in data["note"]
    assert data["last_change"] is None and data["freezes_active"] == []
    # 10 ready x 150 rps = 1500 rps; 1000 rps x 1.25 headroom -> carries 120% -> capped at 100%.
    assert data["capacity"]["current_rps"] == pytest.approx(TOTAL_RPS)
    assert data["capacity"]["capacity_rps"] == 1500 and data["capacity"]["max_share"] == 100
    assert data["capacity"]["share_now"] == 20


def test_status_exits_3_when_no_split_is_known(make_env, tmp_path):
    env = make_env()
    text = env.config.read_text().replace("  default_split: {databricks: 80, internal: 20}\n", "")
    env.config.write_text(text)
    result = env.run("traffic", "status")
    assert result.exit_code == 3
    assert "unknown" in result.stderr and "default_split" in result.stdout


def test_set_writes_the_file_and_records_who_why_and_every_guard(env):
    result = env.run("traffic", "set", "databricks=70", "internal=30", "--reason", "load test", "--yes", "-o", "json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["outcome"] == "applied" and out["version_before"] == "0" and out["version"] == "1"
    stored = env.stored()
    record = stored.pop("opsctl")
    assert stored == {"version": 1, "weights": {"internal": 30, "databricks": 70}, "shadow": {}}
    [change] = record["changes"]  # the change's record is in the same file, written in the same write
    assert change["id"] == out["change_id"] and change["actor"] == "tester" and change["reason"] == "load test"
    assert change["before"]["weights"] == {"internal": 20, "databricks": 80}
    assert change["after"]["weights"] == {"internal": 30, "databricks": 70}
    assert record["operations"] == {out["operation"]: change["ts"]}
    [entry] = env.audit()
    assert entry["kind"] == "traffic" and entry["action"] == "set" and entry["outcome"] == "applied"
    assert entry["actor"] == "tester" and entry["reason"] == "load test" and entry["dry_run"] is False
    assert entry["before"]["weights"] == {"internal": 20, "databricks": 80}
    assert entry["after"]["weights"] == {"internal": 30, "databricks": 70}
    assert [g["name"] for g in entry["guards"]] == ["bounds", "freeze", "rate", "budget", "capacity"]
    assert all(g["ok"] for g in entry["guards"])
    history = env.run("traffic", "history", "-o", "json")
    assert json.loads(history.stdout)[0]["operation"] == entry["operation"]
    status = json.loads(env.run("traffic", "status", "-o", "json").stdout)
    assert status["split"]["weights"] == {"internal": 30, "databricks": 70}
    assert status["last_change"]["actor"] == "tester" and status["version"] == "1"


def test_shadow_is_set_kept_and_stopped(env):
    assert env.run("traffic", "set", "databricks=80", "internal=20", "--shadow", "internal=10",
                   "--reason", "warm-up", "--yes").exit_code == 0
    assert env.stored()["shadow"] == {"internal": 10}
    assert env.run("traffic", "set", "databricks=70", "internal=30", "--reason", "more", "--yes").exit_code == 0
    assert env.stored()["shadow"] == {"internal": 10}, "a set without --shadow keeps the mirror"
    assert env.run("traffic", "set", "databricks=70", "internal=30", "--shadow", "internal=0",
                   "--reason", "done", "--yes").exit_code == 0
    assert env.stored()["shadow"] == {}


@pytest.mark.parametrize("args, message", [
    (["databricks=70", "internal=20"], "weights must sum to 100, they sum to 90"),
    (["databricks=80", "internal=20", "spare=0"], "unknown backend 'spare'"),
    (["databricks=150", "internal=-50"], "databricks: weight 150 is outside 0-100"),
    (["databricks=80", "internal=20", "--shadow", "internal=120"], "internal: shadow 120 is outside 0-100"),
])
def test_invalid_splits_exit_2_change_nothing_and_are_audited(env, args, message):
    result = env.run("traffic", "set", *args, "--reason", "typo", "--yes")
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert not env.split_file.exists()
    [entry] = env.audit()
    assert entry["outcome"] == "refused" and entry["guards"][0]["name"] == "bounds" and not entry["guards"][0]["ok"]


@pytest.mark.parametrize("args", [["internal=abc", "databricks=80"], ["internal", "databricks=100"]])
def test_unparsable_weights_exit_2(env, args):
    result = env.run("traffic", "set", *args, "--reason", "typo", "--yes")
    assert result.exit_code == 2
    assert "BACKEND=PERCENT" in result.stderr or "whole number" in result.stderr


def test_a_change_needs_a_reason_or_an_incident_and_a_yes_without_a_terminal(env):
    no_reason = env.run("traffic", "set", "databricks=70", "internal=30", "--yes")
    assert no_reason.exit_code == 2 and "--reason" in no_reason.stderr
    no_yes = env.run("traffic", "set", "databricks=70", "internal=30", "--reason", "x")
    assert no_yes.exit_code == 2 and "--yes" in no_yes.stderr
    assert not env.split_file.exists()


def test_dry_run_runs_the_guards_and_writes_nothing(env):
    result = env.run("traffic", "set", "databricks=60", "internal=40", "--dry-run", "-o", "json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["outcome"] == "dry-run" and out["dry_run"] is True
    assert "dry run" in out["target"]
    assert [g["name"] for g in out["guards"]] == ["bounds", "freeze", "rate", "budget", "capacity"]
    assert not env.split_file.exists()
    [entry] = env.audit()
    assert entry["dry_run"] is True and entry["outcome"] == "dry-run"


def test_freeze_refuses_a_routine_change_with_exit_4_naming_the_freeze_and_the_override(make_env):
    env = make_env(freezes=freeze_around_now())
    result = env.run("traffic", "set", "databricks=70", "internal=30", "--reason", "tuning", "--yes")
    assert result.exit_code == 4, result.output
    assert "launch-week" in result.stderr
    assert "--emergency --incident ID" in result.stderr
    assert not env.split_file.exists()
    [refused] = env.audit()
    assert refused["outcome"] == "refused"
    freeze = next(g for g in refused["guards"] if g["name"] == "freeze")
    assert not freeze["ok"] and freeze["details"]["freezes"][0]["name"] == "launch-week"


def test_emergency_override_of_a_freeze_needs_an_incident_and_is_recorded(make_env):
    env = make_env(freezes=freeze_around_now())
    no_incident = env.run("traffic", "set", "databricks=0", "internal=100", "--emergency", "--reason", "x", "--yes")
    assert no_incident.exit_code == 2 and "--incident" in no_incident.stderr
    result = env.run("traffic", "set", "databricks=0", "internal=100", "--emergency", "--incident", "INC-42",
                     "--reason", "vendor down", "--yes", "-o", "json")
    assert result.exit_code == 0, result.output
    assert weights(env) == {"internal": 100, "databricks": 0}
    entry = env.audit()[-1]
    assert entry["outcome"] == "applied" and entry["emergency"] is True and entry["incident"] == "INC-42"
    assert entry["overrides"] == ["freeze"]
    freeze = next(g for g in entry["guards"] if g["name"] == "freeze")
    assert freeze["overridden"] and "launch-week" in freeze["message"] and "INC-42" in freeze["message"]
    table = env.run("traffic", "history").stdout
    assert "INC-42" in table and "freeze" in table


def test_rate_limit_refuses_the_change_after_the_maximum_and_emergencies_pass(make_env):
    env = make_env(rate="{max_changes: 2, window: 1h}")
    for internal in (30, 40):
        assert env.run("traffic", "set", f"databricks={100 - internal}", f"internal={internal}",
                       "--reason", "step", "--yes").exit_code == 0
    third = env.run("traffic", "set", "databricks=50", "internal=50", "--reason", "step", "--yes")
    assert third.exit_code == 4
    assert "rate limit reached: 2 traffic changes in the last 1h (max 2)" in third.stderr
    assert weights(env) == {"internal": 40, "databricks": 60}
    # Dry runs and refusals do not count; an emergency overrides the limit and says so.
    urgent = env.run("traffic", "set", "databricks=50", "internal=50", "--emergency", "--incident", "INC-1",
                     "--reason", "step", "--yes", "-o", "json")
    assert urgent.exit_code == 0, urgent.output
    assert json.loads(urgent.stdout)["overrides"] == ["rate"]


def burning_internal() -> dict:
    """internal: 5% of requests fail over the last two hours: both page pairs fire."""
    traffic = healthy_traffic()
    traffic["internal"] = d.make_traffic(END, 8640, 2000, incidents=[(8640 - 720, 8639, 0.05)])
    return traffic


def test_budget_guard_refuses_moving_traffic_toward_a_backend_burning_at_page_level(make_env):
    env = make_env(metrics=burning_internal())
    toward = env.run("traffic", "set", "databricks=60", "internal=40", "--reason", "more internal", "--yes")
    assert toward.exit_code == 4, toward.output
    assert "llm-inference-internal-availability burns at page level" in toward.stderr
    # Moving traffic away from the burning backend needs no budget check of it.
    away = env.run("traffic", "set", "databricks=90", "internal=10", "--reason", "less internal", "--yes", "-o", "json")
    assert away.exit_code == 0, away.output
    budget = next(g for g in json.loads(away.stdout)["guards"] if g["name"] == "budget")
    assert budget["ok"] and budget["details"]["backends"] == ["databricks"]


def test_a_spent_period_budget_freezes_routine_moves_toward_that_backend(make_env):
    # 2 failures in every 10,000 requests all day: an error ratio of 0.02%, twice the 0.01% budget.
    # Burn 2x fires no page pair (13.44x, 5.6x), but the period's budget is spent: 1 - 2 = -100% left.
    traffic = healthy_traffic()
    traffic["internal"] = d.make_traffic(END, 8640, 10000, error_share=0.0002)
    env = make_env(metrics=traffic)
    result = env.run("traffic", "set", "databricks=70", "internal=30", "--reason", "more", "--yes")
    assert result.exit_code == 4, result.output
    assert "llm-inference-internal-availability has spent its error budget (-100.0% left)" in result.stderr


def test_no_metrics_is_never_healthy_routine_moves_are_refused(make_env):
    env = make_env(metrics=False)
    result = env.run("traffic", "set", "databricks=70", "internal=30", "--reason", "more", "--yes", "-o", "json")
    assert result.exit_code == 4
    guards = {g["name"]: g for g in json.loads(result.stdout)["guards"]}
    assert not guards["budget"]["ok"] and "no data" in guards["budget"]["message"]
    assert not env.split_file.exists()


def test_emergency_without_metrics_proceeds_with_a_capacity_warning(make_env):
    env = make_env(metrics=False)
    result = env.run("traffic", "set", "databricks=0", "internal=100", "--emergency", "--incident", "INC-5",
                     "--reason", "vendor down", "--yes", "-o", "json")
    assert result.exit_code == 0, result.output
    guards = {g["name"]: g for g in json.loads(result.stdout)["guards"]}
    assert guards["capacity"]["overridden"] and "capacity unverified" in guards["capacity"]["message"]
    assert guards["budget"]["overridden"]


def test_capacity_refuses_a_routine_share_the_ready_replicas_cannot_carry(make_env):
    capacity = textwrap.dedent("""\
        capacity: {backend: internal, source: static, replicas: 2, rps_per_replica: 100, headroom: 0.25, max_replicas: 2}
        """)
    env = make_env(capacity=capacity)
    # 2 x 100 = 200 rps; 1000 rps x 1.25 = 1250 rps per 100% -> floor(200 / 1250 x 100) = 16%.
    result = env.run("traffic", "set", "databricks=70", "internal=30", "--reason", "more", "--yes")
    assert result.exit_code == 4, result.output
    assert "internal can carry only 16% of current traffic, 30% asked" in result.stderr
    assert "ask for at most 16%" in result.stderr
    ok = env.run("traffic", "set", "databricks=84", "internal=16", "--reason", "fits", "--yes")
    assert ok.exit_code == 0, ok.output


def test_shadow_traffic_counts_against_capacity_but_not_the_budget(make_env):
    capacity = textwrap.dedent("""\
        capacity: {backend: internal, source: static, replicas: 2, rps_per_replica: 100, headroom: 0.25, max_replicas: 2}
        """)
    env = make_env(capacity=capacity, metrics=burning_internal())
    env.run("traffic", "set", "databricks=90", "internal=10", "--reason", "less", "--yes")
    # 10% weight + 10% mirrored = 20% > 16%: capacity refuses; the budget does not look at shadow.
    result = env.run("traffic", "set", "databricks=90", "internal=10", "--shadow", "internal=10",
                     "--reason", "mirror", "--yes", "-o", "json")
    assert result.exit_code == 4
    guards = {g["name"]: g for g in json.loads(result.stdout)["guards"]}
    assert guards["budget"]["skipped"] and not guards["capacity"]["ok"]


def test_setting_the_current_split_is_recorded_as_unchanged(env):
    result = env.run("traffic", "set", "databricks=80", "internal=20", "--reason", "noop", "--yes", "-o", "json")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["outcome"] == "unchanged"
    assert not env.split_file.exists()
    assert env.audit()[0]["outcome"] == "unchanged"


def test_the_audit_log_never_holds_secrets(make_env):
    env = make_env()
    result = env.run("traffic", "set", "databricks=70", "internal=30", "--reason", "rotate", "--yes",
                     env={"PAGERDUTY_TOKEN": "s3cr3t-value"})
    assert result.exit_code == 0
    text = (env.state / "audit.jsonl").read_text()
    assert "s3cr3t-value" not in text


def test_freeze_commands_show_the_window_in_force_and_the_next_one(make_env):
    freezes = textwrap.dedent("""\
        freezes:
          - {name: thanksgiving, timezone: America/New_York, cron: "0 0 * 11 thu#4", duration: 4d}
          - {name: launch, timezone: Europe/Berlin, start: "2027-03-01T08:00", end: "2027-03-03T20:00"}
        """)
    env = make_env(freezes=freezes)
    # Thanksgiving 2026 is Thursday 26 November; midnight in New York (EST, UTC-5) is 05:00Z.
    inside = env.run("freeze", "status", "--at", "2026-11-27T12:00:00Z", "-o", "json")
    data = json.loads(inside.stdout)
    assert data["frozen"] is True
    assert data["active"][0]["start"] == "2026-11-26T05:00:00Z" and data["active"][0]["end"] == "2026-11-30T05:00:00Z"
    before = json.loads(env.run("freeze", "status", "--at", "2026-11-26T04:59:00Z", "-o", "json").stdout)
    assert before["frozen"] is False and before["next"]["name"] == "thanksgiving"
    after = json.loads(env.run("freeze", "status", "--at", "2026-11-30T05:00:00Z", "-o", "json").stdout)
    assert after["frozen"] is False
    # Berlin is UTC+1 in March: 08:00 local is 07:00Z.
    listing = json.loads(env.run("freeze", "list", "--at", "2026-12-01T00:00:00Z", "-o", "json").stdout)
    by_name = {w["name"]: w for w in listing}
    assert by_name["launch"]["occurrence"]["start"] == "2027-03-01T07:00:00Z"
    assert by_name["thanksgiving"]["occurrence"]["start"] == "2027-11-25T05:00:00Z"  # fourth Thursday of 2027


@pytest.mark.parametrize("window, problem", [
    ('{name: x, timezone: Mars/Olympus, cron: "0 0 * * *", duration: 1d}', "unknown time zone 'Mars/Olympus'"),
    ('{name: x, cron: "0 0 * 13 *", duration: 1d}', "month: 13 is outside 1-12"),
    ('{name: x, cron: "0 0 * 11 thu#6", duration: 1d}', "the n in DAY#n must be 1 to 5"),
    ('{name: x, start: "2026-12-02", end: "2026-12-01"}', "end must be after start"),
    ('{name: x, start: "2026-12-01T00:00+01:00", end: "2026-12-02"}', "carries a UTC offset"),
    ('{name: x, cron: "0 0 * * *"}', "needs both cron and duration"),
])
def test_bad_freeze_windows_are_config_errors_naming_the_key(make_env, window, problem):
    env = make_env(freezes=f"freezes:\n  - {window}\n")
    result = env.run("freeze", "list")
    assert result.exit_code == 2
    assert "freezes[0]" in result.stderr and problem in result.stderr


def test_an_applied_change_sends_a_pager_change_event_and_a_dry_run_does_not(env):
    ledger = env.state / "paging" / "ledger.json"
    assert env.run("traffic", "set", "databricks=60", "internal=40", "--dry-run").exit_code == 0
    assert not ledger.exists() or json.loads(ledger.read_text())["changes"] == []
    result = env.run("traffic", "set", "databricks=70", "internal=30", "--incident", "INC-7", "--reason", "drain",
                     "--yes", "-o", "json")
    assert result.exit_code == 0, result.output
    assert "hook pager change event" in json.loads(result.stdout)["recorded"]
    [change] = json.loads(ledger.read_text())["changes"]
    assert change["source"] == "opsctl" and "INC-7" in change["summary"]
    assert change["custom_details"]["before"]["weights"] == {"internal": 20, "databricks": 80}
    assert change["custom_details"]["after"]["weights"] == {"internal": 30, "databricks": 70}
    assert change["custom_details"]["incident"] == "INC-7"
