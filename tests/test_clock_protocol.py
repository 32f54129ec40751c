"""One `Clock` protocol (opsctl/clock.py) for what WallClock and SimClock both offer, used where code
takes either (docs/decisions/0007-one-clock-hook.md)."""

from __future__ import annotations

import inspect
from pathlib import Path

from opsctl.clock import Clock, SimClock, WallClock

OPSCTL = Path(__file__).resolve().parent.parent / "opsctl"


def test_both_clocks_offer_every_method_of_the_protocol():
    wanted = {name for name, member in vars(Clock).items() if callable(member) and not name.startswith("_")}
    assert wanted == {"now", "sleep"}
    for clock in (WallClock(), SimClock(1000.0)):
        assert all(callable(getattr(clock, name, None)) for name in wanted), type(clock).__name__


def test_a_sim_clock_read_through_the_protocol_moves_only_when_slept():
    clock: Clock = SimClock(1000.0)
    assert clock.now() == 1000.0
    clock.sleep(30)
    assert clock.now() == 1030.0


def test_the_pager_and_ticket_registries_take_a_clock_typed_clock():
    from opsctl.paging.registry import local_pager, open_pager
    from opsctl.tickets.registry import open_ticket_provider

    for opener in (open_pager, local_pager, open_ticket_provider):
        assert inspect.signature(opener).parameters["clock"].annotation == "Clock | None", opener.__name__


def test_no_module_spells_the_union_the_protocol_replaces():
    spelled = [str(path.relative_to(OPSCTL.parent)) for path in sorted(OPSCTL.rglob("*.py"))
               if "WallClock | SimClock" in path.read_text() or "SimClock | WallClock" in path.read_text()]
    assert spelled == [], spelled
