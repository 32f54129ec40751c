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
    "vendor-throttling": ("vendor provisioned throughput (answers 503/429 with Retry-After)", ("throttled",)),
    "vendor-timeout": ("vendor Model Serving endpoint (no answer before the client timeout)", ("timeout",)),
    "slow-token-endpoint": ("OAuth token endpoint (slow: token refreshes wait, some fail)",
                            ("auth_error", "timeout", "slower_than_1s")),
}


@dataclass(frozen=True)
class OAuthTokenFailure(Incident):
    """The vendor's OAuth token endpoint fails: once the cached token expires the proxy cannot
    refresh it, so `rate` of the vendor's requests are never sent; the proxy answers them 503 and
    records `auth_error`: the backend's auth layer failed it, not the caller and not inference, so
    the cause is `auth` and the ticket goes where auth throttling's goes (docs/decisions/0005-alert-identity-and-causes.md)."""

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


@dataclass(frozen=True)
class VendorThrottling(Incident):
    """The vendor's provisioned throughput is exhausted: `rate` of the vendor's requests are answered
    503 (or 429) with Retry-After. The proxy counts them `throttled` (a fast rejection), so the cause
    is `capacity` (slo.conventions CAUSE_OUTCOMES) and the ticket goes to
    runbooks.tickets.capacity_category (decisions/0301, 0310)."""

    kind: ClassVar[str] = "vendor-throttling"
    summary: ClassVar[str] = "provisioned throughput exhausted: `rate` of requests get 503/429 with Retry-After"
    backend_kinds: ClassVar[tuple[str, ...]] = ("vendor",)
    rate: float = 0.3

    def apply(self, params, window):
        import numpy as np

        params.throttled[window] = np.maximum(params.throttled[window], self.rate)

    def options(self):
        return {"rate": self.rate}


@dataclass(frozen=True)
class VendorTimeout(Incident):
    """The vendor stops answering a share of requests: `rate` of them wait the client timeout
    (sim_draw.TIMEOUT_SECONDS) and fail `timeout`: bad for availability and, landing only in the
    +Inf bucket, for every latency SLO."""

    kind: ClassVar[str] = "vendor-timeout"
    summary: ClassVar[str] = "`rate` of requests get no answer before the client timeout"
    backend_kinds: ClassVar[tuple[str, ...]] = ("vendor",)
    rate: float = 0.1

    def apply(self, params, window):
        import numpy as np

        params.timeout[window] = np.maximum(params.timeout[window], self.rate)

    def options(self):
        return {"rate": self.rate}


@dataclass(frozen=True)
class SlowTokenEndpoint(Incident):
    """The vendor's OAuth token endpoint answers slowly: `share` of the answered requests wait for a
    token refresh (`factor` times as long: a latency tail), `auth_rate` of all requests find no
    valid token in time (401, `auth_error`) and `timeout_rate` wait out the client timeout. With
    more 401s than timeouts the availability cause is `auth` (the platform's ticket)."""

    kind: ClassVar[str] = "slow-token-endpoint"
    summary: ClassVar[str] = ("a slow token endpoint: `share` of answers `factor` times slower, `auth_rate` 401s,"
                              " `timeout_rate` timeouts")
    backend_kinds: ClassVar[tuple[str, ...]] = ("vendor",)
    share: float = 0.2
    factor: float = 8.0
    auth_rate: float = 0.1
    timeout_rate: float = 0.03

    def apply(self, params, window):
        import numpy as np

        params.tail_share[window] = np.maximum(params.tail_share[window], self.share)
        params.tail_shift[window] = math.log(self.factor)
        params.auth_error[window] = np.maximum(params.auth_error[window], self.auth_rate)
        params.timeout[window] = np.maximum(params.timeout[window], self.timeout_rate)

    def options(self):
        return {"share": self.share, "factor": self.factor, "auth_rate": self.auth_rate,
                "timeout_rate": self.timeout_rate}


KINDS: dict[str, type[Incident]] = {**INCIDENT_KINDS, **{cls.kind: cls for cls in (
    OAuthTokenFailure, LatencyTail, VendorThrottling, VendorTimeout, SlowTokenEndpoint)}}


def incident(kind: str, backend: str, params: dict, start: float, end: float = math.inf,
             waves: tuple[float, float] = (0.0, 0.0)) -> Incident:
    """The simulator incident of a scenario fault: `waves` (on, off seconds) as the scenario gives them."""
    return KINDS[kind](backend=backend, start=start, end=end, waves_on=float(waves[0]), waves_off=float(waves[1]),
                       **params)


def broken_hop(kind: str) -> str:
    return BROKEN_HOP.get(kind, (kind, ()))[0]


def symptoms(kind: str) -> tuple[str, ...]:
    return BROKEN_HOP.get(kind, (kind, ()))[1]
