"""The canary restore's decision (opsctl/traffic/canary.py), pure: driven by a simulated clock over a
hand-built backend whose burn is worked out from the traffic each move gives it, with the shipped
settings (opsctl.yaml's automation.restore, the fast tier's 5m/1m windows and 300x factor)."""

from __future__ import annotations

import math

import pytest

from opsctl.config import BUILTIN_CONFIG, load_config_file
from opsctl.traffic.canary import (
    BackendHealth, CanarySettings, Readiness, RestoreProgress, advance, canary_stage, operation_id, restore_split,
    windows_to_read,
)
from opsctl.traffic.split import Split

BUDGET = 0.0001  # 99.99%
STEP = 10


def shipped() -> CanarySettings:
    settings = CanarySettings.from_config(load_config_file(BUILTIN_CONFIG))
    assert settings is not None, "opsctl.yaml ships automation.restore"
    return settings


class Backend:
    """One backend's 10-second steps: the share it carried and its error ratio, as the proxy counts."""

    def __init__(self, failing_until: float):
        self.failing_until = failing_until
        self.steps: list[tuple[float, int, float]] = []  # (step end, points carried, error ratio)

    def record(self, end: float, points: int) -> None:
        self.steps.append((end, points, 0.1 if end <= self.failing_until else 0.0))

    def health(self, windows: tuple[int, ...], at: float) -> BackendHealth:
        burns = []
        for w in windows:
            inside = [(p, e) for end, p, e in self.steps if at - w < end <= at and p > 0]
            if inside:
                requests = sum(p for p, _ in inside)
                burns.append(sum(p * e for p, e in inside) / requests / BUDGET)
        return BackendHealth(max(burns) if burns else None, windows=windows)


def drive(settings: CanarySettings, backend: Backend, *, start: float, until: float, share: int = 80):
    """From a full failover at `start` (the backend at 0 of its 80 points), look every 10 s; each
    step carries the points the last move left. Returns the final progress and the moves with their time."""
    progress = RestoreProgress.start(share, start, settings)
    moves = []
    t = start
    while t < until:
        t += STEP
        backend.record(t, progress.back)  # the step that just ended carried what the split gave it
        health = backend.health(windows_to_read(progress, t, settings), t)
        progress, move = advance(progress, health, t, settings)
        if move is not None:
            moves.append((t, move.kind, move.back))
        if progress.finished:
            break
    return progress, moves


def test_the_shipped_settings_are_5_points_judged_5m_steps_a_minute_apart_failing_at_the_fast_tier_factor():
    s = shipped()
    assert (s.canary, s.judge, s.steps, s.step_judge) == (5, 300, (25, 50, 100), 60)
    assert (s.fail_factor, s.fast_long, s.fast_short) == (300.0, 300, 60)
    assert (s.backoff, s.backoff_max) == (60, 300)
    # Latency has no fast tier: the 1h/5m page pair's factor, 2% of a 28-day budget in 1h: 0.02 x 672h / 1h.
    assert s.latency_fail_factor == round(0.02 * 28 * 24, 2) == 13.44


def test_the_backoff_doubles_per_failed_canary_and_is_capped():
    s = shipped()
    # 1m after the failover and the first failure, then 2m, 4m, and 5m from the fourth on.
    assert [s.backoff_after(n) for n in range(0, 7)] == [60, 60, 120, 240, 300, 300, 300]


def test_a_recovered_backend_is_back_at_its_saved_share_within_15_minutes_of_recovery():
    s = shipped()
    recovered = 1200.0  # the vendor answers 10% errors (1000x) for 20 minutes after the failover at 0
    progress, moves = drive(s, Backend(failing_until=recovered), start=0.0, until=7200.0)
    # Worked by hand: the fast windows hold no traffic after the failover (a full one), so the first
    # canary goes at 60 s (the first backoff); its first step carries 10% errors, 1000x >= 300x:
    # failed back at 70. Its errors stay in the 5m window until 370 (the step ending at 70 leaves
    # (t-300, t] at t = 370), past the 2m backoff (130): canary at 370, failed at 380; 4m backoff
    # (620) < window clear (680): canary at 680, failed at 690; backoff 5m (capped from 8m: 990) =
    # window clear (990): canary at 990, failed at 1000. 5m (cap): 1300, after the recovery at 1200:
    # judged 5m, no errors: 25% of the other 75 points (5 + 19 = 24) at 1600, 50% (5 + 38 = 43) at
    # 1660, all 80 at 1720: 520 s after the recovery.
    assert moves == [
        (60, "restore-canary", 5), (70, "restore-failback", 0),
        (370, "restore-canary", 5), (380, "restore-failback", 0),
        (680, "restore-canary", 5), (690, "restore-failback", 0),
        (990, "restore-canary", 5), (1000, "restore-failback", 0),
        (1300, "restore-canary", 5), (1600, "restore-step", 24), (1660, "restore-step", 43), (1720, "restore", 80),
    ]
    assert progress.phase == "done" and progress.back == 80 and progress.failures == 4
    assert moves[-1][0] - recovered <= 15 * 60


