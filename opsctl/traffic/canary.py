"""The canary restore, as a decision: when traffic goes back to a backend it was failed over from,
and how much at a time. Pure: `advance(progress, health, now, settings)` returns the next
`RestoreProgress` and the move to make (a `PlannedMove`, or None); `canary_run.py` reads the health
and applies the move through the traffic front door.

    waiting      the failover is in place; the next canary may start once `next_try` passed and the
                 backend's own fast-tier windows (5m and 1m) are healthy: no burn at `fail_factor`
                 or more where traffic still flows to it (a partial failover), or no traffic at all
                 (a full one: then only the canary can tell). The slow pages (6h/30m keeps firing
                 for half an hour on the errors before the failover) are not waited for. A backend
                 whose readiness is known (`Readiness`: the internal Deployment's ready pods against
                 its desired replicas) must be whole, and have stayed whole for `steady` since it was
                 last seen short: no traffic says nothing of a fleet still losing or lacking pods
                 (an OOM-kill loop between its waves, a third of the GPUs gone).
    canary       `canary` points are back, judged for `judge` on the burn of the traffic they carry
                 (the backend's burn over the time since the canary started, at least the fast
                 tier's short window): a burn at `fail_factor` or more fails back at once; at the end
                 of the judge time a canary that carried no traffic proved nothing and fails back too
    stepping     the rest comes back in `steps` (percent of what remains after the canary), each held
                 and judged `step_judge` the same way; the last step returns the saved split exactly
    failed_back  a move burned and was failed back: waiting again, `next_try` after the backoff
                 (`backoff`, doubled per failure, at most `backoff_max`)
    done         the saved split is back; watched while its incident stays open (its slow pages
                 still firing): a burn at `fail_factor` or more fails back as a canary's would

No data (the metric source did not answer) is never healthy: nothing moves forward on it, and a
move already made is held where it is (failing back on a monitoring outage would only flap).
Each move has its operation id (`operation_id`): `restore-canary-H`, `restore-step-H-N`,
`restore-H-N` and `restore-failback-H`, H one per attempt, so a retry after a lost answer finds its own
change in the change record, and the guards tell a canary restore's moves from a routine restore.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal, Mapping

from opsctl.traffic.split import Split

if TYPE_CHECKING:
    from opsctl.config import Config

Phase = Literal["waiting", "canary", "stepping", "done", "failed_back"]
PHASES: tuple[str, ...] = ("waiting", "canary", "stepping", "done", "failed_back")
MoveKind = Literal["restore-canary", "restore-step", "restore", "restore-failback"]
KINDS: tuple[str, ...] = ("restore-canary", "restore-step", "restore", "restore-failback")
VERSION = 1


@dataclass(frozen=True)
class Readiness:
    """What the backend's own fleet says, beside its traffic: `ready` pods of the `desired` replicas
    (the Deployment's status in production, the simulated pods in a drill), `known` False when it
    could not be read (never ready on it). A backend with no such source (a vendor) has none: None."""

    backend: str
    ready: int = 0
    desired: int = 0
    where: str = ""
    known: bool = True
    error: str = ""

    @property
    def short(self) -> bool:
        """Fewer pods ready than desired (or none desired: nothing to carry the canary)."""
        return self.ready < self.desired or self.desired <= 0

    @classmethod
    def unknown(cls, backend: str, where: str, error: str) -> "Readiness":
        return cls(backend, where=where, known=False, error=error)

    def describe(self) -> str:
        if not self.known:
            return f"{self.backend}'s readiness is unknown ({self.where}: {self.error})"
        return f"{self.backend} has {self.ready} of {self.desired} pods ready ({self.where})"


@dataclass(frozen=True)
class CanarySettings:
    """`automation.restore` with the fast tier's windows and factor resolved, in seconds."""

    canary: int = 5
    judge: int = 300
    steps: tuple[int, ...] = (25, 50, 100)
    step_judge: int = 60
    fail_factor: float = 300.0
    backoff: int = 60
    backoff_max: int = 300
    fast_long: int = 300  # alerting.fast.long: the windows the waiting phase reads
    fast_short: int = 60  # alerting.fast.short: the shortest window a move is judged over
    # A latency SLO has no fast tier (300x a 1% budget is more than every request): its moves fail
    # at the 1h/5m page pair's factor for the period (13.44x at 28 days).
    latency_fail_factor: float = 13.44
    steady: int = 300  # a backend with known readiness stays whole this long before a canary starts

    @classmethod
    def from_config(cls, cfg: "Config") -> "CanarySettings | None":
        """None when `automation.restore` is unset (the hold-down restore)."""
        restore = cfg.automation.restore
        if restore is None:
            return None
        from opsctl.slo.conventions import ALERT_PAIRS, WINDOWS

        fast = cfg.alerting.fast
        page = min((p for p in ALERT_PAIRS if p.severity == "page"), key=lambda p: WINDOWS[p.long])  # 1h/5m
        return cls(canary=restore.canary, judge=restore.judge.seconds, steps=tuple(restore.steps),
                   step_judge=restore.step_judge.seconds,
                   fail_factor=float(restore.fail_factor if restore.fail_factor is not None else fast.factor),
                   backoff=restore.backoff.seconds, backoff_max=restore.backoff_max.seconds,
                   fast_long=fast.long.seconds, fast_short=fast.short.seconds,
                   latency_fail_factor=float(f"{page.factor(cfg.slos.period_seconds):.4g}"),
                   steady=restore.steady.seconds)

    def backoff_after(self, failures: int) -> int:
        """The wait before the next canary: `backoff` after the failover and the first failure,
        doubled per failure since, at most `backoff_max`."""
        doubled: int = self.backoff << max(failures - 1, 0)
        return min(doubled, self.backoff_max)


@dataclass(frozen=True)
class BackendHealth:
    """What the metric source says of the backend over the windows `windows_to_read` asked for:
    `burn` the fastest burn across them and its SLOs (None: no requests reached it there),
    `known` False when the source could not answer (no data: never healthy)."""

    burn: float | None
    known: bool = True
    windows: tuple[int, ...] = ()
    # Whether a move fails on it, judged per SLO (availability at fail_factor, latency at
    # latency_fail_factor) by the reader; None: `burn` against fail_factor.
    failing: bool | None = None
    worst: str = ""  # the SLO burning fastest against its threshold

    def fails(self, settings: "CanarySettings") -> bool:
        if not self.known or self.burn is None:
            return False
        return self.failing if self.failing is not None else self.burn >= settings.fail_factor

    @classmethod
    def unknown(cls, windows: tuple[int, ...] = ()) -> "BackendHealth":
        return cls(None, known=False, windows=windows)

    def describe(self) -> str:
        if not self.known:
            return "no data (the metric source did not answer)"
        over = "/".join(_window(w) for w in self.windows) or "its windows"
        of = f" ({self.worst})" if self.worst else ""
        return f"no traffic over {over}" if self.burn is None else f"burn {self.burn:.4g}x{of} over {over}"


@dataclass(frozen=True)
class PlannedMove:
    """A move the restore wants: the backend to have `back` of the `share` points the failover took."""

    kind: MoveKind
    back: int
    share: int
    step: int = 0  # the step's number (1-based) for restore-step, else 0
    why: str = ""

    @property
    def action(self) -> str:
        """The traffic controller's action: a fail-back is the rollback of a move that burned (the
        guards let a rollback through, recorded as an override); the others restore."""
        return "rollback" if self.kind == "restore-failback" else "restore"


@dataclass(frozen=True)
class RestoreProgress:
    """Where one restore is, typed, frozen; `to_dict`/`from_dict` for the incident record's
    `restore` field (version 1; unknown keys kept in `extra`)."""

    phase: Phase
    share: int  # points the failover took from the backend, to come back
    back: int = 0  # points back so far
    step: int = 0  # steps taken after the canary
    since: float | None = None  # when the current move was made (canary, stepping, done)
    judged_until: float | None = None  # the current move is judged until then
    failures: int = 0  # canaries (or steps) failed back so far
    next_try: float | None = None  # waiting, failed_back: no canary before then
    why: str = ""  # the last judgement, one line
    extra: Mapping[str, Any] | None = None
    unready_at: float | None = None  # the last look that found the backend short of pods (or unreadable)

    @classmethod
    def start(cls, share: int, now: float, settings: CanarySettings) -> "RestoreProgress":
        """After a failover that took `share` points: the first canary after the first backoff."""
        return cls("waiting", share, next_try=now + settings.backoff_after(0),
                   why=f"failed over; first canary after {_window(settings.backoff_after(0))}")

    @property
    def finished(self) -> bool:
        return self.phase == "done"

    def to_dict(self) -> dict[str, Any]:
        return {**dict(self.extra or {}), "version": VERSION, "phase": self.phase, "share": self.share,
                "back": self.back, "step": self.step, "since": self.since, "judged_until": self.judged_until,
                "failures": self.failures, "next_try": self.next_try, "why": self.why,
                **({"unready_at": self.unready_at} if self.unready_at is not None else {})}

    @classmethod
    def from_dict(cls, data: object, where: str = "restore") -> "RestoreProgress":
        """Raises ValueError naming the field when `data` is not a restore progress."""
        if not isinstance(data, Mapping):
            raise ValueError(f"{where}: expected a mapping, got {type(data).__name__}")
        if data.get("version") != VERSION:
            raise ValueError(f"{where}.version: expected {VERSION}, got {data.get('version')!r}")
        phase = data.get("phase")
        if phase not in PHASES:
            raise ValueError(f"{where}.phase: must be one of {', '.join(PHASES)} (got {phase!r})")

        def count(key: str) -> int:
            value = data.get(key, 0)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{where}.{key}: expected a whole number >= 0, got {value!r}")
            return value

        def instant(key: str) -> float | None:
            value = data.get(key)
            if value is None:
                return None
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"{where}.{key}: expected a Unix time or null, got {value!r}")
            return float(value)

        share, back = count("share"), count("back")
        if not 0 <= back <= share <= 100:
            raise ValueError(f"{where}.back: need 0 <= back <= share <= 100 (back {back}, share {share})")
        why = data.get("why", "")
        if not isinstance(why, str):
            raise ValueError(f"{where}.why: expected text, got {type(why).__name__}")
        known = {"version", "phase", "share", "back", "step", "since", "judged_until", "failures", "next_try", "why",
                 "unready_at"}
        extra = {k: v for k, v in data.items() if k not in known}
        return cls(phase, share, back, count("step"), instant("since"), instant("judged_until"), count("failures"),
                   instant("next_try"), why, extra or None, instant("unready_at"))


