"""The canary restore applied: one look at a restore (`restore_tick`) reads the backend's health over
the windows the decision asks for, lets `canary.advance` decide, and makes the move it plans through
the traffic front door (`TrafficService.move_from`) under the move's operation id; the progress
moves on only once the move applied (or was already so). `resume` rebuilds a progress from the
split when none was kept (a restarted `opsctl serve`)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Callable

from opsctl.traffic.canary import (
    BackendHealth, CanarySettings, PlannedMove, Readiness, RestoreProgress, advance, operation_id, restore_split,
    share_taken, windows_to_read,
)
from opsctl.traffic.canary_readiness import read_readiness
from opsctl.traffic.slo_health import read_health

if TYPE_CHECKING:
    from opsctl.traffic.change import ChangeResult
    from opsctl.traffic.service import TrafficService
    from opsctl.traffic.split import Split

LOOK_EVERY = 10.0  # seconds between two looks at one restore: the fast tier's evaluation interval


@dataclass(frozen=True)
class RestoreTick:
    """What one look did: the progress to keep, the move it planned (None: nothing to move) and
    how the move came out (`result`; None without a move)."""

    progress: RestoreProgress
    move: PlannedMove | None = None
    result: "ChangeResult | None" = None
    health: BackendHealth | None = None
    recognised: bool = False  # the split already was the move's: its own earlier write, by operation

    @property
    def moved(self) -> bool:
        return self.result is not None and (self.result.outcome == "applied" or self.recognised)


def resume(before: "Split", after: "Split", current: "Split | None", backend: str, now: float,
           settings: CanarySettings) -> RestoreProgress | None:
    """A progress for a restore whose progress was not kept, from the split as it is: at the
    failover's split, waiting (the first backoff from now); at the saved one, done; part of the way,
    stepping from there (judged from now). None when the split is neither (someone else moved it)."""
    share = share_taken(before, after, backend)
    if current == after:
        return RestoreProgress.start(share, now, settings)
    if current == before:
        return RestoreProgress("done", share, share, since=now, why="the saved split is already back")
    for back in range(1, share):
        if restore_split(before, after, backend, back) == current:
            canary = min(settings.canary, share)
            steps = sum(1 for p in settings.steps
                        if p < 100 and canary + -(-(share - canary) * p // 100) <= back)
            return RestoreProgress("stepping", share, back, step=steps, since=now,
                                   judged_until=now + settings.step_judge,
                                   why=f"resumed with {back} of {share} points back")
    return None


def restore_tick(traffic: "TrafficService", settings: CanarySettings, progress: RestoreProgress, *, incident: str,
                 backend: str, before: "Split", after: "Split", now: float, reason: str,
                 health: BackendHealth | None = None, frozen: str = "",
                 readiness: "Callable[[], Readiness | None] | None" = None) -> RestoreTick:
    """One look at one restore: read the health (unless given) and the backend's readiness
    (`readiness`, default `read_readiness` on the traffic's config: the capacity source's pods),
    decide, make the move. `frozen` (the freezes in force): only a fail-back moves; a move toward
    the backend, which the freeze guard would refuse, waits for the freeze's end without being tried."""
    from opsctl.traffic.record import find_change

    if health is None:
        health = read_health(traffic.cfg, backend, windows_to_read(progress, now, settings), now, settings)
    fleet = None
    if progress.phase in ("waiting", "failed_back"):  # only a canary not yet started looks at the fleet
        fleet = readiness() if readiness is not None else read_readiness(traffic.cfg, backend)
    planned, move = advance(progress, health, now, settings, fleet)
    if move is None:
        return RestoreTick(planned, health=health)
    if frozen and move.kind != "restore-failback":
        return RestoreTick(replace(progress, why=f"held by the change freeze ({frozen}): {move.why}"), health=health)
    target = restore_split(before, after, backend, move.back)
    expect = [restore_split(before, after, backend, progress.back)]
    if move.kind == "restore-failback":  # back from wherever the restore had got to
        expect.append(restore_split(before, after, backend, planned.back))
    operation = operation_id(move, incident, backend, planned)
    result = traffic.move_from(incident, target, expect, action=move.action, operation_id=operation,
                               reason=f"{reason}: {move.why}"[:500])
    recognised = result.outcome == "unchanged" and find_change(
        traffic.read().record, operation=operation, action=move.action) is not None
    done = result.outcome in ("applied", "unchanged", "dry-run")
    return RestoreTick(planned if done else progress, move, result, health, recognised)


__all__ = ["LOOK_EVERY", "RestoreTick", "restore_tick", "resume"]
