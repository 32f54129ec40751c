"""The faults a chain drill switches in its exporter, and the hop of the request path each breaks.

The proxy's request path: the caller -> the LLM proxy -> (vendor) the OAuth token endpoint, the
vendor's auth layer, its Model Serving endpoint | (internal) the vLLM pods. Each fault kind breaks
one of those hops; the report attributes what the exporter saw (outcome counts) to it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from opsctl.metrics.simulator import INCIDENT_KINDS, Incident

# fault kind -> (the hop it breaks, the outcomes the proxy records when it breaks)
BROKEN_HOP: dict[str, tuple[str, tuple[str, ...]]] = {
    "vendor-5xx": ("vendor Model Serving endpoint (answers 5xx)", ("server_error",)),
    "latency-spike": ("backend latency (answers slowly)", ("slower_than_500ms",)),
    "latency-tail": ("backend latency tail (a share of answers slow)", ("slower_than_1s",)),
    "auth-throttling": ("vendor auth layer (answers 429)", ("throttled",)),
    "oauth-token-failure": ("OAuth token endpoint (no token refresh)", ("auth_error",)),
    "gpu-capacity-loss": ("internal GPU pods (capacity lost)", ("timeout", "server_error")),
}


@dataclass(frozen=True)
class OAuthTokenFailure(Incident):
    """The vendor's OAuth token endpoint fails: once the cached token expires the proxy cannot
    refresh it, so `rate` of the vendor's requests are never sent; the proxy answers them 503 and
    records `auth_error`: the backend's auth layer failed it, not the caller and not inference, so
    the cause is `auth` and the ticket goes where auth throttling's goes (docs/design.md, causes)."""

    kind: ClassVar[str] = "oauth-token-failure"
    summary: ClassVar[str] = "the OAuth token endpoint fails: `rate` of requests cannot get a token"
    backend_kinds: ClassVar[tuple[str, ...]] = ("vendor",)
    rate: float = 1.0

    def apply(self, params, window):
        import numpy as np

        params.auth_error[window] = np.maximum(params.auth_error[window], self.rate)

    def options(self):
        return {"rate": self.rate}


@dataclass(frozen=True)
class LatencyTail(Incident):
    """A latency tail, not a uniform slowdown (the vendor's autoscaler lagging behind a burst):
    `share` of the answered requests take `factor` times as long, the rest are as fast as ever, so
    the median hardly moves while p99 does. A mixture of two lognormals in the simulator's draw."""

    kind: ClassVar[str] = "latency-tail"
    summary: ClassVar[str] = "a latency tail: `share` of answered requests take `factor` times as long"
    share: float = 0.05
    factor: float = 6.0

    def apply(self, params, window):
        import numpy as np

        params.tail_share[window] = np.maximum(params.tail_share[window], self.share)
        params.tail_shift[window] = math.log(self.factor)

    def options(self):
        return {"share": self.share, "factor": self.factor}


KINDS: dict[str, type[Incident]] = {**INCIDENT_KINDS, OAuthTokenFailure.kind: OAuthTokenFailure,
                                    LatencyTail.kind: LatencyTail}


def incident(kind: str, backend: str, params: dict, start: float, end: float = math.inf) -> Incident:
    return KINDS[kind](backend=backend, start=start, end=end, **params)


def broken_hop(kind: str) -> str:
    return BROKEN_HOP.get(kind, (kind, ()))[0]


def symptoms(kind: str) -> tuple[str, ...]:
    return BROKEN_HOP.get(kind, (kind, ()))[1]