def windows_to_read(progress: RestoreProgress, now: float, settings: CanarySettings) -> tuple[int, ...]:
    """The windows (seconds, ending now) the next `advance` judges the backend over: the fast
    tier's two while waiting; while a move is judged, the time since it was made (at least the
    fast tier's short window, at most the judge time), so it is judged on the traffic it carries."""
    if progress.phase in ("waiting", "failed_back", "done"):
        return (settings.fast_long, settings.fast_short)
    since = progress.since if progress.since is not None else now
    longest = settings.judge if progress.phase == "canary" else settings.step_judge
    return (int(min(max(now - since, settings.fast_short), max(longest, settings.fast_short))),)


def advance(progress: RestoreProgress, health: BackendHealth, now: float, settings: CanarySettings,
            readiness: Readiness | None = None) -> tuple[RestoreProgress, PlannedMove | None]:
    """The next progress and the move it takes (None: nothing to move now). The caller applies
    the move and keeps the returned progress only once the move applied (or was already so).
    `readiness`: the backend's fleet (None: it has no such source, a vendor); it holds a canary
    that has not started yet, never a move already judged on its own traffic."""
    phase = progress.phase
    if phase == "done":  # watched while its incident is open: a burn fails back as a canary's would
        if health.fails(settings):
            return _fail_back(progress, now, settings, f"restored backend burns again: {health.describe()},"
                                                       f" at or above {_threshold(settings)}")
        return progress, None
    if phase in ("waiting", "failed_back"):
        if readiness is not None and (not readiness.known or readiness.short):
            progress = replace(progress, unready_at=now)  # seen at every look, the backoff's too
        return _waiting(progress, health, now, settings, readiness)
    return _judging(progress, health, now, settings)


