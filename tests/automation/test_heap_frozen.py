"""`opsctl serve` settles its heap once started (automation/heap.py, issue 22 item 9): the start-up
heap is frozen out of the cyclic collector's passes (full collections of the ~135,000 objects
start-up leaves were the slowest rounds of bench/bench_serve.py), and the young generation is
collected after heap.YOUNG allocations instead of 700 (the JSON of every write made it run ~25
times a round). Counted, never timed: which objects a collection would walk (`gc.get_objects()`),
how many young collections a number of allocations set off, and that later garbage is still
collected."""

from __future__ import annotations

import asyncio
import gc
import weakref

from opsctl.automation.actions import DryRunExecutor
from opsctl.automation.auth import TokenAuth
from opsctl.automation.server import build_app
from opsctl.automation.service import AutomationService
from opsctl.config.loading import load_config_file
from tests.automation.helpers import FAILOVER_POLICY, write_serve_config
from tests.conftest import wait_until

EXTRA = """\
traffic:
  actuator: file
  default_split: {databricks: 80, internal: 20}
paging: {provider: local}
tickets: {provider: local}
"""


class Node:
    """A container the collector tracks (instances of a plain class are)."""

    def __init__(self) -> None:
        self.other: Node | None = None


def test_the_start_up_heap_is_frozen_once_the_service_has_started_and_later_garbage_is_still_collected(tmp_path):
    cfg = load_config_file(write_serve_config(tmp_path, policies=FAILOVER_POLICY, extra=EXTRA))
    service = AutomationService(cfg, DryRunExecutor())
    app = build_app(service, TokenAuth.of("t" * 32), None, 1 << 20, 5.0, 300)
    threshold = gc.get_threshold()
    gc.unfreeze()  # whatever an earlier test froze is walked again: this test sees only its own freeze
    held = [Node() for _ in range(2000)]  # start-up objects that stay alive, as imports and models do
    held_ids = {id(n) for n in held}
    assert sum(1 for o in gc.get_objects() if id(o) in held_ids) == len(held)  # walked before start-up

    async def scenario() -> tuple[int, int, int, bool, int]:
        async with app.router.lifespan_context(app):
            await asyncio.to_thread(wait_until, lambda: gc.get_threshold() != threshold, 30.0, 0.02,
                                    "the heap to be settled")
            frozen = gc.get_freeze_count()
            young = young_collections_while_allocating(5000)
            walked_held = sum(1 for o in gc.get_objects() if id(o) in held_ids)
            a, b = Node(), Node()  # a cycle made after start-up: garbage a collection must still find
            a.other, b.other = b, a
            gone = weakref.ref(a)
            del a, b
            collected = gc.collect()
            return frozen, walked_held, collected, gone() is None, young

    young_before = young_collections_while_allocating(5000)
    try:
        frozen, walked_held, collected, freed, young_after = asyncio.run(scenario())
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)
    assert frozen >= len(held)  # every start-up object, the held ones among them
    assert walked_held == 0  # no full collection walks them any more
    assert freed and collected >= 2  # the later cycle (two Nodes and their dicts) was collected
    # 5,000 allocations that stay alive: several young collections at the default 700, none under YOUNG
    assert threshold[0] < 5000 // 2 and young_before >= 2
    assert young_after == 0


def young_collections_while_allocating(count: int) -> int:
    """Young (generation 0) collections set off by `count` allocations of tracked objects kept alive."""
    seen: list[int] = []

    def note(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and info["generation"] == 0:
            seen.append(1)

    gc.collect()  # every generation's count starts from zero
    gc.callbacks.append(note)
    try:
        kept = [Node() for _ in range(count)]
    finally:
        gc.callbacks.remove(note)
    del kept
    return len(seen)
