"""The simulator's draw: the steady-state profile of each backend kind, and the numpy draw of one
backend's store columns from per-step parameters (Poisson counts, lognormal latency buckets,
tokens, suggestions), from random streams keyed by seed and backend. Split from
opsctl.metrics.simulator, which re-exports it."""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from opsctl.metrics import schema

if TYPE_CHECKING:  # numpy is imported inside the functions that use it (start-up stays light)
    import numpy as np

    from opsctl.metrics.sim_incidents import _StepParams

TIMEOUT_SECONDS = 30.0
LAT_SUM_QUANTUM = 1.0 / 1024.0
MU_QUANTUM = 1e-4  # log-latency resolution of the bucket probabilities
DRAW_CHUNK_STEPS = 7 * 8640  # steps drawn at once: a week


@dataclass(frozen=True)
class BackendProfile:
    """Steady-state behaviour of one kind of backend."""

    median_seconds: float  # latency median at zero load
    sigma: float  # lognormal shape
    load_slope: float  # log-median increase at full load (peak traffic)
    client_error: float
    throttled: float
    server_error: float
    timeout: float
    auth_error: float = 0.0  # 401/403 from the backend's auth layer


PROFILES: dict[str, BackendProfile] = {
    "internal": BackendProfile(0.100, 0.42, 0.15, client_error=2e-4, throttled=0.0, server_error=1e-5, timeout=2e-6),
    "vendor": BackendProfile(0.150, 0.38, 0.08, client_error=2e-4, throttled=2e-6, server_error=1.2e-5, timeout=2e-6),
}
REJECTED_MEDIAN_SECONDS, REJECTED_SIGMA = 0.025, 0.5  # 4xx and 429 answers come back fast

PROMPT_TOKENS_MEAN, PROMPT_TOKENS_SD = 450.0, 350.0
COMPLETION_TOKENS_MEAN, COMPLETION_TOKENS_SD = 180.0, 140.0
SUGGESTIONS_PER_ANSWER = 3.0


def _survival(z: "np.ndarray") -> "np.ndarray":
    """P(Z > z) for a standard normal, with relative accuracy ~1e-7 in both tails (Numerical Recipes
    erfc), so the rare slow requests in the tail buckets keep their size."""
    import numpy as np

    x = np.abs(z) / math.sqrt(2.0)
    t = 1.0 / (1.0 + 0.5 * x)
    poly = -1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806 + t * (
        0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277))))))))
    erfc = t * np.exp(-x * x + poly)
    return np.where(z >= 0, 0.5 * erfc, 1.0 - 0.5 * erfc)


def _lognormal_buckets(mu: "np.ndarray", sigma: float) -> tuple["np.ndarray", "np.ndarray"]:
    """For lognormal(mu, sigma) latencies: the probability of each histogram interval
    (le_0, le_0..le_1, ..., above the last finite bound) and the mean latency inside each interval.
    Both have shape (len(BUCKETS) + 1, len(mu))."""
    import numpy as np

    mu = np.atleast_1d(np.asarray(mu, dtype=np.float64))
    # mu moves with load; on a 1e-4 grid (0.01% of the median) a month holds a few thousand values.
    grid, index = np.unique(np.round(mu / MU_QUANTUM), return_inverse=True)
    if grid.size < mu.size:
        prob, mean_inside = _lognormal_buckets_exact(grid * MU_QUANTUM, sigma)
        return prob[:, index.ravel()], mean_inside[:, index.ravel()]
    return _lognormal_buckets_exact(mu, sigma)


def _lognormal_buckets_exact(mu: "np.ndarray", sigma: float) -> tuple["np.ndarray", "np.ndarray"]:
    import numpy as np

    logs = np.log(np.asarray(schema.BUCKETS))[:, None]
    ones, zeros = np.ones((1, mu.size)), np.zeros((1, mu.size))
    surv = np.vstack([ones, _survival((logs - mu) / sigma), zeros])
    # E[L; L > b] = exp(mu + sigma^2/2) * P(Z > (ln b - mu)/sigma - sigma)
    surv_shifted = np.vstack([ones, _survival((logs - mu) / sigma - sigma), zeros])
    prob = np.clip(surv[:-1] - surv[1:], 0.0, None)
    partial = np.clip(surv_shifted[:-1] - surv_shifted[1:], 0.0, None) * np.exp(mu + sigma * sigma / 2)
    mean_inside = np.divide(partial, prob, out=np.zeros_like(prob), where=prob > 1e-300)
    return prob, mean_inside


