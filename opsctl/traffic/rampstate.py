"""A ramp's state in the shared state store (document `ramp`): plan, progress, owner and heartbeat.

One ramp at a time, across every laptop and replica: the document is written with compare-and-swap,
names its owner (actor, pid, host) and carries a heartbeat the owner renews while it runs. A ramp is
live while its heartbeat is fresh (HEARTBEAT_TTL) and, on the owner's own host, its pid is alive; a
ramp whose owner died stays `running` but not live, and blocks new ramps until it is resumed (by
anyone) or aborted. The soak deadline of the step being watched is saved too, so `--resume` finishes
that step's soak and burn check before it moves on.

The heartbeat is written and judged on the shared store's clock: the API server's time
(`Kube.server_now()`) when the state is on Kubernetes, so a laptop whose clock is off cannot make a
live ramp look dead (or a dead one live) to another host; the host's clock (`opsctl.clock`) for
local state, which only one host reads.
"""

from __future__ import annotations

import os
import time
from typing import Any, TYPE_CHECKING, Iterable, cast

from opsctl.errors import ConflictError
from opsctl.traffic.ramp_record import RampDocument, RampOwner
from opsctl.traffic.split import Split

if TYPE_CHECKING:
    from opsctl.config import Config
    from opsctl.state.base import StateStore

DOC = "ramp"
HEARTBEAT_TTL = 30.0  # seconds without a heartbeat after which a ramp's owner is taken for dead
HEARTBEAT_EVERY = 5.0


def _host() -> str:
    import socket  # not at import: `traffic status` loads this module and never needs it

    return socket.gethostname()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def store_now(store: "StateStore | None") -> float:
    """The time heartbeats are written and judged at: the API server's for shared state, else this host's."""
    kube = getattr(store, "kube", None)
    if kube is not None and hasattr(kube, "server_now"):
        now: float = kube.server_now()
        return now
    from opsctl.clock import wall_now

    return wall_now()


def me() -> dict[str, Any]:
    return {"pid": os.getpid(), "host": _host()}


def is_live(doc: RampDocument, now: float | None = None, store: "StateStore | None" = None) -> bool:
    """Running, its owner's heartbeat fresh (on the store's clock, `store_now`), and (on this host)
    the owner's process alive."""
    if "status" in doc.present and doc.status != "running":
        return False
    owner = doc.owner or RampOwner()
    now = store_now(store) if now is None else now
    if now - float(doc.heartbeat or 0) > HEARTBEAT_TTL:
        return False
    if owner.host == _host() and isinstance(owner.pid, int):
        return _alive(owner.pid)
    return True


class RampState:
    """A plain class, not a @dataclass: `traffic status` loads it, and generating the methods was
    most of this module's import time (#26 item 6). The document itself is typed (`RampDocument`,
    immutable): a change replaces it (`update`)."""

    __slots__ = ("doc", "store", "version", "_beat")

    def __init__(self, doc: RampDocument, store: "StateStore", version: str | None = None):
        self.doc = doc
        self.store = store
        self.version = version  # None: not stored yet
        self._beat = 0.0

    @classmethod
    def load(cls, cfg_or_store: "Config | StateStore") -> "RampState | None":
        store = _store(cfg_or_store)
        doc = store.get(DOC)
        return None if doc is None else cls(RampDocument.parse(doc.data), store, doc.version)

    def update(self, **changes: Any) -> None:
        """Change the document in memory (`save` writes it)."""
        self.doc = self.doc.changed(**changes)

    def save(self) -> None:
        """Compare-and-swap: losing means someone else took the ramp over (or started another)."""
        now = store_now(self.store)
        self.update(updated_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)), heartbeat=now)
        self._beat = time.monotonic()
        try:
            stored = self.store.put(DOC, self.doc.stored(), version=self.version)
        except ConflictError as exc:
            current = self.store.get(DOC)
            other = RampDocument.parse(current.data) if current else None
            owner = (other.owner if other else None) or RampOwner()
            raise ConflictError(
                f"ramp {self.doc.id}: its state was changed by someone else"
                f" (now {other.id if other else 'gone'}, owner pid {owner.pid} on"
                f" {owner.host}); this process stops",
                hint="see `opsctl traffic status`",
            ) from exc
        self.version = stored.version

    def heartbeat(self) -> None:
        if time.monotonic() - self._beat >= HEARTBEAT_EVERY:
            self.save()

    def take(self, actor: str) -> None:
        """Become the owner (start or resume)."""
        owner = RampOwner(**me(), actor=actor)
        self.update(owner=owner, pid=owner.pid, host=owner.host)
        self.save()

    def split(self, key: str, backends: Iterable[str]) -> Split:
        return Split.from_dict(getattr(self.doc, key), backends, f"ramp state {key}")

    def steps(self, backends: Iterable[str]) -> list[Split]:
        return [Split.from_dict(s, backends, f"ramp state step {i + 1}") for i, s in enumerate(self.doc.steps)]

    @property
    def status(self) -> str:
        return self.doc.status

    @property
    def live(self) -> bool:
        return is_live(self.doc, store=self.store)

    def summary(self) -> dict[str, Any]:
        return self.doc.summary()


def _store(cfg_or_store: "Config | StateStore") -> "StateStore":
    if hasattr(cfg_or_store, "get") and hasattr(cfg_or_store, "put"):
        return cast("StateStore", cfg_or_store)  # a Config has neither: this is the store
    from opsctl.state import open_state_store

    return open_state_store(cfg_or_store)


def running_ramp(cfg: "Config") -> RampDocument | None:
    """The live ramp's document (its `id` and `owner`), or None."""
    state = RampState.load(cfg)
    if state is None or not state.live:
        return None
    return state.doc
