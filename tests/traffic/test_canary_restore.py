"""The canary restore applied (opsctl/traffic/canary_run.py) on the embedded store and the real
TrafficController with the file actuator: a simulated clock, and each 10-second step written with
the requests the split of that moment sends the vendor (10% of them 5xx while it fails)."""

from __future__ import annotations

import numpy as np
import pytest

from opsctl.clock import SimClock
from opsctl.config import load_config
from opsctl.metrics.embedded import EmbeddedStore
from opsctl.traffic.canary import CanarySettings, RestoreProgress
from opsctl.traffic.canary_run import restore_tick
from opsctl.traffic.service import TrafficService
from tests.traffic.conftest import END, PER_STEP

TOTAL = sum(PER_STEP.values())  # requests per 10-second step, both backends
RESTORE = "automation:\n  restore: {}\n"  # the defaults: 5 points, judged 5m, 25/50/100%, backoff 1m..5m


class World:
    """The proxy's counts as the split routes them, written step by step into the embedded store."""

    def __init__(self, env, clock: SimClock, failing_until: float):
        self.path = env.state / "metrics.sqlite"
        self.clock = clock
        self.failing_until = failing_until

    def step(self, split) -> None:
        self.clock.advance(10)
        t = int(self.clock.now())
        store = EmbeddedStore.open(self.path, create=False)
        try:
            for backend in PER_STEP:
                n = TOTAL * split.weight(backend) // 100
                errors = n // 10 if backend == "databricks" and t <= self.failing_until else 0
                le = np.full((11, 1), n, dtype=np.int64)
                cols = {"req_ok": [n - errors], "req_server_error": [errors], "lat_count": [n], "lat_sum": [n * 0.2],
                        **{f"le_{i}": le[i] for i in range(11)}}
                store.write_steps(backend, [t], cols, mode="replace")
        finally:
            store.close()


def setup(make_env, failing_until: float):
    env = make_env(rate="{max_changes: 6, window: 1h}", extra_traffic="")
    env.config.write_text(env.config.read_text() + RESTORE)
    cfg = load_config(str(env.config))
    clock = SimClock(END)
    world = World(env, clock, failing_until)
    traffic = TrafficService(cfg, clock=clock, hooks=[])
    return env, cfg, clock, world, traffic


def fail_over(world: World, traffic: TrafficService):
    # Two minutes of the outage at 80%, then the automation's failover (routine: no freeze).
    for _ in range(12):
        world.step(traffic.read().split)
    result = traffic.failover("databricks", "INC-36", emergency=False, reason="vendor 5xx", check=False)
    assert result.outcome == "applied", result.message
    return result.before, result.after


@pytest.mark.slow
def test_a_canary_into_a_still_failing_backend_fails_back_within_the_fast_window_and_the_split_ends_healthy(make_env):
    env, cfg, clock, world, traffic = setup(make_env, failing_until=END + 10**6)
    settings = CanarySettings.from_config(cfg)
    assert settings is not None
    before, after = fail_over(world, traffic)
    assert (after.weight("databricks"), after.weight("internal")) == (0, 100)
    failed_at = clock.now()
    progress = RestoreProgress.start(80, clock.now(), settings)
    moves = []
    for _ in range(70):  # 700 s of looks, every 10 s
        world.step(traffic.read().split)
        tick = restore_tick(traffic, settings, progress, incident="INC-36", backend="databricks", before=before,
                            after=after, now=clock.now(), reason="test")
        if tick.move is not None:
            assert tick.moved, tick.result.message if tick.result else tick
            moves.append((clock.now() - failed_at, tick.move.kind, tick.result.after.weight("databricks")))
        progress = tick.progress
    # By hand: the 5m window holds the 5xx of the two minutes before the failover until 300 s after
    # it (the last failing step at 80% ends at the failover), so the first canary goes at 300 s
    # (backoff 60 s passed); its first step carries 500 requests, 50 of them 5xx (1000x >= 300x):
    # failed back at 310, 10 s into it. The next canary waits for its own errors to leave the 5m
    # window (610) past the 1m backoff: canary at 610, back at 620. Then 2m backoff < 5m window again.
    assert moves[:4] == [(300, "restore-canary", 5), (310, "restore-failback", 0),
                         (610, "restore-canary", 5), (620, "restore-failback", 0)]
    assert all(b[0] - a[0] <= settings.fast_short for a, b in zip(moves[::2], moves[1::2]))
    assert traffic.read().split == after  # internal 100, databricks 0
    assert progress.phase == "failed_back" and progress.failures == len(moves) // 2
    # Each move is in the change record under its own operation, the fail-back as the rollback of the canary.
    record = traffic.read().record
    kinds = [(e.action, e.operation.rsplit("-", 1)[0]) for e in record.changes][1:]
    assert kinds[:2] == [("restore", "restore-canary"), ("rollback", "restore-failback")]


