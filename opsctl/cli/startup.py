"""The cyclic garbage collector held off while the CLI process starts (#26 item 6).

Start-up allocates tens of thousands of objects that live as long as the process: modules, classes,
click's commands and the typed config. Nothing among them is garbage, yet the collector scans them
again and again as they are made: about 20 young-generation collections and a middle one between
the interpreter's own start and the config built, some 3-4 ms of `traffic status` on a 2-core
machine. So the process entry (`python -m opsctl`, `opsctl.cli.main.run`) raises the young
generation's threshold while it starts, and once the config is loaded (`AppContext.config`) moves
everything made so far out of the collector's way (`gc.freeze()`: what the start-up made and still
holds is never scanned again) and restores the thresholds it found.

It is a raised threshold, not a disabled collector: a command that never loads a config still
collects, every `THRESHOLD` allocations instead of every 700. `main()` called in a process that is
already running (the in-process tests) is not paused.
"""

from __future__ import annotations

import gc

THRESHOLD = 20_000  # start-up to a loaded config is about 14,000 net allocations (embedded default)

_saved: tuple[int, ...] | None = None


def pause(found: tuple[int, ...] | None = None) -> None:
    """Raise the young generation's threshold until `settled()` (idempotent); `found`: the
    thresholds as they were before the caller raised them itself (`python -m opsctl`)."""
    global _saved
    if _saved is None:
        _saved = found or gc.get_threshold()
        gc.set_threshold(max(THRESHOLD, _saved[0]), *_saved[1:])


def settled() -> None:
    """Start-up is over (the config is loaded): freeze what it made, restore the thresholds."""
    global _saved
    if _saved is not None:
        saved, _saved = _saved, None
        gc.freeze()
        gc.set_threshold(*saved)