@pytest.mark.parametrize("recovered", [65.0, 400.0, 1000.0, 1290.0, 3600.0])
def test_whenever_the_backend_recovers_the_saved_share_is_back_within_15_minutes(recovered):
    # The worst case by hand: a canary failing just before the recovery keeps its errors in the 5m
    # window for 5m (>= the capped backoff), then 5m of judging and two 1m steps: 12m and one look.
    progress, moves = drive(shipped(), Backend(failing_until=recovered), start=0.0, until=recovered + 3600)
    assert progress.phase == "done"
    assert moves[-1][0] - recovered <= 12 * 60 + STEP


def test_a_canary_into_a_failing_backend_fails_back_at_its_first_look_and_counts():
    s = shipped()
    backend = Backend(failing_until=10_000)
    progress, moves = drive(s, backend, start=0.0, until=2000.0)
    canaries = [t for t, kind, _ in moves if kind == "restore-canary"]
    failbacks = [t for t, kind, _ in moves if kind == "restore-failback"]
    assert len(canaries) == len(failbacks) == progress.failures > 0
    assert all(f - c == STEP for c, f in zip(canaries, failbacks))  # within the fast tier's short window (60 s)
    assert progress.phase == "failed_back" and progress.back == 0
    # The waits between canaries grow (the backoff, then the 5m window's clearing) and stop growing at the cap.
    gaps = [b - a for a, b in zip(canaries, canaries[1:])]
    assert gaps == sorted(gaps) and max(gaps) == 310  # 300 s of window after its failback, 10 s after its canary


def test_no_data_is_never_healthy_a_canary_is_held_and_never_passed_on_it():
    s = shipped()
    canary = RestoreProgress("canary", 80, back=5, since=0.0, judged_until=300.0)
    held, move = advance(canary, BackendHealth.unknown((300,)), 400.0, s)
    assert move is None and held.phase == "canary" and "no data" in held.why
    waiting = RestoreProgress.start(80, 0.0, s)
    still, move = advance(waiting, BackendHealth.unknown((300, 60)), 100.0, s)
    assert move is None and still.phase == "waiting"


def test_a_canary_that_carried_no_traffic_proved_nothing_and_fails_back():
    s = shipped()
    canary = RestoreProgress("canary", 80, back=5, since=0.0, judged_until=300.0)
    after, move = advance(canary, BackendHealth(None, windows=(300,)), 300.0, s)
    assert move is not None and move.kind == "restore-failback" and after.failures == 1


def test_a_partial_failover_waits_while_the_traffic_left_on_the_backend_burns():
    s = shipped()
    waiting = RestoreProgress.start(12, 0.0, s)
    hot, move = advance(waiting, BackendHealth(1000.0, windows=(300, 60)), 120.0, s)
    assert move is None and hot.phase == "waiting"
    cool, move = advance(waiting, BackendHealth(2.0, windows=(300, 60)), 120.0, s)
    assert move is not None and move.kind == "restore-canary" and move.back == 5


def test_a_restored_backend_that_burns_again_while_its_incident_is_open_fails_back():
    s = shipped()
    done = RestoreProgress("done", 80, back=80, step=3, since=0.0, failures=1)
    assert advance(done, BackendHealth(0.5, windows=(300, 60)), 60.0, s) == (done, None)
    again, move = advance(done, BackendHealth(400.0, windows=(300, 60)), 70.0, s)
    assert move is not None and move.kind == "restore-failback" and again.failures == 2 and again.next_try == 70 + 120