@pytest.mark.slow
def test_a_recovered_backend_is_back_at_its_saved_split_through_the_guards_before_its_slow_page_resolves(make_env):
    env, cfg, clock, world, traffic = setup(make_env, failing_until=END + 120 + 200)  # recovers 200 s after the failover
    settings = CanarySettings.from_config(cfg)
    before, after = fail_over(world, traffic)
    recovered = END + 120 + 200
    progress = RestoreProgress.start(80, clock.now(), settings)
    moves = []
    while not progress.finished and clock.now() < recovered + 3600:
        world.step(traffic.read().split)
        tick = restore_tick(traffic, settings, progress, incident="INC-36", backend="databricks", before=before,
                            after=after, now=clock.now(), reason="test")
        if tick.move is not None:
            assert tick.moved, tick.result.message if tick.result else tick
            moves.append((clock.now() - recovered, tick.move.kind))
        progress = tick.progress
    # By hand: no vendor traffic after the failover; its 5m window clears 300 s after it (100 s after
    # the recovery): canary at +100, judged 5m to +400, 25% at +400, 50% at +460, all at +520.
    assert moves == [(100, "restore-canary"), (400, "restore-step"), (460, "restore-step"), (520, "restore")]
    assert traffic.read().split == before
    # Every move passed the guards; the budget guard judged the vendor on its fast windows.
    steps = [e for e in traffic.read().record.changes if e.action == "restore"]
    budget = [g for g in traffic.attempts(incident="INC-36")[0].get("guards", []) if g.get("name") == "budget"]
    assert len(steps) == 4 and budget and "canary restore" in budget[0]["message"]
    # The 6h/30m pair still burns over the errors before the failover: 30m after it, not yet resolved.
    assert (moves[-1][0] + 200) < 30 * 60


# -- the vendor's synthetic probes as its readiness (decision 0270) --------------------------------

PROBE = "databricks: {kind: vendor, vendor: databricks, probe: {success: 0.99, min_probes: 30}}"


class ProbedWorld(World):
    """The same world, and the proxy's 10 probes a step to the vendor whatever its share, one of
    them failing (5xx) while it fails, as its requests do."""

    def step(self, split) -> None:
        super().step(split)
        t = int(self.clock.now())
        failed = 1 if t <= self.failing_until else 0
        store = EmbeddedStore.open(self.path, create=False)
        try:
            store.write_steps("databricks", [t], {"probe_ok": [10 - failed], "probe_server_error": [failed]})
        finally:
            store.close()


def setup_probed(make_env, failing_until: float, *, probes: bool = True):
    env = make_env(rate="{max_changes: 6, window: 1h}", extra_traffic="")
    text = env.config.read_text()
    assert "databricks: {kind: vendor, vendor: databricks}" in text
    env.config.write_text(text.replace("databricks: {kind: vendor, vendor: databricks}", PROBE) + RESTORE)
    cfg = load_config(str(env.config))
    clock = SimClock(END)
    world = (ProbedWorld if probes else World)(env, clock, failing_until)
    return env, cfg, clock, world, TrafficService(cfg, clock=clock, hooks=[])


def look_until(traffic, settings, world, clock, before, after, until: float, since: float):
    progress = RestoreProgress.start(80, clock.now(), settings)
    moves = []
    while not progress.finished and clock.now() < until:
        world.step(traffic.read().split)
        tick = restore_tick(traffic, settings, progress, incident="INC-36", backend="databricks", before=before,
                            after=after, now=clock.now(), reason="test")
        if tick.move is not None:
            assert tick.moved, tick.result.message if tick.result else tick
            moves.append((clock.now() - since, tick.move.kind))
        progress = tick.progress
    return progress, moves


@pytest.mark.slow
def test_a_vendor_whose_probes_still_fail_gets_no_canary_and_its_split_stays_failed_over(make_env):
    env, cfg, clock, world, traffic = setup_probed(make_env, failing_until=END + 10**6)
    settings = CanarySettings.from_config(cfg)
    before, after = fail_over(world, traffic)
    progress, moves = look_until(traffic, settings, world, clock, before, after, clock.now() + 700, clock.now())
    # Blind, this vendor took a canary at 300 s and 610 s, each failed back (the test above); with its
    # probes failing 1 in 10 (30 of the window's 300, more than the 3 that 99% lets pass), none goes.
    assert moves == [] and traffic.read().split == after
    assert progress.phase == "waiting" and progress.failures == 0
    assert progress.why.startswith("waiting: databricks's probes: 270 of 300 ok over 5m; failed: server_error 30")


@pytest.mark.slow
def test_a_recovered_vendor_comes_back_once_its_probes_have_succeeded_over_the_steady_window(make_env):
    recovered = END + 120 + 200  # 200 s after the failover
    env, cfg, clock, world, traffic = setup_probed(make_env, failing_until=recovered)
    settings = CanarySettings.from_config(cfg)
    before, after = fail_over(world, traffic)
    progress, moves = look_until(traffic, settings, world, clock, before, after, recovered + 3600, recovered)
    # By hand: one probe in 10 fails up to the step ending at the recovery; the 5m window holds the
    # failing steps ending in (t - 300, recovered], at most 3 (297 of 300 ok) from t = recovered + 270:
    # canary at +270 (its fast windows long clear), judged 5m to +570, 25% at +570, 50% at +630, all at +690.
    assert moves == [(270, "restore-canary"), (570, "restore-step"), (630, "restore-step"), (690, "restore")]
    assert traffic.read().split == before and progress.failures == 0


@pytest.mark.slow
def test_a_vendor_declaring_a_probe_with_no_probe_data_is_never_ready(make_env):
    recovered = END + 120 + 200
    env, cfg, clock, world, traffic = setup_probed(make_env, failing_until=recovered, probes=False)
    settings = CanarySettings.from_config(cfg)
    before, after = fail_over(world, traffic)
    progress, moves = look_until(traffic, settings, world, clock, before, after, recovered + 900, recovered)
    # The vendor recovered, but no probe reached the store: unknown, never ready (blind it came back at +100).
    assert moves == [] and traffic.read().split == after
    assert progress.why.startswith("waiting: databricks's probe readiness is unknown (llm_proxy_probes_total in"
                                   " embedded store ") and progress.why.endswith("no probe of databricks in the last 300s)")