def _draw(rng: "np.random.Generator", lam: "np.ndarray", params: _StepParams, mu: "np.ndarray",
          sigma: float, rejected: tuple["np.ndarray", "np.ndarray"],
          suggestions_rng: "np.random.Generator") -> dict[str, "np.ndarray"]:
    """Draw the store columns for steps with expected requests `lam` and per-step parameters
    (suggestions from their own stream, so the other columns do not depend on them)."""
    import numpy as np

    bad = params.client_error + params.throttled + params.server_error + params.timeout + params.auth_error
    scale = np.where(bad > 1.0, 1.0 / np.maximum(bad, 1e-300), 1.0)
    p_client, p_throttled = params.client_error * scale, params.throttled * scale
    p_server, p_timeout = params.server_error * scale, params.timeout * scale
    p_auth = params.auth_error * scale
    # 401/403 answers are rejected fast like 4xx and 429: drawn with them, split off below
    p_throttled = p_throttled + p_auth
    p_ok = np.clip(1.0 - (p_client + p_throttled + p_server + p_timeout), 0.0, 1.0)

    served_prob, served_mean = _lognormal_buckets(mu, sigma)
    if np.any(params.tail_share > 0):  # a mixture: `tail_share` of the answers from a slower lognormal
        tail_prob, tail_mean = _lognormal_buckets(mu + params.tail_shift, sigma)
        t = np.clip(params.tail_share, 0.0, 1.0)
        mixed = (1.0 - t) * served_prob + t * tail_prob
        served_mean = np.divide((1.0 - t) * served_prob * served_mean + t * tail_prob * tail_mean, mixed,
                                out=np.zeros_like(mixed), where=mixed > 1e-300)
        served_prob = mixed
    rejected_prob, rejected_mean = rejected
    served = rng.poisson(lam * (p_ok + p_server) * served_prob)
    rejected_counts = rng.poisson(lam * (p_client + p_throttled) * rejected_prob)
    timeouts = rng.poisson(lam * p_timeout)

    served_total = served.sum(axis=0)
    server_share = np.divide(p_server, p_ok + p_server, out=np.zeros_like(p_server), where=(p_ok + p_server) > 0)
    server_errors = rng.binomial(served_total, np.clip(server_share, 0.0, 1.0))
    rejected_total = rejected_counts.sum(axis=0)
    throttle_share = np.divide(p_throttled, p_client + p_throttled, out=np.zeros_like(p_throttled),
                               where=(p_client + p_throttled) > 0)
    throttled = rng.binomial(rejected_total, np.clip(throttle_share, 0.0, 1.0))
    auth_errors = np.zeros_like(throttled)
    if np.any(p_auth > 0):  # drawn only when asked for, so runs without it keep every other draw
        auth_share = np.divide(p_auth, p_throttled, out=np.zeros_like(p_auth), where=p_throttled > 0)
        auth_errors = rng.binomial(throttled, np.clip(auth_share, 0.0, 1.0))
        throttled = throttled - auth_errors

    intervals = served + rejected_counts
    intervals[-1] += timeouts
    cumulative = np.cumsum(intervals, axis=0)
    lat_sum = (served * served_mean).sum(axis=0) + (rejected_counts * rejected_mean).sum(axis=0)
    lat_sum = lat_sum + timeouts * TIMEOUT_SECONDS
    lat_sum = np.round(lat_sum / LAT_SUM_QUANTUM) * LAT_SUM_QUANTUM

    ok = served_total - server_errors
    total = served_total + rejected_total + timeouts
    prompt = (total * (PROMPT_TOKENS_MEAN + params.prompt_shift)
              + np.sqrt(total) * PROMPT_TOKENS_SD * rng.standard_normal(total.size))
    completion_share = 1.0 - params.changed + params.changed * params.completion
    completion = (ok * COMPLETION_TOKENS_MEAN * completion_share
                  + np.sqrt(ok) * COMPLETION_TOKENS_SD * rng.standard_normal(ok.size))
    suggestion_share = 1.0 - params.changed + params.changed * params.suggestions
    suggestions = suggestions_rng.poisson(ok * SUGGESTIONS_PER_ANSWER * suggestion_share)

    columns = {
        "req_ok": ok,
        "req_client_error": rejected_total - throttled - auth_errors,
        "req_auth_error": auth_errors,
        "req_throttled": throttled,
        "req_server_error": server_errors,
        "req_timeout": timeouts,
    }
    for i, name in enumerate(schema.BUCKET_COLUMNS):
        columns[name] = cumulative[i]
    columns["lat_count"] = total
    columns["lat_sum"] = lat_sum
    columns["prompt_tokens"] = np.maximum(np.rint(prompt), 0).astype(np.int64)
    columns["completion_tokens"] = np.maximum(np.rint(completion), 0).astype(np.int64)
    columns["suggestions"] = suggestions.astype(np.int64)
    return columns


