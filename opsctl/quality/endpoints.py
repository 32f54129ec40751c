"""Build the OpenAI-compatible clients for the configured endpoints (config -> live clients)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from opsctl.errors import UsageError

if TYPE_CHECKING:
    from opsctl.config import Config
    from opsctl.quality.openai_client import OpenAIClient


def choose_backends(cfg: "Config", requested: Sequence[str]) -> list[str]:
    """The requested backends (each must have an endpoint), or every backend that has one."""
    if not requested:
        if not cfg.endpoints:
            raise UsageError("no endpoints configured: add an `endpoints:` section (base_url, model, auth) "
                             "for the backends to probe")
        return list(cfg.endpoints)
    chosen = []
    for name in requested:
        cfg.backend(name)  # unknown backend: exit 2 naming the known ones
        if name not in cfg.endpoints:
            raise UsageError(f"backend {name!r} has no endpoint configured (endpoints.{name}: base_url, model, auth)")
        if name not in chosen:
            chosen.append(name)
    return chosen


def open_clients(cfg: "Config", backends: Sequence[str], *, clock=None) -> dict[str, "OpenAIClient"]:
    from opsctl.quality.auth import build_token_source
    from opsctl.quality.openai_client import OpenAIClient, RetryPolicy

    settings = cfg.quality.probe
    retry = RetryPolicy(settings.retries, settings.backoff_base, settings.backoff_cap)
    clients = {}
    for name in backends:
        endpoint = cfg.endpoints[name]
        tokens = build_token_source(endpoint.auth, backend=name, state_dir=cfg.state_path, clock=clock,
                                    timeout=min(settings.timeout, 30.0), verify_tls=endpoint.verify_tls)
        clients[name] = OpenAIClient(endpoint, tokens, max_concurrency=settings.concurrency,
                                     timeout=settings.timeout, retry=retry, clock=clock)
    return clients