def test_the_progress_round_trips_through_a_plain_dict_and_keeps_what_it_does_not_know():
    progress = RestoreProgress("stepping", 80, back=24, step=1, since=1600.0, judged_until=1660.0, failures=4,
                               why="step 1: 24 of 80 points back")
    data = progress.to_dict()
    assert data == {"version": 1, "phase": "stepping", "share": 80, "back": 24, "step": 1, "since": 1600.0,
                    "judged_until": 1660.0, "failures": 4, "next_try": None, "why": "step 1: 24 of 80 points back"}
    assert RestoreProgress.from_dict(data) == progress
    assert RestoreProgress.from_dict({**data, "later": 1}).to_dict()["later"] == 1


@pytest.mark.parametrize("change, message", [
    ({"phase": "ramping"}, "restore.phase: must be one of"),
    ({"back": 90}, "restore.back: need 0 <= back <= share"),
    ({"failures": -1}, "restore.failures: expected a whole number"),
    ({"since": "soon"}, "restore.since: expected a Unix time"),
    ({"version": 2}, "restore.version: expected 1"),
])
def test_a_stored_progress_that_does_not_read_names_its_field(change, message):
    data = {**RestoreProgress("waiting", 80).to_dict(), **change}
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        RestoreProgress.from_dict(data)


def test_moves_return_the_points_to_the_backend_from_those_that_gained_them():
    before = Split.of({"databricks": 80, "internal": 20})
    after = Split.of({"databricks": 0, "internal": 100})
    assert restore_split(before, after, "databricks", 5).weights == {"databricks": 5, "internal": 95}
    assert restore_split(before, after, "databricks", 80) == before
    # A partial failover (12 of 80 stuck) and two receivers: 68 came back from internal 48 and degraded 20.
    before3 = Split.of({"databricks": 80, "internal": 20, "degraded": 0})
    after3 = Split.of({"databricks": 12, "internal": 68, "degraded": 20})
    # 34 of 68 back: internal gave 48 of 68 (24), degraded 20 of 68 (10).
    assert restore_split(before3, after3, "databricks", 34).weights == {"databricks": 46, "internal": 44, "degraded": 10}


def test_each_move_has_its_own_operation_id_and_the_guards_know_it_for_a_canary_restore():
    s = shipped()
    progress = RestoreProgress.start(80, 0.0, s)
    canary, move = advance(progress, BackendHealth(None, windows=(300, 60)), 60.0, s)
    assert move is not None
    first = operation_id(move, "INC-1", "databricks", canary)
    assert first.startswith("restore-canary-") and canary_stage(first) == "canary"
    assert operation_id(move, "INC-1", "databricks", canary) == first  # the same on a retry
    failed, back = advance(canary, BackendHealth(1000.0, windows=(60,)), 70.0, s)
    assert back is not None and canary_stage(operation_id(back, "INC-1", "databricks", failed)) == "failback"
    again, move2 = advance(failed, BackendHealth(None, windows=(300, 60)), 400.0, s)
    assert move2 is not None and operation_id(move2, "INC-1", "databricks", again) != first  # a new attempt
    assert canary_stage("restore-0123456789abcdef") is None  # a routine restore (the hold-down's)


# -- readiness: a fleet that is short of pods, or lost some lately, holds the canary ------------


class Fleet:
    """An internal fleet of 6 pods losing `lost` of them while `losing(t)` (waves of an OOM-kill loop,
    or one long loss); the restore reads its readiness at every look, as the capacity source counts it."""

    def __init__(self, losing, lost: int = 2, desired: int = 6):
        self.losing, self.lost, self.desired = losing, lost, desired

    def at(self, t: float) -> Readiness:
        return Readiness("internal", ready=self.desired - (self.lost if self.losing(t) else 0), desired=self.desired,
                         where="simulated pods")


def drive_fleet(settings: CanarySettings, fleet: Fleet, *, until: float, share: int = 20):
    """A full failover from internal at 0; no errors once it carries traffic again (the pods that
    are ready answer): only readiness can hold the canary. Returns the final progress and the moves."""
    progress = RestoreProgress.start(share, 0.0, settings)
    backend = Backend(failing_until=-1.0)
    moves, t = [], 0.0
    while t < until:
        t += STEP
        backend.record(t, progress.back)
        health = backend.health(windows_to_read(progress, t, settings), t)
        progress, move = advance(progress, health, t, settings, fleet.at(t))
        if move is not None:
            moves.append((t, move.kind, move.back))
        if progress.finished:
            break
    return progress, moves


