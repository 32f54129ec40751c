"""A small client for OpenAI-compatible completions and chat APIs (vLLM, Databricks Model Serving).

Bounded concurrency (a semaphore held only while a request is in flight, not while backing off),
a per-request timeout, and retries on 429, 5xx and transport errors with full-jitter exponential
backoff (Retry-After honoured, capped) under a deadline: no attempt starts, and no backoff sleeps,
past it. A 401 makes the token source forget the token and is retried once with a fresh one.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from opsctl.errors import OpsctlError

if TYPE_CHECKING:
    from opsctl.config import Endpoint
    from opsctl.quality.auth import TokenSource


@dataclass(frozen=True)
class Completion:
    text: str
    prompt_tokens: int | None
    completion_tokens: int | None
    latency: float  # seconds, the successful attempt only
    attempts: int


class RequestFailed(OpsctlError):
    """One prompt could not be answered (after retries, or not retryable)."""

    def __init__(self, message: str, *, status: int | None = None, attempts: int = 1):
        super().__init__(message)
        self.status = status
        self.attempts = attempts


@dataclass(frozen=True)
class RetryPolicy:
    retries: int = 3
    backoff_base: float = 0.5
    backoff_cap: float = 8.0

    def backoff(self, attempt: int, rng: random.Random, retry_after: float | None) -> float:
        """Seconds to wait before retry number `attempt` (1-based): full jitter, or Retry-After."""
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.backoff_cap)
        return rng.uniform(0, min(self.backoff_cap, self.backoff_base * 2 ** (attempt - 1)))


def _retryable(status: int) -> bool:
    return status == 429 or status >= 500


class OpenAIClient:
    def __init__(self, endpoint: "Endpoint", token_source: "TokenSource", *, max_concurrency: int = 4,
                 timeout: float = 30.0, retry: RetryPolicy | None = None, clock=None,
                 rng: random.Random | None = None, transport=None):
        import httpx

        from opsctl.clock import WallClock

        self.endpoint = endpoint
        self.token_source = token_source
        self.timeout = timeout
        self.retry = retry or RetryPolicy()
        self.clock = clock or WallClock()
        self.rng = rng or random.Random()
        self._slots = threading.BoundedSemaphore(max_concurrency)
        self._http = httpx.Client(
            timeout=timeout,
            verify=endpoint.verify_tls,
            transport=transport,
            limits=httpx.Limits(max_connections=max_concurrency, max_keepalive_connections=max_concurrency),
        )
        path = "/chat/completions" if endpoint.api == "chat" else "/completions"
        self.url = endpoint.base_url.rstrip("/") + path

    def close(self) -> None:
        self._http.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _payload(self, prompt: str) -> dict:
        body = {"model": self.endpoint.model, "max_tokens": self.endpoint.max_tokens, "temperature": 0, "n": 1}
        if self.endpoint.api == "chat":
            body["messages"] = [{"role": "user", "content": prompt}]
        else:
            body["prompt"] = prompt
        return body

    def complete(self, prompt: str, *, deadline: float | None = None) -> Completion:
        """Answer one prompt; raises RequestFailed when it cannot within the retries and deadline."""
        import httpx

        payload = self._payload(prompt)
        attempt, auth_retried = 0, False
        while True:
            attempt += 1
            remaining = None if deadline is None else deadline - self.clock.now()
            if remaining is not None and remaining <= 0:
                raise RequestFailed("probe deadline reached before an answer", attempts=attempt - 1)
            timeout = self.timeout if remaining is None else min(self.timeout, remaining)
            status, retry_after, error = None, None, None
            with self._slots:
                header = self.token_source.authorization()
                headers = {"Content-Type": "application/json"}
                if header:
                    headers["Authorization"] = header
                started = time.perf_counter()
                try:
                    response = self._http.post(self.url, json=payload, headers=headers, timeout=timeout)
                    elapsed = time.perf_counter() - started
                except httpx.TimeoutException:
                    error = f"no answer within {timeout:g}s"
                except httpx.TransportError as exc:
                    error = f"transport error: {type(exc).__name__}"
            if error is None:
                status = response.status_code
                if 200 <= status < 300:
                    return self._parse(response, elapsed, attempt)
                if status == 401 and header and not auth_retried:
                    auth_retried = True
                    self.token_source.invalidate(header)
                    attempt -= 1  # a refreshed credential is not a retry of the same failure
                    continue
                error = f"HTTP {status}{_detail(response)}"
                if not _retryable(status):
                    raise RequestFailed(error, status=status, attempts=attempt)
                retry_after = _retry_after(response)
            if attempt > self.retry.retries:
                raise RequestFailed(f"{error} after {attempt} attempt(s)", status=status, attempts=attempt)
            pause = self.retry.backoff(attempt, self.rng, retry_after)
            if deadline is not None and self.clock.now() + pause >= deadline:
                raise RequestFailed(f"{error}; probe deadline reached before retry {attempt}",
                                    status=status, attempts=attempt)
            self.clock.sleep(pause)

    def _parse(self, response, elapsed: float, attempts: int) -> Completion:
        try:
            body = response.json()
            choice = body["choices"][0]
            text = choice["message"]["content"] if self.endpoint.api == "chat" else choice["text"]
            if not isinstance(text, str):
                raise TypeError("text is not a string")
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise RequestFailed(f"malformed {self.endpoint.api} answer: {exc}", status=response.status_code,
                                attempts=attempts) from exc
        usage = body.get("usage") if isinstance(body.get("usage"), dict) else {}
        return Completion(text, _int(usage.get("prompt_tokens")), _int(usage.get("completion_tokens")),
                          elapsed, attempts)


def _int(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _retry_after(response) -> float | None:
    value = response.headers.get("Retry-After")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None  # an HTTP date: fall back to jittered backoff


def _detail(response) -> str:
    """A short, single-line hint from an error body (the API's own message)."""
    try:
        body = response.json()
    except ValueError:
        return ""
    message = None
    if isinstance(body, dict):
        err = body.get("error")
        message = err.get("message") if isinstance(err, dict) else (err if isinstance(err, str) else None)
        message = message or body.get("message")
    if not isinstance(message, str) or not message:
        return ""
    return ": " + " ".join(message.split())[:160]
