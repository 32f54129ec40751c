"""opsctl.retry: bounded, jittered retries within a deadline."""

from __future__ import annotations

import pytest

from opsctl.errors import UsageError
from opsctl.remote import RemoteUnavailable
from opsctl.retry import RetryPolicy, call_with_retry


class FakeTime:
    """A monotonic clock and sleep passed in by parameter: time moves only when slept."""

    def __init__(self):
        self.now = 0.0
        self.sleeps: list[float] = []

    def monotonic(self):
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds


def failing(times, exc_factory, result="ok"):
    calls = []

    def op(timeout):
        calls.append(timeout)
        if len(calls) <= times:
            raise exc_factory()
        return result
    return op, calls


def test_backoff_is_full_jitter_capped_at_max_delay():
    p = RetryPolicy(base_delay=0.5, max_delay=4.0)
    # attempt n: ceiling min(4, 0.5 * 2^(n-1)); rand 1.0 gives the ceiling, rand 0 gives 0.
    assert [p.backoff(n, rand=lambda: 1.0) for n in range(1, 7)] == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    assert p.backoff(3, rand=lambda: 0.0) == 0.0
    assert p.backoff(1, retry_after=3.0, rand=lambda: 0.5) == 3.0


def test_a_transient_failure_is_retried_until_success():
    t = FakeTime()
    op, calls = failing(2, lambda: RemoteUnavailable("503"))
    assert call_with_retry(op, RetryPolicy(max_attempts=5), "x", monotonic=t.monotonic, sleep=t.sleep) == "ok"
    assert len(calls) == 3 and len(t.sleeps) == 2


def test_retries_stop_at_the_attempt_limit():
    t = FakeTime()
    op, calls = failing(99, lambda: RemoteUnavailable("429", maybe_sent=False))
    with pytest.raises(RemoteUnavailable, match="gave up after 3 attempt"):
        call_with_retry(op, RetryPolicy(max_attempts=3, deadline=1000), "x", monotonic=t.monotonic, sleep=t.sleep)
    assert len(calls) == 3


def test_retries_stop_before_a_wait_would_pass_the_deadline():
    t = FakeTime()
    op, calls = failing(99, lambda: RemoteUnavailable("503"))
    policy = RetryPolicy(max_attempts=20, base_delay=4, max_delay=4, deadline=10)
    with pytest.raises(RemoteUnavailable, match="deadline of 10s"):
        call_with_retry(op, policy, "x", monotonic=t.monotonic, sleep=t.sleep)
    assert t.now < 10
    assert sum(t.sleeps) < 10


def test_each_attempt_gets_at_most_what_is_left_of_the_deadline_as_its_timeout():
    t = FakeTime()
    op, calls = failing(2, lambda: RemoteUnavailable("503", retry_after=4))
    call_with_retry(op, RetryPolicy(max_attempts=5, deadline=10, timeout=5), "x", monotonic=t.monotonic,
                    sleep=t.sleep)
    assert calls == [5, 5, 2]  # 10s deadline, 4s + 4s waited: 2s left for the third attempt


def test_errors_that_are_not_transient_are_not_retried():
    op, calls = failing(1, lambda: UsageError("401"))
    with pytest.raises(UsageError):
        call_with_retry(op, RetryPolicy(), "x", sleep=lambda s: None)
    assert len(calls) == 1
