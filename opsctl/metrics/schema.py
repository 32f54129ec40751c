"""The client-side metrics the LLM proxy records, and their names. One home for these names.

Every 10 seconds the proxy records, per backend:
  llm_proxy_requests_total{backend, outcome}           counter; outcome in OUTCOMES
  llm_proxy_request_duration_seconds_bucket{backend, le} histogram of every request's latency
  llm_proxy_request_duration_seconds_count / _sum
  llm_proxy_prompt_tokens_total{backend}, llm_proxy_completion_tokens_total{backend}
  llm_proxy_suggestions_total{backend}                  counter; suggestions parsed from answered requests
  llm_proxy_probes_total{backend, outcome}              counter; the proxy's synthetic probes, outcome in PROBE_OUTCOMES

Suggestions are the proxy's own reading of an answer (how many usable suggestions it held): a model
that answers slightly differently after a vendor release shows up there first, while every request
still succeeds. Token counts come from each answer's `usage` fields.

Probes are the proxy's own small requests to every backend, sent whatever share of user traffic the
backend carries (PROBES_PER_STEP every 10 s: one a second), so a backend that was failed over from
still says whether it answers (docs/decisions/0270). A probe fails when its answer is an error
(auth_error, throttled, server_error, as for requests) or does not come within PROBE_TIMEOUT_SECONDS
(timeout: a probe slower than the 1 s latency objective's threshold is a failed one).
"""

from __future__ import annotations

STEP_SECONDS = 10

REQUESTS = "llm_proxy_requests_total"
DURATION = "llm_proxy_request_duration_seconds"
DURATION_BUCKET = DURATION + "_bucket"
DURATION_COUNT = DURATION + "_count"
DURATION_SUM = DURATION + "_sum"
PROMPT_TOKENS = "llm_proxy_prompt_tokens_total"
COMPLETION_TOKENS = "llm_proxy_completion_tokens_total"
SUGGESTIONS = "llm_proxy_suggestions_total"
PROBES = "llm_proxy_probes_total"

# ok: a 2xx answer. client_error: a 4xx other than 401, 403 and 429, the caller's fault, not counted
# against availability. auth_error: 401 or 403 answered by a backend (its auth layer refusing our
# credentials: the user gets no answer, so it counts against availability). throttled: 429 (e.g.
# the vendor's auth layer). server_error: 5xx. timeout: no answer.
OUTCOMES = ("ok", "client_error", "auth_error", "throttled", "server_error", "timeout")
BAD_OUTCOMES = ("auth_error", "throttled", "server_error", "timeout")
# A probe's outcomes: a request of the proxy's own is never the caller's fault (no client_error).
PROBE_OUTCOMES = ("ok", "auth_error", "throttled", "server_error", "timeout")
PROBES_PER_STEP = 10  # one probe a second to each backend
PROBE_TIMEOUT_SECONDS = 1.0  # a probe not answered within it is a timeout

# Histogram bucket bounds in seconds, with their OpenMetrics label values ("1.0", not "1").
BUCKETS = (0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 2.0, 5.0, 10.0)


def le_label(bound: float) -> str:
    return "+Inf" if bound == float("inf") else repr(float(bound))


LE_LABELS = tuple(le_label(b) for b in BUCKETS) + ("+Inf",)


def outcome_for_status(status: int | str) -> str:
    """Map a proxy log's HTTP status (or 'timeout') to an outcome."""
    if isinstance(status, str):
        if status.lower() == "timeout":
            return "timeout"
        status = int(status)
    if 200 <= status < 400:
        return "ok"
    if status == 429:
        return "throttled"
    if status in (401, 403):
        return "auth_error"
    if 400 <= status < 500:
        return "client_error" if status != 408 else "timeout"
    return "server_error"


# Column layout of one embedded-store row (one backend, one 10-second step).
REQUEST_COLUMNS = tuple(f"req_{o}" for o in OUTCOMES)
BUCKET_COLUMNS = tuple(f"le_{i}" for i in range(len(LE_LABELS)))  # cumulative per Prometheus' le
PROBE_COLUMNS = tuple(f"probe_{o}" for o in PROBE_OUTCOMES)
VALUE_COLUMNS = REQUEST_COLUMNS + BUCKET_COLUMNS + (
    "lat_count", "lat_sum", "prompt_tokens", "completion_tokens", "suggestions") + PROBE_COLUMNS


def series_columns(metric: str) -> dict[tuple[tuple[str, str], ...], str] | None:
    """For a metric name, map each series' own labels (besides backend) to its store column."""
    if metric == REQUESTS:
        return {(("outcome", o),): f"req_{o}" for o in OUTCOMES}
    if metric == DURATION_BUCKET:
        return {(("le", le),): f"le_{i}" for i, le in enumerate(LE_LABELS)}
    if metric == DURATION_COUNT:
        return {(): "lat_count"}
    if metric == DURATION_SUM:
        return {(): "lat_sum"}
    if metric == PROMPT_TOKENS:
        return {(): "prompt_tokens"}
    if metric == COMPLETION_TOKENS:
        return {(): "completion_tokens"}
    if metric == SUGGESTIONS:
        return {(): "suggestions"}
    if metric == PROBES:
        return {(("outcome", o),): f"probe_{o}" for o in PROBE_OUTCOMES}
    return None
