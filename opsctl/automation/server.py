"""The ASGI app of `opsctl serve` (starlette), in front of AutomationService.

    POST /v1/alertmanager   Alertmanager webhook (payload version 4); bearer token or basic auth
    POST /v1/pagerduty      PagerDuty webhooks v3; X-PagerDuty-Signature, deduplicated on the signed
                            event id (not X-Webhook-Id, which a replay can change); stale events refused
    GET  /healthz           the process answers (liveness)
    GET  /readyz            ready to take deliveries: started, state reachable, queue not full
    GET  /metrics           Prometheus text format

Bad input changes nothing, and is refused in this order, cheapest first: 401 no credentials,
403 wrong credentials, 415 not application/json, 413 body past the limit (counted while reading,
never trusting Content-Length alone), 400 not JSON or not the expected payload. PagerDuty's
signature covers the body, so that endpoint reads the body (capped) before verifying it, but only
when a signature header is there at all.

Abuse bounds: a connection whose request headers have not arrived within `read_timeout` is closed
(slow-header connections cannot pile up), a body must arrive within `read_timeout` too, and at
most MAX_BODY_READS bodies are read at once (others wait their turn, up to `read_timeout`, then 503:
senders retry), so memory stays about
MAX_BODY_READS x body_limit whatever the number of connections. Log messages have control
characters escaped, so a CR/LF in a payload cannot forge a log line.

Accepted deliveries are answered 202 once recorded and queued; the actions run afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import time
from typing import TYPE_CHECKING

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from opsctl.automation.auth import PagerDutySignatures, TokenAuth, Verdict
from opsctl.automation.payloads import AlertmanagerMessage, PagerDutyEvent, PayloadError

if TYPE_CHECKING:
    from opsctl.automation.service import AutomationService

log = logging.getLogger("opsctl.automation")

MAX_JSON_DEPTH = 32
MAX_BODY_READS = 32  # bodies read at once: memory is bounded by this x body_limit
CHALLENGE = 'Bearer realm="opsctl", Basic realm="opsctl"'


class Refused(Exception):
    def __init__(self, status: int, result: str, message: str, headers: dict | None = None):
        self.status, self.result, self.message, self.headers = status, result, message, headers or {}


async def read_body(request: Request, limit: int, timeout: float, reads: asyncio.Semaphore) -> bytes:
    """The capped body, read within `timeout`, by at most MAX_BODY_READS requests at once (the others
    wait for a turn, up to `timeout`, holding nothing but their connection). asyncio.timeout() rather
    than wait_for(): no extra task per request, which under a burst of deliveries costs milliseconds."""
    try:
        async with asyncio.timeout(timeout):
            await reads.acquire()
    except TimeoutError:
        raise Refused(503, "busy", "too many requests being read: retry later", {"Retry-After": "1"}) from None
    try:
        async with asyncio.timeout(timeout):
            return await read_capped(request, limit)
    except TimeoutError:
        raise Refused(408, "timeout", f"the body did not arrive within {timeout:g}s") from None
    finally:
        reads.release()


async def read_capped(request: Request, limit: int) -> bytes:
    """The body, or Refused(413) as soon as it passes `limit` bytes, whatever Content-Length claimed."""
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise Refused(400, "bad_request", "Content-Length is not a number")
        if int(declared) > limit:
            raise Refused(413, "too_large", f"body larger than the limit of {limit} bytes")
    size, chunks = 0, []
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise Refused(413, "too_large", f"body larger than the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def require_json(request: Request) -> None:
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media != "application/json":
        raise Refused(415, "unsupported_media_type", "Content-Type must be application/json")


def parse_json(body: bytes):
    try:
        data = json.loads(body.decode("utf-8"))
    except UnicodeDecodeError:
        raise Refused(400, "bad_request", "body is not UTF-8") from None
    except RecursionError:
        raise Refused(400, "bad_request", "JSON nested too deeply") from None
    except json.JSONDecodeError as exc:
        raise Refused(400, "bad_request", f"malformed JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    if _depth(data) > MAX_JSON_DEPTH:
        raise Refused(400, "bad_request", "JSON nested too deeply")
    return data


def _depth(value, level: int = 0) -> int:
    if level > MAX_JSON_DEPTH:
        return level
    if isinstance(value, dict):
        return max((_depth(v, level + 1) for v in value.values()), default=level + 1)
    if isinstance(value, list):
        return max((_depth(v, level + 1) for v in value), default=level + 1)
    return level


def build_app(service: "AutomationService", token: TokenAuth, pagerduty: PagerDutySignatures | None,
              body_limit: int, read_timeout: float = 10.0, max_event_age: float = 3600.0) -> Starlette:
    metrics = service.metrics
    reads = asyncio.Semaphore(MAX_BODY_READS)

    def refused(source: str, exc: Refused) -> Response:
        metrics.delivery(source, exc.result)
        return JSONResponse({"error": exc.message}, status_code=exc.status, headers=exc.headers)

    async def alertmanager(request: Request) -> Response:
        received = time.time()
        try:
            verdict = token.check(request.headers.get("authorization"))
            if verdict is Verdict.MISSING:
                raise Refused(401, "unauthorized", "credentials required (bearer token or basic auth)",
                              {"WWW-Authenticate": CHALLENGE})
            if verdict is Verdict.INVALID:
                raise Refused(403, "forbidden", "credentials not accepted")
            require_json(request)
            body = await read_body(request, body_limit, read_timeout, reads)
            data = parse_json(body)
            try:
                message = AlertmanagerMessage.parse(data)
            except PayloadError as exc:
                raise Refused(400, "bad_request", str(exc)) from None
        except Refused as exc:
            return refused("alertmanager", exc)
        # Recording and queueing take a fraction of a millisecond: done on the event loop, without a
        # thread hop (the delivery log bounds how long it waits for another replica's write lock).
        answer = service.accept_alertmanager(message, received)
        return JSONResponse(answer.body, status_code=answer.status)

    async def pagerduty_webhook(request: Request) -> Response:
        received = time.time()
        try:
            if pagerduty is None:
                raise Refused(404, "not_configured", "PagerDuty webhooks are not configured (automation.pagerduty_secrets)")
            signature = request.headers.get("x-pagerduty-signature")
            if not signature or not signature.strip():  # refused before a byte of the body is read
                raise Refused(401, "unauthorized", "X-PagerDuty-Signature required")
            require_json(request)
            body = await read_body(request, body_limit, read_timeout, reads)
            verdict = pagerduty.check(signature, body)
            if verdict is Verdict.MISSING:
                raise Refused(401, "unauthorized", "X-PagerDuty-Signature required")
            if verdict is Verdict.INVALID:
                raise Refused(403, "forbidden", "signature does not verify")
            webhook_id = (request.headers.get("x-webhook-id") or "").strip()
            if not webhook_id or len(webhook_id) > 256:
                raise Refused(400, "bad_request", "X-Webhook-Id header required")
            try:
                event = PagerDutyEvent.parse(parse_json(body))
            except PayloadError as exc:
                raise Refused(400, "bad_request", str(exc)) from None
            age = received - event.occurred_at.seconds
            if age > max_event_age or age < -300:  # a replay of an old signed body, or a clock gone wrong
                raise Refused(400, "stale", f"event {event.id} occurred {age:.0f}s ago, outside the"
                                            f" {max_event_age:.0f}s this endpoint accepts")
        except Refused as exc:
            return refused("pagerduty", exc)
        answer = service.accept_pagerduty(event, webhook_id, received)
        return JSONResponse(answer.body, status_code=answer.status)

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def readyz(request: Request) -> Response:
        ok, why = await run_in_threadpool(service.ready)
        return JSONResponse({"status": "ready" if ok else "not ready", "reason": why}, status_code=200 if ok else 503)

    async def metrics_endpoint(request: Request) -> Response:
        body, content_type = metrics.render()
        return Response(body, media_type=content_type)

    @contextlib.asynccontextmanager
    async def lifespan(app):
        service.start()
        log.info("opsctl serve: ready, %d policies", len(service.engine.policies))
        try:
            yield
        finally:
            service.stop()

    routes = [
        Route("/v1/alertmanager", alertmanager, methods=["POST"]),
        Route("/v1/pagerduty", pagerduty_webhook, methods=["POST"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/metrics", metrics_endpoint, methods=["GET"]),
    ]
    return Starlette(routes=routes, lifespan=lifespan)


# ---------------------------------------------------------------------------------------------
# Running it

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def escape_control(text: str) -> str:
    """CR, LF and every other control character as a visible escape: one log record, one line."""
    return _CONTROL.sub(lambda m: {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(m.group(), f"\\x{ord(m.group()):02x}"
                        if ord(m.group()) < 0x100 else f"\\u{ord(m.group()):04x}"), text)


class OneLineFormatter(logging.Formatter):
    """Escapes control characters in the message (payload text reaches log messages)."""

    def format(self, record: logging.LogRecord) -> str:
        record = logging.makeLogRecord(record.__dict__)
        record.msg, record.args = escape_control(record.getMessage()), None
        return super().format(record)


def timed_protocol(read_timeout: float):
    """uvicorn's h11 protocol, closing a connection whose request headers take longer than
    `read_timeout` to arrive (uvicorn itself has no header timeout: slowloris)."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class TimedH11Protocol(H11Protocol):
        _deadline = None
        _awaiting = None

        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            self._arm()

        def _arm(self) -> None:
            if self.cycle is not None and not self.cycle.response_complete:
                return  # a pipelined request already arrived whole
            self._awaiting = self.cycle  # headers have arrived when a new cycle replaces this one
            self._deadline = self.loop.call_later(read_timeout, self._too_slow)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def handle_events(self) -> None:
            super().handle_events()
            if self._deadline is not None and self.cycle is not self._awaiting:
                self._disarm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._disarm()
                self._arm()

        def _too_slow(self) -> None:
            self._deadline = None
            if not self.transport.is_closing():
                self.transport.close()

        def connection_lost(self, exc) -> None:
            self._disarm()
            super().connection_lost(exc)

    return TimedH11Protocol