def _waiting(progress: RestoreProgress, health: BackendHealth, now: float, settings: CanarySettings,
             readiness: Readiness | None) -> tuple[RestoreProgress, PlannedMove | None]:
    if progress.next_try is not None and now < progress.next_try:
        return progress, None
    if not health.known:
        return replace(progress, why=f"waiting: {health.describe()}"), None
    if health.fails(settings):
        return replace(progress, why=f"waiting: {health.describe()}, at or above {_threshold(settings)}"), None
    if readiness is not None and (not readiness.known or readiness.short):
        return replace(progress, why=f"waiting: {readiness.describe()}"), None
    if readiness is not None and progress.unready_at is not None and now - progress.unready_at < settings.steady:
        steady = _window(now - progress.unready_at)
        return replace(progress, why=f"waiting: {readiness.describe()}, whole for {steady} of the"
                                     f" {_window(settings.steady)} asked"), None
    if progress.share <= 0:
        return replace(progress, phase="done", since=now, why="nothing was taken from the backend"), None
    points = min(settings.canary, progress.share)
    fleet = f"; {readiness.describe()}" if readiness is not None else ""
    why = f"canary: {points} of {progress.share} points back ({health.describe()}{fleet})"
    moved = replace(progress, phase="canary", back=points, step=0, since=now, judged_until=now + settings.judge,
                    next_try=None, why=why)
    return moved, PlannedMove("restore-canary", points, progress.share, why=why)


