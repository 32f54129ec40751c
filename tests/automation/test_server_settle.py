"""The quiet lane's gate on the event loop (settle.Settle, issue 22 the trigger path): deliveries
nothing acts on are handed to their recorder threads only once receipt has settled, so recorder
threads never compete with the event loop for the interpreter lock while a burst is being
received. Counted on the loop itself: what has been let through after each step."""

from __future__ import annotations

import asyncio

from opsctl.automation.settle import Settle


def test_callers_arriving_back_to_back_are_let_through_together_once_arrivals_stop():
    async def scenario() -> tuple[list[int], int, int]:
        gate = Settle(quiet=0.02, at_most=30.0)
        through: list[int] = []

        async def caller(i: int) -> None:
            await gate.wait()
            through.append(i)

        tasks = []
        for i in range(10):  # a burst: each arrives while the ones before still wait
            tasks.append(asyncio.create_task(caller(i)))
            await asyncio.sleep(0)  # the caller reaches the gate
        assert gate.released == 0 and through == []  # nobody through while arrivals keep coming
        await asyncio.gather(*tasks)
        return through, gate.released, len(gate._waiting)

    through, released, left = asyncio.run(scenario())
    assert sorted(through) == list(range(10)) and released == 1 and left == 0


def test_a_steady_stream_is_let_through_at_most_at_most_seconds_after_its_first_caller():
    async def scenario() -> tuple[int, int, bool]:
        gate = Settle(quiet=30.0, at_most=0.05)  # arrivals never pause for `quiet`: only the cap opens it
        first = asyncio.create_task(gate.wait())
        stream = []
        while not first.done():  # arrivals keep coming, far inside `quiet` of each other (bounded below)
            stream.append(asyncio.create_task(gate.wait()))
            await asyncio.sleep(0.005)
            assert len(stream) < 2000, "the gate never opened"
        await asyncio.gather(*stream)
        return len(stream), gate.released, first.done()

    arrived, released, done = asyncio.run(scenario())
    assert done and arrived >= 1 and released >= 1


def test_a_caller_after_the_gate_opened_waits_for_the_next_opening():
    async def scenario() -> tuple[int, bool, int]:
        gate = Settle(quiet=0.01, at_most=30.0)
        await gate.wait()
        after = asyncio.create_task(gate.wait())
        await asyncio.sleep(0)
        waiting = not after.done()
        await after
        return gate.released, waiting, len(gate._waiting)

    released, waiting, left = asyncio.run(scenario())
    assert waiting and released == 2 and left == 0
