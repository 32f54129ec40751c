"""The replica's start-up heap, kept out of the cyclic collector's passes (issue 22, the trigger path).

`opsctl serve` imports most of what it will ever hold before it takes its first delivery: starlette,
uvicorn, pydantic models, the kubernetes client in team mode, the policies, the state stores. That
is about 150,000 objects the garbage collector tracks, and every full (generation 2) collection
walks all of them: 30-130 ms with the interpreter lock held, measured on the bench's replica, and
those pauses were the slowest rounds of `bench/bench_serve.py` (every such round had one). None of
those objects is ever garbage, so once the service has started they are moved to the collector's
permanent generation (`gc.freeze()`): full collections then walk only what was made since.
Objects made later (each delivery, each action) are collected as before.
"""

from __future__ import annotations

import gc


def freeze_start_up() -> int:
    """Collect what start-up left as garbage, then freeze the rest; return how many objects are frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