def _judging(progress: RestoreProgress, health: BackendHealth, now: float,
             settings: CanarySettings) -> tuple[RestoreProgress, PlannedMove | None]:
    what = "canary" if progress.phase == "canary" else f"step {progress.step}"
    if health.fails(settings):
        return _fail_back(progress, now, settings, f"{what} failed: {health.describe()}, at or above {_threshold(settings)}")
    if progress.judged_until is not None and now < progress.judged_until:
        return progress, None
    if not health.known:  # the move stays where it is; nothing proves it healthy
        return replace(progress, why=f"{what} held: {health.describe()}"), None
    if health.burn is None:
        return _fail_back(progress, now, settings, f"{what} failed: it carried no traffic, so it proved nothing")
    return _next_step(progress, now, settings, f"{what} passed: {health.describe()}")


def _fail_back(progress: RestoreProgress, now: float, settings: CanarySettings,
               why: str) -> tuple[RestoreProgress, PlannedMove]:
    failures = progress.failures + 1
    wait = settings.backoff_after(failures)
    text = f"{why}; failed back, next canary after {_window(wait)} ({failures} failed so far)"
    back = replace(progress, phase="failed_back", back=0, step=0, since=now, judged_until=None, failures=failures,
                   next_try=now + wait, why=text)
    return back, PlannedMove("restore-failback", 0, progress.share, why=text)


