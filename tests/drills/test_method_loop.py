"""One method loop (drills/method.py) for every world: the embedded engine's discrete-event loop
and the chain's hop polling are two Steppers of the same bounded loop."""

from __future__ import annotations

import math

import pytest

from opsctl.drills import method
from opsctl.drills.lifecycle import Aborted


class Clocked:
    """A world on a plain counter clock: it wants to be observed every `step` seconds and is settled
    after `settle_after` observations (None: never). Counts what the loop asked of it."""

    def __init__(self, step: float, settle_after: int | None = None, stop_after: int | None = None):
        self.now = 0.0
        self.step = step
        self.settle_after = settle_after
        self.stop_after = stop_after
        self.observed: list[float] = []
        self.advanced: list[float] = []

    def check_stop(self) -> None:
        if self.stop_after is not None and len(self.observed) >= self.stop_after:
            raise Aborted("stop asked")

    def settled(self) -> bool:
        return self.settle_after is not None and len(self.observed) >= self.settle_after

    def next_at(self) -> float:
        return self.now + self.step

    def advance(self, until: float) -> None:
        self.advanced.append(until)
        self.now = until

    def observe(self, at: float) -> None:
        self.observed.append(at)


def test_the_loop_ends_as_soon_as_everything_is_decided():
    world = Clocked(10.0, settle_after=3)
    assert method.run(world, 1000.0, max_steps=50) == method.SETTLED
    assert world.observed == [10.0, 20.0, 30.0] and world.advanced == [10.0, 20.0, 30.0]


def test_at_the_deadline_the_world_is_brought_there_and_not_observed():
    world = Clocked(10.0)
    assert method.run(world, 35.0, max_steps=50) == method.DEADLINE
    assert world.observed == [10.0, 20.0, 30.0]
    assert world.advanced == [10.0, 20.0, 30.0, 35.0]


def test_a_stop_ends_the_loop_with_aborted():
    world = Clocked(10.0, stop_after=2)
    with pytest.raises(Aborted, match="stop asked"):
        method.run(world, 1000.0, max_steps=50)
    assert world.observed == [10.0, 20.0]


def test_the_loop_is_bounded_in_steps():
    world = Clocked(0.0)  # never moves on: without the bound this would loop for ever
    with pytest.raises(Aborted, match="took 25 steps"):
        method.run(world, 1.0, max_steps=25)
    assert len(world.observed) == 25


def test_the_embedded_and_the_chain_method_are_steppers_of_the_one_loop():
    from opsctl.drills.chain.polling import HopPolling
    from opsctl.drills.loop import MethodLoop

    wanted = {"check_stop", "settled", "next_at", "advance", "observe"}
    for stepper in (MethodLoop, HopPolling):
        assert wanted <= set(vars(stepper)), (stepper.__name__, sorted(wanted - set(vars(stepper))))


def test_an_embedded_drill_ends_at_once_when_no_policy_can_take_the_failover_or_the_ticket(tmp_path):
    """As the chain ends on "no policy matched": once a delivery matched no policy and no page rule
    of the faulted backend reaches one that fails over or files a ticket, those expectations fail
    then, and a drill with nothing else open ends there instead of at their deadlines."""
    import json

    from tests.drills.conftest import DrillEnv
    from tests.drills.test_automation import with_policies

    env = DrillEnv(tmp_path, with_policies(" []"))

    def only_the_response(data):
        data["expectations"] = [e for e in data["expectations"]
                                if e["expect"] in ("detected", "paged", "failover-applied", "vendor-ticket")]
        data["stop-conditions"] = []

    path = env.scenario("vendor-outage", only_the_response)
    result = env.run("drill", "run", str(path), "-o", "json")
    report = json.loads(result.stdout)
    assert result.exit_code == 1 and report["outcome"] == "failed"
    verdicts = {v["expect"]: v for v in report["expectations"]}
    assert verdicts["detected"]["passed"] and verdicts["paged"]["passed"]
    failover, ticket = verdicts["failover-applied"], verdicts["vendor-ticket"]
    assert failover["reason"].startswith("no failover from databricks can happen: automation: no policy matched Slo")
    assert ticket["reason"].startswith("no ticket with databricks can be filed: automation: no policy matched Slo")
    # It ended at the first evaluation tick (every alerting.evaluation_interval, 1m, from the fault:
    # the method's 1m pause is one tick) after the first unmatched delivery and the page, not at
    # the failover's 15m or the ticket's 20m deadline.
    unmatched = next(e["offset"] for e in report["timeline"] if e["kind"] == "automation"
                     and e["message"].startswith("no policy matched"))
    paged = report["measurements"]["time_to_page"]
    [settled] = [e for e in report["timeline"] if e["kind"] == "settled"]
    assert settled["offset"] == math.ceil(max(unmatched, paged) / 60) * 60 < 15 * 60
    assert not any(e["kind"] == "deadline" for e in report["timeline"])
    assert max(e["offset"] for e in report["timeline"] if e["phase"] == "method") == settled["offset"]
