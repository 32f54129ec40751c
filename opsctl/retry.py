"""Bounded retries: capped, jittered exponential backoff under one overall deadline.

An operation signals "worth retrying" by raising `RemoteUnavailable` (429, 5xx, network). Anything
else propagates at once. The loop stops at whichever comes first: `max_attempts`, or the deadline
(a wait that would end past the deadline is not started). A server's Retry-After is honoured as a
minimum wait; one that reaches past the deadline ends the loop at once, saying when to come back.
"""

from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass
from typing import Callable, TypeVar

from opsctl.remote import RemoteUnavailable

T = TypeVar("T")
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 5
    base_delay: float = 0.5
    max_delay: float = 8.0
    deadline: float = 30.0
    timeout: float = 10.0  # per attempt; never longer than what is left of the deadline

    @classmethod
    def from_settings(cls, settings) -> "RetryPolicy":
        return cls(
            max_attempts=settings.max_attempts,
            base_delay=settings.base_delay,
            max_delay=settings.max_delay,
            deadline=settings.deadline,
            timeout=settings.timeout,
        )

    def backoff(self, attempt: int, retry_after: float | None = None, rand: Callable[[], float] = random.random) -> float:
        """Delay before attempt `attempt + 1` (attempt counts from 1): full jitter, capped at max_delay;
        never shorter than the server's Retry-After."""
        ceiling = min(self.max_delay, self.base_delay * (2 ** (attempt - 1)))
        delay = ceiling * rand()
        if retry_after is not None:
            delay = max(delay, retry_after)
        return delay


def call_with_retry(
    op: Callable[[float], T],
    policy: RetryPolicy,
    what: str,
    *,
    on_retry: Callable[[int, float, RemoteUnavailable], None] | None = None,
    monotonic: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Run `op(timeout)` until it succeeds or the policy is spent; `what` names it in errors."""
    start = monotonic()
    attempt = 0
    maybe_sent = False
    while True:
        attempt += 1
        left = policy.deadline - (monotonic() - start)
        try:
            return op(max(0.1, min(policy.timeout, left)))
        except RemoteUnavailable as exc:
            elapsed = monotonic() - start
            maybe_sent = maybe_sent or exc.maybe_sent
            if attempt >= policy.max_attempts:
                raise _gave_up(what, exc, attempt, elapsed, "attempt limit reached", maybe_sent) from exc
            delay = policy.backoff(attempt, exc.retry_after)
            if elapsed + delay >= policy.deadline:
                why = f"deadline of {policy.deadline:g}s reached"
                if exc.retry_after is not None and exc.retry_after > policy.max_delay:
                    why = f"the server asks to wait {exc.retry_after:g}s, past the {policy.deadline:g}s deadline"
                raise _gave_up(what, exc, attempt, elapsed, why, maybe_sent) from exc
            log.warning("%s: %s; retrying in %.2fs (attempt %d of %d)", what, exc.message, delay, attempt + 1,
                        policy.max_attempts)
            if on_retry:
                on_retry(attempt, delay, exc)
            sleep(delay)


def _gave_up(what: str, exc: RemoteUnavailable, attempts: int, elapsed: float, why: str,
             maybe_sent: bool) -> RemoteUnavailable:
    return RemoteUnavailable(
        f"{what}: gave up after {attempts} attempt(s) in {elapsed:.1f}s ({why}): {exc.message}",
        status=exc.status,
        retry_after=exc.retry_after,
        maybe_sent=maybe_sent,
        hint=exc.hint or "the service is rate limiting or failing; retry the same command later (it is idempotent)",
    )