def test_the_shipped_settings_hold_a_canary_until_the_pods_have_been_whole_for_5_minutes():
    assert shipped().steady == 300


def test_no_traffic_is_not_health_while_the_fleet_lacks_a_third_of_its_pods():
    s = shipped()
    waiting = RestoreProgress.start(20, 0.0, s)
    # No traffic over 5m/1m (a full failover), past the backoff: without readiness a canary goes.
    _, move = advance(waiting, BackendHealth(None, windows=(300, 60)), 400.0, s)
    assert move is not None and move.kind == "restore-canary"
    held, move = advance(waiting, BackendHealth(None, windows=(300, 60)), 400.0, s,
                         Readiness("internal", ready=4, desired=6, where="Deployment llm/vllm"))
    assert move is None and held.phase == "waiting" and held.unready_at == 400.0
    assert "internal has 4 of 6 pods ready (Deployment llm/vllm)" in held.why
    # Unreadable (the API server did not answer): never ready on it.
    unknown, move = advance(waiting, BackendHealth(None, windows=(300, 60)), 400.0, s,
                            Readiness.unknown("internal", "Deployment llm/vllm", "timed out"))
    assert move is None and "readiness is unknown" in unknown.why


def test_an_oom_kill_loop_gets_no_canary_between_its_waves_and_one_5_minutes_after_the_last():
    s = shipped()
    # Waves: 4 of 6 pods lost for 4m, back for 3m, from 0 to 3600 (the loop stops at 3600).
    end = 3600.0
    progress, moves = drive_fleet(s, Fleet(lambda t: t < end and t % 420 < 240), until=end + 3600)
    # Worked by hand: the last wave starts at 3360 (8 x 420) and ends at 3600; the look at 3600 is
    # the first whole one (3600 % 420 = 240, not < 240) but t < end fails there too: whole from 3600,
    # so the last unready look is 3590. Whole for 300 s: the canary at 3890, judged 5m (no errors:
    # back is 0 errors), 25% of the other 15 points (5 + 4 = 9) at 4190, 50% (5 + 8 = 13) at 4250,
    # all 20 at 4310: 710 s after the recovery.
    assert moves == [(3890.0, "restore-canary", 5), (4190.0, "restore-step", 9), (4250.0, "restore-step", 13),
                     (4310.0, "restore", 20)]
    assert progress.phase == "done" and progress.failures == 0
    assert moves[-1][0] - end <= 12 * 60


@pytest.mark.parametrize("recovered", [65.0, 400.0, 1290.0, 3600.0])
def test_whenever_the_pods_come_back_the_saved_share_is_back_within_15_minutes(recovered):
    # The worst case by hand: 5m whole (steady), 5m judging the canary and two 1m steps: 12m and one look.
    progress, moves = drive_fleet(shipped(), Fleet(lambda t: t < recovered), until=recovered + 3600)
    assert progress.phase == "done"
    # The last look that saw pods missing is the last 10 s look before the recovery; nothing goes back
    # until 5m after it (the fleet seen whole for 5m).
    last_short = (math.ceil(recovered / STEP) - 1) * STEP
    assert moves[0][0] == last_short + 300
    assert all(t >= last_short + 300 for t, _, _ in moves)
    assert moves[-1][0] - recovered <= 12 * 60 + STEP


def test_a_move_already_made_is_judged_on_its_traffic_not_held_by_readiness():
    s = shipped()
    canary = RestoreProgress("canary", 20, back=5, since=0.0, judged_until=300.0)
    passed, move = advance(canary, BackendHealth(0.5, windows=(300,)), 300.0, s,
                           Readiness("internal", ready=5, desired=6, where="simulated pods"))
    assert move is not None and move.kind == "restore-step" and passed.phase == "stepping"


def test_the_last_unready_look_round_trips_with_the_progress():
    progress = RestoreProgress("waiting", 20, next_try=60.0, unready_at=42.0)
    data = progress.to_dict()
    assert data["unready_at"] == 42.0
    assert RestoreProgress.from_dict(data) == progress