def _draw_chunked(rng, lam, params, mu, sigma, rejected, suggestions_rng) -> dict[str, "np.ndarray"]:
    """`_draw` a week of steps at a time, so memory stays bounded on long ranges."""
    import numpy as np

    if lam.size <= DRAW_CHUNK_STEPS:
        return _draw(rng, lam, params, mu, sigma, rejected, suggestions_rng)
    pieces = []
    for first in range(0, lam.size, DRAW_CHUNK_STEPS):
        part = slice(first, first + DRAW_CHUNK_STEPS)
        pieces.append(_draw(rng, lam[part], params.take(part), mu[part], sigma, rejected, suggestions_rng))
    return {column: np.concatenate([p[column] for p in pieces]) for column in pieces[0]}


def _rng(seed: int, *key: int) -> "np.random.Generator":
    import numpy as np

    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(entropy=seed, spawn_key=key)))


def _stream_id(name: str) -> int:
    return zlib.crc32(name.encode())


def probe_shares(params: _StepParams, mu: "np.ndarray", sigma: float) -> "np.ndarray":
    """Per step, the chance of each of schema.PROBE_OUTCOMES for one synthetic probe (shape
    (len(PROBE_OUTCOMES), steps)): the step's error shares as a request meets them (auth_error,
    throttled, server_error, timeout; a probe is never a client error), and an answer slower than
    schema.PROBE_TIMEOUT_SECONDS, from the answers' latency (`mu`, the tail's mixture), a timeout."""
    import numpy as np

    bad = params.client_error + params.throttled + params.server_error + params.timeout + params.auth_error
    scale = np.where(bad > 1.0, 1.0 / np.maximum(bad, 1e-300), 1.0)
    auth, throttled = params.auth_error * scale, params.throttled * scale
    server, timeout = params.server_error * scale, params.timeout * scale
    answered = np.clip(1.0 - (auth + throttled + server + timeout), 0.0, 1.0)
    limit = math.log(schema.PROBE_TIMEOUT_SECONDS)
    t = np.clip(params.tail_share, 0.0, 1.0)
    slow = (1.0 - t) * _survival((limit - mu) / sigma) + t * _survival((limit - mu - params.tail_shift) / sigma)
    late = answered * np.clip(slow, 0.0, 1.0)
    return np.vstack([answered - late, auth, throttled, server, timeout + late])


def draw_probes(rng: "np.random.Generator", params: _StepParams, mu: "np.ndarray", sigma: float,
                per_step: int = schema.PROBES_PER_STEP) -> dict[str, "np.ndarray"]:
    """The probe columns (schema.PROBE_COLUMNS) of each step: `per_step` probes, each outcome read
    from one uniform draw against the step's cumulative shares. The draws are fixed per step
    whatever the shares, so a fault changes the probes of its own steps only (every other step is
    what it is without the fault), and the other columns never depend on the probes (own stream)."""
    import numpy as np

    n = mu.size
    counts = np.zeros((len(schema.PROBE_OUTCOMES), n), dtype=np.int64)
    for first in range(0, n, DRAW_CHUNK_STEPS):  # a week at a time: memory stays bounded
        part = slice(first, min(first + DRAW_CHUNK_STEPS, n))
        bounds = np.cumsum(probe_shares(params.take(part), mu[part], sigma), axis=0)[:-1]  # the last bound is 1
        uniform = rng.random((part.stop - part.start, per_step))
        index = (uniform[None, :, :] >= bounds[:, :, None]).sum(axis=0)  # outcome of each probe
        for k in range(len(schema.PROBE_OUTCOMES)):
            counts[k, part] = (index == k).sum(axis=1)
    return {column: counts[k] for k, column in enumerate(schema.PROBE_COLUMNS)}
