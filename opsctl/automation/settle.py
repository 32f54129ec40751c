"""The quiet lane's gate on `opsctl serve`'s event loop (issue 22, the trigger path): `Settle`."""

from __future__ import annotations

import asyncio

# A delivery nothing acts on waits on the event loop, before its recorder thread takes it up, until
# no other such delivery has arrived for SETTLE seconds (at most SETTLE_MAX): while a burst is being
# received the loop then has the interpreter lock to itself (recorder threads encoding and parsing
# pieces of the delivery log no longer make it wait for the lock between reads), so an actionable
# delivery anywhere in the burst is received at once; and the burst is recorded in one go (fewer,
# larger group commits). Issue 22, the trigger path.
SETTLE = 0.005
SETTLE_MAX = 0.05


class Settle:
    """A gate on the event loop: `await wait()` returns once no caller has arrived for `quiet`
    seconds, or `at_most` seconds after the first of the waiting callers arrived, whichever is
    first; every waiting caller is let through together. Touched on the event loop only."""

    def __init__(self, quiet: float = SETTLE, at_most: float = SETTLE_MAX):
        self.quiet, self.at_most = quiet, at_most
        self._waiting: list[asyncio.Future[None]] = []
        self._first = self._last = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self.released = 0  # times the gate opened (for tests)

    async def wait(self) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        if not self._waiting:
            self._first = now
        self._last = now
        future: asyncio.Future[None] = loop.create_future()
        self._waiting.append(future)
        if self._timer is None:
            self._timer = loop.call_at(now + min(self.quiet, self.at_most), self._check)
        await future

    def _check(self) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        due = min(self._last + self.quiet, self._first + self.at_most)
        if now < due:
            self._timer = loop.call_at(due, self._check)
            return
        self._timer = None
        waiting, self._waiting = self._waiting, []
        self.released += 1
        for future in waiting:
            if not future.done():
                future.set_result(None)
