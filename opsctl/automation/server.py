"""The ASGI app of `opsctl serve` (starlette), in front of AutomationService.

    POST /v1/alertmanager   Alertmanager webhook (payload version 4); bearer token or basic auth
    POST /v1/pagerduty      PagerDuty webhooks v3; X-PagerDuty-Signature, deduplicated on the signed
                            event id (not X-Webhook-Id, which a replay can change); stale events refused
    GET  /healthz           the process answers (liveness): never waits on the API server
    GET  /readyz            ready to take deliveries: started, state reachable, queue not full, as last
                            checked by a background thread (every READY_EVERY s): never waits either
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

A notification whose alerts no policy matches is answered 202 on the event loop: it is written
nowhere, so it costs no I/O (docs/decisions/0216-deliveries-not-persisted.md). One with an alert a
policy matches, and every PagerDuty event, is answered once its incident is written (one
compare-and-swap on the state store, the API server in kubernetes mode), on a thread of the
recording pool (RECORDERS threads), never on the event loop: a slow API server delays those
answers, not /healthz, /readyz or /metrics. At most MAX_RECORDING deliveries are being or waiting
to be written; past that a delivery is 503 at once (senders retry) instead of piling up. The
actions run afterwards, on the service's workers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, AsyncIterator, Callable

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from opsctl.automation.auth import PagerDutySignatures, TokenAuth, Verdict
from opsctl.automation.payloads import AlertmanagerMessage, PagerDutyEvent, PayloadError
from opsctl.automation.readiness import Readiness
from opsctl.automation.request_body import MAX_BODY_READS, Rejected, parse_json, read_body, require_json

if TYPE_CHECKING:
    from opsctl.automation.service import AutomationService
    from opsctl.config import Config

log = logging.getLogger("opsctl.automation")

CHALLENGE = 'Bearer realm="opsctl", Basic realm="opsctl"'
RECORDERS = 4  # threads writing the incidents of deliveries a policy acts on (off the event loop)
MAX_RECORDING = 64  # deliveries being or waiting to be written; more are 503 at once


def build_app(service: "AutomationService", token: TokenAuth, pagerduty: PagerDutySignatures | None,
              body_limit: int, read_timeout: float = 10.0, max_event_age: float = 3600.0) -> Starlette:
    metrics = service.metrics
    reads = asyncio.Semaphore(MAX_BODY_READS)
    pool = ThreadPoolExecutor(RECORDERS, thread_name_prefix="opsctl-record")
    recording = [0]  # touched on the event loop only
    readiness = Readiness(service.ready)
    metrics.watch("opsctl_serve_recording", "Deliveries being recorded or waiting to be (off the event loop).",
                  lambda: recording[0])
    metrics.watch("opsctl_serve_ready", "1 when the last background readiness check passed (shared state"
                  " reachable, queue not full).", lambda: readiness.reachable)

    async def record(accept: Callable[..., Any], *args: Any) -> Any:
        """Run `accept` (which writes the incident, maybe on the API server) on a recording thread:
        the event loop goes on serving probes and other requests meanwhile."""
        if recording[0] >= MAX_RECORDING:
            raise Rejected(503, "busy", "too many deliveries waiting to be written: retry later", {"Retry-After": "1"})
        recording[0] += 1
        try:
            return await asyncio.get_running_loop().run_in_executor(pool, accept, *args)
        finally:
            recording[0] -= 1

    def refused(source: str, exc: Rejected) -> Response:
        metrics.delivery(source, exc.result)
        return JSONResponse({"error": exc.message}, status_code=exc.status, headers=exc.headers)

    async def alertmanager(request: Request) -> Response:
        received = time.time()
        try:
            verdict = token.check(request.headers.get("authorization"))
            if verdict is Verdict.MISSING:
                raise Rejected(401, "unauthorized", "credentials required (bearer token or basic auth)",
                              {"WWW-Authenticate": CHALLENGE})
            if verdict is Verdict.INVALID:
                raise Rejected(403, "forbidden", "credentials not accepted")
            require_json(request)
            body = await read_body(request, body_limit, read_timeout, reads)
            data = parse_json(body)
            try:
                message = AlertmanagerMessage.parse(data)
            except PayloadError as exc:
                raise Rejected(400, "bad_request", str(exc)) from None
            if service.urgent(message):  # a policy matches: answered once its incident is written
                answer = await record(service.accept_alertmanager, message, received)
            else:  # no policy matches: no I/O, answered here
                answer = service.accept_alertmanager(message, received)
        except Rejected as exc:
            return refused("alertmanager", exc)
        return JSONResponse(answer.body, status_code=answer.status, headers=answer.headers or None)

    async def pagerduty_webhook(request: Request) -> Response:
        received = time.time()
        try:
            if pagerduty is None:
                raise Rejected(404, "not_configured", "PagerDuty webhooks are not configured (automation.pagerduty_secrets)")
            signature = request.headers.get("x-pagerduty-signature")
            if not signature or not signature.strip():  # refused before a byte of the body is read
                raise Rejected(401, "unauthorized", "X-PagerDuty-Signature required")
            require_json(request)
            body = await read_body(request, body_limit, read_timeout, reads)
            verdict = pagerduty.check(signature, body)
            if verdict is Verdict.MISSING:
                raise Rejected(401, "unauthorized", "X-PagerDuty-Signature required")
            if verdict is Verdict.INVALID:
                raise Rejected(403, "forbidden", "signature does not verify")
            webhook_id = (request.headers.get("x-webhook-id") or "").strip()
            if not webhook_id or len(webhook_id) > 256:
                raise Rejected(400, "bad_request", "X-Webhook-Id header required")
            try:
                event = PagerDutyEvent.parse(parse_json(body))
            except PayloadError as exc:
                raise Rejected(400, "bad_request", str(exc)) from None
            age = received - event.occurred_at.seconds
            if age > max_event_age or age < -300:  # a replay of an old signed body, or a clock gone wrong
                raise Rejected(400, "stale", f"event {event.id} occurred {age:.0f}s ago, outside the"
                                            f" {max_event_age:.0f}s this endpoint accepts")
            answer = await record(service.accept_pagerduty, event, webhook_id, received)
        except Rejected as exc:
            return refused("pagerduty", exc)
        return JSONResponse(answer.body, status_code=answer.status, headers=answer.headers or None)

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def readyz(request: Request) -> Response:
        ok, why, age = readiness.current()
        body = {"status": "ready" if ok else "not ready", "reason": why,
                "checked_seconds_ago": None if age is None else round(age, 3)}
        return JSONResponse(body, status_code=200 if ok else 503)

    async def metrics_endpoint(request: Request) -> Response:
        body, content_type = metrics.render()
        return Response(body, media_type=content_type)

    def start_service() -> None:
        try:
            service.start()  # reads the shared state: on a thread, so the server answers /healthz meanwhile
            log.info("opsctl serve: started, %d policies", len(service.engine.policies))
        except Exception:
            log.exception("opsctl serve: start-up failed")
        readiness.refresh_soon()

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        starter = threading.Thread(target=start_service, name="opsctl-start", daemon=True)
        starter.start()
        readiness.start()
        try:
            yield
        finally:
            readiness.stop()
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(None, starter.join, 60.0)
            await loop.run_in_executor(None, service.stop)
            pool.shutdown(wait=False, cancel_futures=True)

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


def timed_protocol(read_timeout: float) -> type:
    """uvicorn's h11 protocol, closing a connection whose request headers take longer than
    `read_timeout` to arrive (uvicorn itself has no header timeout: slowloris)."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class TimedH11Protocol(H11Protocol):
        _deadline = None
        _awaiting = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]  # as uvicorn's own
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

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

    return TimedH11Protocol



def resolve_token(cfg: Config, token_file: str | None) -> str:
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


def serve(cfg: Config, *, bind: str | None, token_file: str | None, dry_run: bool, log_level: str = "info") -> None:
    """Build the service and run it under uvicorn until SIGINT/SIGTERM."""
    import dataclasses

    import uvicorn

    from opsctl.automation.actions import DryRunExecutor, Executor
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
    live: Executor
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

    def exit_cleanly(signum: int, frame: object) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, exit_cleanly)
    uvicorn.Server(config).run()