def resolve_token(cfg, token_file: str | None) -> str:
    """--token-file, else automation.token, else $OPSCTL_WEBHOOK_TOKEN; none is an error (fail closed)."""
    import os
    from pathlib import Path

    from opsctl.errors import UsageError

    if token_file:
        try:
            token = Path(token_file).read_text().strip()
        except OSError as exc:
            raise UsageError(f"--token-file: cannot read {token_file}: {exc.strerror}") from exc
        where = f"--token-file {token_file}"
    elif cfg.automation.token is not None:
        token = cfg.automation.token.resolve()
        where = f"automation.token ({cfg.automation.token.describe()})"
    else:
        token = os.environ.get("OPSCTL_WEBHOOK_TOKEN", "").strip()
        where = "$OPSCTL_WEBHOOK_TOKEN"
        if not token:
            raise UsageError(
                "no webhook token: opsctl serve refuses unauthenticated webhooks",
                hint="give --token-file FILE, set automation.token in the config, or export OPSCTL_WEBHOOK_TOKEN",
            )
    if len(token) < 16:
        raise UsageError(f"the webhook token from {where} is shorter than 16 characters")
    return token


def serve(cfg, *, bind: str | None, token_file: str | None, dry_run: bool, log_level: str = "info") -> None:
    """Build the service and run it under uvicorn until SIGINT/SIGTERM."""
    import dataclasses

    import uvicorn

    from opsctl.automation.actions import DryRunExecutor
    from opsctl.automation.service import AutomationService
    from opsctl.config import _check_bind
    from opsctl.errors import UsageError

    settings = cfg.automation
    try:
        host, port = _check_bind(bind or settings.bind)
    except ValueError as exc:
        raise UsageError(f"--bind: {exc}") from None
    if dry_run and not settings.dry_run:
        cfg = dataclasses.replace(cfg, automation=dataclasses.replace(settings, dry_run=True))
        settings = cfg.automation
    token = TokenAuth.of(resolve_token(cfg, token_file), settings.basic_auth_username)
    secrets = [ref.resolve() for ref in settings.pagerduty_secrets]
    pagerduty = PagerDutySignatures.of(secrets) if secrets else None
    if settings.dry_run:
        live = DryRunExecutor()
    else:
        from opsctl.automation.executors import open_executor

        live = open_executor(cfg)
    logging.basicConfig(level=getattr(logging, log_level.upper()))
    for handler in logging.getLogger().handlers:
        handler.setFormatter(OneLineFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    service = AutomationService(cfg, live)
    read_timeout = float(settings.read_timeout_seconds)
    app = build_app(service, token, pagerduty, settings.body_limit, read_timeout, settings.pagerduty_max_age_seconds)
    # Connections are cheap (slow ones are cut at read_timeout, bodies are read MAX_BODY_READS at a
    # time): a high bound keeps /healthz answering while many clients are connected.
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False, lifespan="on",
                            timeout_keep_alive=5, limit_concurrency=settings.max_connections, server_header=False,
                            http=timed_protocol(read_timeout), h11_max_incomplete_event_size=16384)
    log.info("opsctl serve: listening on http://%s:%d (%s)", host, port,
             "dry run: nothing is changed" if settings.dry_run else f"executor {live.name}")
    # uvicorn shuts down gracefully on SIGTERM (the service stops acting and releases the Lease), then
    # raises the signal again under the handler that was there before: make that a clean exit 0.
    import signal

    def exit_cleanly(signum, frame):
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, exit_cleanly)
    uvicorn.Server(config).run()
