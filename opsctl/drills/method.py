"""One method loop for every world: bring the world to the next instant it asks for, observe it
there, until everything is decided, the deadline, or a stop; bounded in steps.

A world's method gives the loop a `Stepper`: the embedded and live worlds' (loop.MethodLoop: the
next scheduled action or evaluation tick; `advance` moves the SimClock, or waits on the wall
clock live, and runs the actions due; `observe` is the tick: alerts to the policy engine, the
pager, the audit log, the tickets, stop conditions, the expectations) and the chain's
(chain.polling: every second; `advance` waits on the wall clock; `observe` asks each component what
happened and acknowledges as on-call). `settled` is true once every expectation or required hop is
decided, including a hop known never to happen (the chain's "no policy matched"), so the loop
ends at once then rather than waiting for the deadline.
"""

from __future__ import annotations

from typing import Protocol

from opsctl.drills.lifecycle import Aborted

SETTLED, DEADLINE = "settled", "deadline"


class Stepper(Protocol):
    def check_stop(self) -> None:
        """Raise Aborted when a stop was asked for (a signal, a stop condition)."""
        ...

    def settled(self) -> bool:
        """Every expectation or required hop is decided (met, failed, or known never to happen)."""
        ...

    def next_at(self) -> float:
        """The next instant, on the world's clock, the world wants to act or be observed at."""
        ...

    def advance(self, until: float) -> None:
        """Bring the world to `until`: run what is due by then (embedded: the SimClock moves; the
        chain and live: the wall clock is waited on)."""
        ...

    def observe(self, at: float) -> None:
        """Observe the world at `at` (it may decide expectations or hops)."""
        ...


def run(stepper: Stepper, deadline: float, *, max_steps: int) -> str:
    """The method's loop: SETTLED when everything was decided, DEADLINE when `deadline` came first
    (the world is brought to it, not observed there). More than `max_steps` is a bug: Aborted."""
    for _ in range(max_steps):
        stepper.check_stop()
        if stepper.settled():
            return SETTLED
        at = stepper.next_at()
        if at > deadline:
            stepper.advance(deadline)
            stepper.check_stop()
            return DEADLINE
        stepper.advance(at)
        stepper.check_stop()
        stepper.observe(at)
    raise Aborted(f"the method loop took {max_steps} steps without settling or reaching its deadline")


__all__ = ["DEADLINE", "SETTLED", "Stepper", "run"]
