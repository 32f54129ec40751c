"""The runbook facts' rooms: each subject lives in the module named for it, and
`opsctl.runbooks.facts` still offers every name it held before the split (the generator reads them
as `facts`, other code imports them from there), as the same object."""

from __future__ import annotations

import importlib

import pytest

# Every name facts.py defined before the split, by the room it moved to.
ROOMS = {
    "formatting": ["pct", "human_duration", "one_in", "seconds_text"],
    "commands": ["PLACEHOLDERS", "INCIDENT", "PlaceholderError", "sh", "command", "Commands"],
    "budget": ["Budget", "Pair", "budget_of", "pairs_of", "bad_events"],
    "queries": ["Query", "slo_queries", "_sel", "backend_queries", "outcome_query", "tokens_query", "peak_query"],
    "moves": ["CapacityNeed", "Move", "normal_split", "plan_move", "vendor_throughput_text", "capacity_need",
              "Ramp", "ramp_target", "traffic_target"],
    "escalation": ["TicketRoute", "ticket_route", "Paging", "paging"],
}


@pytest.mark.parametrize("room", sorted(ROOMS))
def test_each_fact_lives_in_its_room_and_the_old_path_still_offers_it(room):
    facts = importlib.import_module("opsctl.runbooks.facts")
    module = importlib.import_module(f"opsctl.runbooks.{room}")
    for name in ROOMS[room]:
        value = getattr(module, name)
        assert getattr(facts, name) is value, name
        if callable(value):
            assert value.__module__ == module.__name__, f"{name} is defined in {value.__module__}"


def test_facts_defines_nothing_of_its_own():
    """Every public name of the facade comes from one of the rooms."""
    facts = importlib.import_module("opsctl.runbooks.facts")
    roomed = {name for names in ROOMS.values() for name in names}
    public = {n for n in vars(facts) if not n.startswith("_") and n != "annotations"}
    assert public <= roomed, public - roomed
