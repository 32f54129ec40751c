"""What the policy engine and the service ask of an episode store (`Episodes`), whichever keeps the
episodes (episodes.EpisodeStore in SQLite, shared.SharedEpisodeStore in the shared document), and
what both stores share: an episode's name from the alert that opened it (`episode_key`), a firing
alert taken into its episode (`FiringStart`), and the failover's mark (`mark_failover_started`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol

from opsctl.automation.action_record import ActionRecord
from opsctl.automation.episode_record import Episode
from opsctl.automation.idempotency import event_key


def episode_key(policy: str, target: str, fingerprint: str, starts_at: str) -> str:
    """An episode's name from the alert that opened it, the same on every replica (never a counter):
    pager dedup keys and ticket idempotency keys derive from it."""
    return event_key("episode", policy, target, fingerprint, starts_at)[:20]


@dataclass
class FiringStart:
    """A firing alert taken into its episode: the episode (leased to this worker), whether it
    cancelled a pending restore, and the targets other open episodes moved traffic away from."""

    episode: Episode
    cancelled: bool
    moved_away: set[str]
    resumed: bool = False  # its failover was started by a worker or replica that died before finishing it


FAILOVER_DONE = ("applied", "noop", "dry_run")


def mark_failover_started(episode: Episode) -> tuple[Episode, bool]:
    """Before acting: the episode says its failover is under way (so a successor knows it was started).
    Returns it so, and whether an earlier attempt had started it already."""
    if episode.failover in FAILOVER_DONE:
        return episode, False
    return episode.changed(failover="started"), episode.failover == "started"


class Episodes(Protocol):
    """The episode store as the policy engine and the service use it: `EpisodeStore` (SQLite, one
    process) or `shared.SharedEpisodeStore` (the shared document, team mode). Episodes come back
    typed (`Episode`) and go back typed."""

    def begin_firing(self, policy: str, fingerprint: str, target: str, starts_at: str, *,
                     failover: bool = False) -> FiringStart | None: ...
    def save(self, episode: Episode) -> None: ...
    def begin_resolved(self, policy: str, fingerprint: str, target: str, starts_at: str, *, restores: bool,
                       hold_down: float, because: Callable[[Episode], str]) -> tuple[Episode, str] | None: ...
    def by_incident(self, keys: list[str]) -> Episode | None: ...
    def claim_due_restore(self) -> Episode | None: ...
    def end_restore(self, episode: Episode, *, closed_because: str | None, retry_at: float | None = None) -> None: ...
    def close_episode(self, episode: Episode, because: str) -> None: ...
    def episodes(self, *, open_only: bool = False) -> list[Episode]: ...
    def record_action(self, record: ActionRecord) -> None: ...
    def actions(self, *, policy: str | None = None, action: str | None = None) -> list[ActionRecord]: ...
    def recover(self, *, all_others: bool = False) -> int: ...
    def check(self) -> None: ...

    def held_here(self, holder: str | None) -> bool:
        """Whether a Busy episode's `holder` is another thread of this replica, which lets go within
        this process's own bounded steps (so a worker may wait for it rather than hand its event back)."""
        ...

    def holder(self) -> str | None:
        """The name this worker holds episodes under, for a hand-back after it failed or was fenced
        (`let_go`, maybe later from another thread); None: nothing to hand back."""
        ...

    def let_go(self, holder: str | None = None) -> int:
        """Release the open episodes `holder` (default: this worker) holds, owner-checked; how many."""
        ...


__all__ = ["FAILOVER_DONE", "Episodes", "FiringStart", "episode_key", "mark_failover_started"]
