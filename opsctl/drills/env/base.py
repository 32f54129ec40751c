"""The DrillEnvironment protocol: everything the engine touches, for one mode.

The engine never asks which mode it runs in: it gets a clock, a metric source, a pager, ticket
desks, a traffic controller and fault injectors from the environment, and asks it to bring the
world to the next instant (`advance`): the embedded environment writes simulated traffic up to it,
the live one sleeps until it.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Callable, Protocol

if TYPE_CHECKING:
    from opsctl.clock import Clock
    from opsctl.config import Config
    from opsctl.paging.base import Pager
    from opsctl.tickets.base import TicketProvider
    from opsctl.traffic.service import TrafficService


class DrillEnvironment(Protocol):
    mode: str  # embedded | live
    cfg: "Config"  # the drill's own config: its state dir, its providers, the drill's freeze
    tick: int  # seconds between evaluations (alerts, stop conditions, expectations)

    @property
    def clock(self) -> Clock: ...

    def prepare(self, progress: Callable[[str], None]) -> dict:
        """Make the environment ready (the embedded store seeded); returns facts for the report."""
        ...

    def source(self): ...

    def pager(self): ...

    def tickets(self, vendor: str): ...

    def traffic(self):
        """The TrafficService (opsctl/traffic/service.py) every actor changes traffic through."""
        ...

    def controller(self): ...

    def injector(self, name: str): ...

    def advance(self, to: float, should_stop: Callable[[], bool]) -> None: ...

    def split_changed(self, split) -> None:
        """The split the grammar service now routes by (the embedded world simulates it from now on)."""
        ...

    def vendor_ledger(self, vendor: str):
        """The local ticket ledger a simulated vendor answers in, or None (a real vendor answers)."""
        ...

    def close(self) -> None: ...


class DrillActors:
    """The pager, the ticket desks and the traffic front door of an environment, opened once, on
    first use, on its own config, clock and run. Both environments mix this in; a subclass needs
    `cfg`, `clock`, `run_id`, `_pager = None`, `_desks = {}` and `_traffic = None`."""

    cfg: Config
    clock: Clock  # SimClock or WallClock
    run_id: str
    _pager: Pager | None
    _desks: dict[str, TicketProvider]
    _traffic: "TrafficService | None"

    def pager(self):
        if self._pager is None:
            from opsctl.paging.registry import open_pager

            self._pager = open_pager(self.cfg, clock=self.clock)
        return self._pager

    def tickets(self, vendor: str):
        if vendor not in self._desks:
            from opsctl.tickets.registry import open_ticket_provider

            self._desks[vendor] = open_ticket_provider(self.cfg, vendor, clock=self.clock)
        return self._desks[vendor]

    def traffic(self):
        """The traffic front door, as every actor builds it, with the drill's clock, actor and pager."""
        if self._traffic is None:
            from opsctl.traffic.service import TrafficService

            self._traffic = TrafficService(
                self.cfg, clock=self.clock, actor=drill_actor(self.run_id),
                hooks=drill_hooks(self.cfg, self.clock, self.pager()),
                audit_fields=audit_fields(self.run_id))
        return self._traffic

    def controller(self):
        return self.traffic().controller


def with_drill_freeze(cfg: "Config", scenario, start: float, end: float) -> "Config":
    """The config plus the scenario's change freeze over [start, end] (UTC), if it declares one.
    Only the drill's own controller sees it: it makes guards stricter, never looser."""
    if scenario.freeze is None:
        return cfg
    from opsctl.freeze import FreezeWindow

    import time

    fmt = "%Y-%m-%dT%H:%M"
    window = FreezeWindow(name=scenario.freeze.name, timezone="UTC",
                          start=time.strftime(fmt, time.gmtime(start // 60 * 60)),
                          end=time.strftime(fmt, time.gmtime(end // 60 * 60 + 60)), reason=scenario.freeze.reason)
    return dataclasses.replace(cfg, freezes=[*cfg.freezes, window])


def drill_hooks(cfg, clock, pager) -> list:
    """Every applied change also goes to the pager as a change event marked as a drill."""
    from opsctl.paging.change_hook import PagerChangeHook

    return [PagerChangeHook(cfg, clock=clock, drill=True, pager=pager)]


def audit_fields(run_id: str) -> dict:
    return {"drill": True, "drill_run": run_id}


def drill_actor(run_id: str) -> str:
    from opsctl.audit import current_actor

    return f"{current_actor()} (drill {run_id})"
