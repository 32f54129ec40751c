"""A webhook request's body in `opsctl serve`: read capped and in time, checked as JSON, or `Rejected`
with the status it is answered with."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from starlette.requests import Request

MAX_JSON_DEPTH = 32
MAX_BODY_READS = 32  # bodies read at once: memory is bounded by this x body_limit


class Rejected(Exception):
    """A request `opsctl serve` answers with an error status (`status`, the `result` label its
    delivery metric counts, the message, extra headers). It ends one request, never the process:
    not an OpsctlError and no exit code (a guard refusing a change is errors.GuardRefused, a drill
    that does not start drills.lifecycle.Refused)."""

    def __init__(self, status: int, result: str, message: str, headers: dict[str, str] | None = None):
        self.status, self.result, self.message, self.headers = status, result, message, headers or {}


async def read_body(request: Request, limit: int, timeout: float, reads: asyncio.Semaphore) -> bytes:
    """The capped body, read within `timeout`, by at most MAX_BODY_READS requests at once (the others
    wait for a turn, up to `timeout`, holding nothing but their connection). asyncio.timeout() rather
    than wait_for(): no extra task per request, which under a burst of deliveries costs milliseconds."""
    try:
        async with asyncio.timeout(timeout):
            await reads.acquire()
    except TimeoutError:
        raise Rejected(503, "busy", "too many requests being read: retry later", {"Retry-After": "1"}) from None
    try:
        async with asyncio.timeout(timeout):
            return await read_capped(request, limit)
    except TimeoutError:
        raise Rejected(408, "timeout", f"the body did not arrive within {timeout:g}s") from None
    finally:
        reads.release()


async def read_capped(request: Request, limit: int) -> bytes:
    """The body, or Rejected(413) as soon as it passes `limit` bytes, whatever Content-Length claimed."""
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise Rejected(400, "bad_request", "Content-Length is not a number")
        if int(declared) > limit:
            raise Rejected(413, "too_large", f"body larger than the limit of {limit} bytes")
    size, chunks = 0, []
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise Rejected(413, "too_large", f"body larger than the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def require_json(request: Request) -> None:
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media != "application/json":
        raise Rejected(415, "unsupported_media_type", "Content-Type must be application/json")


def parse_json(body: bytes) -> Any:  # a JSON document: the payload models check its shape
    try:
        data = json.loads(body.decode("utf-8"))
    except UnicodeDecodeError:
        raise Rejected(400, "bad_request", "body is not UTF-8") from None
    except RecursionError:
        raise Rejected(400, "bad_request", "JSON nested too deeply") from None
    except json.JSONDecodeError as exc:
        raise Rejected(400, "bad_request", f"malformed JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    if _depth(data) > MAX_JSON_DEPTH:
        raise Rejected(400, "bad_request", "JSON nested too deeply")
    return data


def _depth(value: object, level: int = 0) -> int:
    if level > MAX_JSON_DEPTH:
        return level
    if isinstance(value, dict):
        return max((_depth(v, level + 1) for v in value.values()), default=level + 1)
    if isinstance(value, list):
        return max((_depth(v, level + 1) for v in value), default=level + 1)
    return level