def _next_step(progress: RestoreProgress, now: float, settings: CanarySettings,
               why: str) -> tuple[RestoreProgress, PlannedMove]:
    share = progress.share
    canary = min(settings.canary, share)
    rest = share - canary
    for number, percent in enumerate(settings.steps, start=1):
        if number <= progress.step:
            continue
        back = share if percent >= 100 else canary + math.ceil(rest * percent / 100)
        if back >= share:
            text = f"{why}; all {share} points back"
            done = replace(progress, phase="done", back=share, step=number, since=now, judged_until=None, why=text)
            return done, PlannedMove("restore", share, share, step=number, why=text)
        if back <= progress.back:
            continue  # a share this small skips a step that would move nothing
        text = f"{why}; step {number}: {back} of {share} points back"
        stepped = replace(progress, phase="stepping", back=back, step=number, since=now,
                          judged_until=now + settings.step_judge, why=text)
        return stepped, PlannedMove("restore-step", back, share, step=number, why=text)
    text = f"{why}; all {share} points back"  # steps end at 100 (config): reached only by a hand-made settings
    return (replace(progress, phase="done", back=share, since=now, judged_until=None, why=text),
            PlannedMove("restore", share, share, why=text))


# -- the split of a move, and its operation ------------------------------------------------------


def share_taken(before: Split, after: Split, backend: str) -> int:
    """The points the failover took from `backend` (what the restore returns)."""
    return max(before.weight(backend) - after.weight(backend), 0)


def restore_split(before: Split, after: Split, backend: str, back: int) -> Split:
    """The split with `back` of the points the failover took returned to `backend`, taken from the
    backends that gained them in proportion to their gain; all of them: the saved split itself."""
    taken = share_taken(before, after, backend)
    if back >= taken:
        return before
    if back <= 0:
        return after
    names = sorted(set(before.backends()) | set(after.backends()))
    gains = {b: after.weight(b) - before.weight(b) for b in names if b != backend and after.weight(b) > before.weight(b)}
    total = sum(gains.values())
    exact = {b: back * g / total for b, g in gains.items()}
    take = {b: math.floor(x) for b, x in exact.items()}
    for b in sorted(exact, key=lambda k: (-(exact[k] - take[k]), k))[:back - sum(take.values())]:
        take[b] += 1
    weights = {b: after.weight(b) - take.get(b, 0) for b in names}
    weights[backend] = after.weight(backend) + back
    return Split.of(weights, dict(after.shadow))


def planned_split(move: PlannedMove, before: Split, after: Split, backend: str) -> Split:
    return restore_split(before, after, backend, move.back)


def operation_id(move: PlannedMove, incident: str, backend: str, progress: RestoreProgress) -> str:
    """The move's operation id, the same on every retry and replica: H from the incident, the
    backend and the attempt (failures before it), so each attempt's moves share H."""
    attempt = progress.failures - (1 if move.kind == "restore-failback" else 0)
    digest = hashlib.sha256(f"{incident}|{backend}|{attempt}".encode()).hexdigest()[:16]
    if move.kind in ("restore-step", "restore"):
        return f"{move.kind}-{digest}-{move.step}"
    return f"{move.kind}-{digest}"


def canary_stage(operation: str | None) -> str | None:
    """`canary`, `step`, `restore` or `failback` for a canary restore's operation id, else None."""
    if not operation:
        return None
    found = _STAGE.fullmatch(operation)
    if found is None:
        return None
    return found.group(1) or found.group(2) or "restore"


# restore-canary-H, restore-failback-H, restore-step-H-N, restore-H-N (a routine restore is restore-H)
_STAGE = re.compile(r"restore-(?:(canary|failback)-[0-9a-f]{16}|(step)-[0-9a-f]{16}-\d+|[0-9a-f]{16}-\d+)")


def _threshold(settings: CanarySettings) -> str:
    return f"{settings.fail_factor:.4g}x (latency {settings.latency_fail_factor:.4g}x)"


def _window(seconds: float) -> str:
    seconds = int(seconds)
    if seconds % 60:
        return f"{seconds}s"
    return f"{seconds // 60}m"


__all__ = ["BackendHealth", "CanarySettings", "KINDS", "PHASES", "PlannedMove", "Readiness", "RestoreProgress", "advance",
           "canary_stage", "operation_id", "planned_split", "restore_split", "share_taken", "windows_to_read"]
