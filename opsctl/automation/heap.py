"""The replica's heap and the cyclic garbage collector (issue 22, the trigger path).

`opsctl serve` imports most of what it will ever hold before it takes its first delivery: starlette,
uvicorn, pydantic models, the kubernetes client in team mode, the policies, the state stores. That
is about 135,000 objects the collector tracks, and every full (generation 2) collection walked all
of them: 30-130 ms with the interpreter lock held, measured on the bench's replica, and those pauses
were the slowest rounds of `bench/bench_serve.py` (each such round had one). None of those objects
is ever garbage, so once the service has started they are moved to the collector's permanent
generation (`gc.freeze()`): full collections then walk only what was made since (10-35k objects).

What is made since is mostly JSON (the delivery pieces and the episodes document, parsed and
encoded on every write): thousands of dicts and lists per piece, freed by reference counting, never
in a cycle. At the default young threshold (700) the collector ran about 25 times a round, and each
pass promoted whatever parse was in flight to the older generations, whose passes then walked it
again: about 1.3-1.7 s of collection over 40 team-mode rounds. At YOUNG (20,000) it runs about once
every four rounds, and the older generations keep Python's own ratios (10, 10). Cyclic garbage is
still collected, a little later.
"""

from __future__ import annotations

import gc

YOUNG = 20_000  # allocations (net of frees) of tracked objects between two young collections


def settle_heap() -> int:
    """Collect what start-up left as garbage, freeze the rest, raise the young threshold to YOUNG;
    return how many objects are frozen."""
    gc.collect()
    gc.freeze()
    _young, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG, middle, old)
    return gc.get_freeze_count()
