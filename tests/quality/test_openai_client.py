"""The OpenAI-compatible client against a loopback model server: request shape, retries on 429
and 5xx with backoff under a deadline, no retry on other 4xx, timeouts, bounded concurrency."""

from __future__ import annotations

import random
import threading
import time

import pytest

from opsctl.clock import SimClock
from opsctl.config import Endpoint
from opsctl.quality.auth import NoAuth
from opsctl.quality.openai_client import OpenAIClient, RequestFailed, RetryPolicy
from tests.fakes.loopback import Response
from tests.fakes.openai_fake import OpenAIFake

ANSWERS = {"The capital of France is": "Paris.", "Two plus two is": "four."}


def client_for(fake, *, api="completions", clock=None, retries=3, timeout=5.0, concurrency=4, base=0.5, cap=8.0):
    endpoint = Endpoint(base_url=fake.base_url, model="llm-inference-ft", api=api)
    return OpenAIClient(endpoint, NoAuth(), max_concurrency=concurrency, timeout=timeout,
                        retry=RetryPolicy(retries, base, cap), clock=clock or SimClock(1000.0),
                        rng=random.Random(7))


def test_completions_request_carries_model_prompt_and_greedy_decoding():
    with OpenAIFake(ANSWERS) as fake, client_for(fake) as client:
        got = client.complete("The capital of France is")
    assert got.text == "Paris." and got.attempts == 1
    assert got.prompt_tokens == 1 + 5 and got.completion_tokens == 1
    body = fake.requests[0].json()
    assert fake.requests[0].path == "/v1/completions"
    assert body["model"] == "llm-inference-ft" and body["prompt"] == "The capital of France is"
    assert body["temperature"] == 0


def test_chat_api_sends_one_user_message_and_reads_message_content():
    with OpenAIFake(ANSWERS) as fake, client_for(fake, api="chat") as client:
        got = client.complete("Two plus two is")
    assert got.text == "four."
    assert fake.requests[0].path == "/v1/chat/completions"
    assert fake.requests[0].json()["messages"] == [{"role": "user", "content": "Two plus two is"}]


def test_429_then_success_is_retried_once():
    clock = SimClock(1000.0)
    script = [Response(429, {"error": {"message": "rate limited"}})]
    with OpenAIFake(ANSWERS, script=script) as fake, client_for(fake, clock=clock) as client:
        got = client.complete("The capital of France is", deadline=1060.0)
    assert got.text == "Paris." and got.attempts == 2
    assert len(fake.requests) == 2
    # one jittered backoff, within [0, backoff_base * 2^0] = [0, 0.5] s of simulated time
    assert 1000.0 <= clock.now() <= 1000.5


def test_retry_after_is_honoured_up_to_the_cap():
    clock = SimClock(1000.0)
    script = [Response(503, {"error": {"message": "overloaded"}}, headers={"Retry-After": "3"})]
    with OpenAIFake(ANSWERS, script=script) as fake, client_for(fake, clock=clock) as client:
        got = client.complete("Two plus two is", deadline=1060.0)
    assert got.attempts == 2 and clock.now() == pytest.approx(1003.0)


def test_5xx_every_time_gives_up_after_the_configured_retries():
    script = [Response(502, {"error": {"message": "bad gateway"}}) for _ in range(5)]
    with OpenAIFake(ANSWERS, script=script) as fake, client_for(fake, retries=2) as client:
        with pytest.raises(RequestFailed) as info:
            client.complete("Two plus two is", deadline=2000.0)
    assert info.value.status == 502 and info.value.attempts == 3
    assert "HTTP 502: bad gateway after 3 attempt(s)" in info.value.message
    assert len(fake.requests) == 3


def test_other_4xx_is_not_retried():
    script = [Response(400, {"error": {"message": "max_tokens too large"}})]
    with OpenAIFake(ANSWERS, script=script) as fake, client_for(fake) as client:
        with pytest.raises(RequestFailed, match="HTTP 400: max_tokens too large"):
            client.complete("Two plus two is", deadline=2000.0)
    assert len(fake.requests) == 1


def test_no_backoff_sleeps_past_the_deadline():
    clock = SimClock(1000.0)
    script = [Response(429, {}, headers={"Retry-After": "5"}) for _ in range(5)]
    with OpenAIFake(ANSWERS, script=script) as fake, client_for(fake, clock=clock) as client:
        with pytest.raises(RequestFailed, match="deadline reached before retry 1"):
            client.complete("Two plus two is", deadline=1003.0)
    assert len(fake.requests) == 1 and clock.now() == 1000.0


def test_a_slow_answer_times_out():
    with OpenAIFake(ANSWERS, delay=1.0) as fake, client_for(fake, timeout=0.2, retries=0) as client:
        started = time.monotonic()
        with pytest.raises(RequestFailed, match="no answer within 0.2s"):
            client.complete("Two plus two is")
        assert time.monotonic() - started < 0.9


def test_concurrency_is_bounded_by_the_client():
    with OpenAIFake(ANSWERS, delay=0.15) as fake, client_for(fake, concurrency=3) as client:
        threads = [threading.Thread(target=client.complete, args=("Two plus two is",)) for _ in range(9)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=10)
    assert fake.served == 9
    assert fake.max_in_flight == 3
