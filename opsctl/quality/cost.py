"""Cost per million tokens per backend over a window, beside a frontier model's price.

Tokens (prompt = input, completion = output) come from the proxy's client-side counters. The
internal backend costs replicas x GPUs per replica x hours x the GPU hourly price (replicas fixed
or averaged by a PromQL expression over the window); a vendor costs its provisioned-throughput
hourly price x hours, or its per-million-token prices. Fixed (hourly) costs spread over fewer
tokens look expensive, so a backend that carried too small a share of the traffic gets a warning:
its figure says little about what it would cost at full load.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

from opsctl.metrics import schema

if TYPE_CHECKING:
    from opsctl.config import BackendCost, CostConfig

MILLION = 1_000_000


@dataclass
class CostLine:
    backend: str
    pricing: str  # gpu | provisioned | per_token
    input_tokens: float | None
    output_tokens: float | None
    share: float | None  # of all tokens through the proxy in the window
    cost: float | None
    per_million: float | None
    vs_frontier: float | None  # per_million / the frontier price
    basis: str  # how the cost was computed, in words
    warnings: list[str] = field(default_factory=list)

    @property
    def tokens(self) -> float | None:
        if self.input_tokens is None or self.output_tokens is None:
            return None
        return self.input_tokens + self.output_tokens


@dataclass
class CostReport:
    at: float
    window_seconds: int
    currency: str
    total_tokens: float | None
    lines: list[CostLine]
    frontier: dict | None
    warnings: list[str] = field(default_factory=list)

    @property
    def no_data(self) -> list[str]:
        return [line.backend for line in self.lines if line.tokens is None or line.cost is None]

    def to_dict(self) -> dict:
        from opsctl.clock import format_rfc3339

        return {
            "at": format_rfc3339(self.at),
            "window_seconds": self.window_seconds,
            "currency": self.currency,
            "total_tokens": self.total_tokens,
            "backends": [dict(asdict(line), tokens=line.tokens) for line in self.lines],
            "frontier": self.frontier,
            "warnings": self.warnings + [w for line in self.lines for w in line.warnings],
        }


def _tokens_query(metric: str, backend: str | None, window: int, scope: str = "") -> str:
    body = ",".join(m for m in (scope, f'backend="{backend}"' if backend else "") if m)
    selector = f"{metric}{{{body}}}" if body else metric
    return f"sum(increase({selector}[{window}s]))"


def replicas_expr(query: str, window: int) -> str:
    return query.replace("$window", f"{window}s")


def cost_report(source, cost: "CostConfig", *, at: float, window_seconds: int, scope: str = "") -> CostReport:
    """`scope`: the service matcher every generated query carries (Config.service_matcher); a
    `replicas_query` is the user's PromQL and is sent as written."""
    from opsctl.errors import UsageError

    if not cost.backends:
        raise UsageError("no backend has pricing: configure cost.backends in the config",
                         hint="e.g. cost: {backends: {internal: {gpu: {gpu_hourly_price: 3.5, replicas: 4}}}}")
    window = window_seconds
    hours = window / 3600
    backends = list(cost.backends)
    exprs: list[str] = [
        _tokens_query(schema.PROMPT_TOKENS, None, window, scope),
        _tokens_query(schema.COMPLETION_TOKENS, None, window, scope),
    ]
    for b in backends:
        exprs += [_tokens_query(schema.PROMPT_TOKENS, b, window, scope),
                  _tokens_query(schema.COMPLETION_TOKENS, b, window, scope)]
    values = source.query_many(exprs, at)
    total = None if values[0] is None or values[1] is None else values[0] + values[1]

    # Does the data reach back to the window's start? If not, hourly costs meet too few tokens.
    probe = max(60, min(3600, window // 24))
    own = f"{scope}," if scope else ""
    starts = source.query_many([f'sum(increase({schema.REQUESTS}{{{own}backend="{b}"}}[{probe}s]))' for b in backends],
                               at - window + probe)

    lines = []
    for i, backend in enumerate(backends):
        pricing = cost.backends[backend]
        input_tokens, output_tokens = values[2 + 2 * i], values[3 + 2 * i]
        line = _price(backend, pricing, input_tokens, output_tokens, hours, window, source, at)
        if line.tokens is not None and total:
            line.share = line.tokens / total
            if line.share < cost.min_traffic_share:
                line.warnings.append(
                    f"{backend} carried {line.share:.1%} of the tokens in the window (less than "
                    f"{cost.min_traffic_share:.0%}): too small a sample for a representative cost per million tokens")
        if line.tokens is None:
            line.warnings.append(f"{backend}: no token counts in the window")
        elif starts[i] is None:
            line.warnings.append(f"{backend}: no data at the start of the window; hourly costs are spread over "
                                 "fewer tokens than the window carried, so the cost per million is overstated")
        if line.per_million is not None and cost.frontier and cost.frontier.price_per_million > 0:
            line.vs_frontier = line.per_million / cost.frontier.price_per_million
        lines.append(line)

    frontier = None
    if cost.frontier:
        frontier = {
            "name": cost.frontier.name,
            "price_per_million": cost.frontier.price_per_million,
            # What the same tokens (all backends) would have cost at the frontier price.
            "cost_for_same_tokens": None if total is None else total / MILLION * cost.frontier.price_per_million,
        }
    return CostReport(at, window, cost.currency, total, lines, frontier)


def _price(backend: str, pricing: "BackendCost", input_tokens, output_tokens, hours: float, window: int,
           source, at: float) -> CostLine:
    tokens = None if input_tokens is None or output_tokens is None else input_tokens + output_tokens
    cost, basis, warnings = None, "", []
    if pricing.gpu:
        gpu = pricing.gpu
        replicas = gpu.replicas
        if gpu.replicas_query:
            replicas = source.query_many([replicas_expr(gpu.replicas_query, window)], at)[0]
            if replicas is None:
                warnings.append(f"{backend}: the replicas query returned no data")
        if replicas is not None:
            cost = replicas * gpu.gpus_per_replica * hours * gpu.gpu_hourly_price
            basis = (f"{replicas:g} replicas x {gpu.gpus_per_replica} GPU x {hours:g} h "
                     f"x {gpu.gpu_hourly_price:g}/GPU-hour")
    elif pricing.provisioned:
        cost = pricing.provisioned.hourly_price * hours
        basis = f"provisioned throughput {hours:g} h x {pricing.provisioned.hourly_price:g}/hour"
    elif (p := pricing.per_token) is not None:  # BackendCost holds exactly one of the three
        if tokens is not None:
            cost = input_tokens / MILLION * p.input_per_million + output_tokens / MILLION * p.output_per_million
        basis = f"{p.input_per_million:g}/M input + {p.output_per_million:g}/M output tokens"
    per_million = cost / (tokens / MILLION) if cost is not None and tokens else None
    return CostLine(backend, pricing.model, input_tokens, output_tokens, None, cost, per_million, None, basis,
                    warnings)
