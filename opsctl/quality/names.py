"""One home for the names of the figures the consistency probe pushes (Prometheus conventions:
snake_case, unit suffix, `_ratio` for 0..1 shares). Labels: `backend`, `reference` (the golden
file, `golden`, or another backend's name), `percentile`."""

from __future__ import annotations

EXACT_MATCH = "opsctl_probe_exact_match_ratio"  # {backend, reference}
ERROR_RATIO = "opsctl_probe_error_ratio"  # {backend}: prompts not answered after retries
LATENCY = "opsctl_probe_latency_seconds"  # {backend, percentile}; not `quantile`, which is for summaries
PROMPT_TOKEN_MISMATCH = "opsctl_probe_prompt_token_mismatch_ratio"  # {backend, reference}
PROMPT_TOKEN_OFFSET = "opsctl_probe_prompt_token_offset"  # {backend, reference}: only when constant
BOS_SUSPECTED = "opsctl_probe_bos_suspected"  # {backend, reference}: 1 on a constant off-by-one
CASES = "opsctl_probe_cases"  # golden cases sent to each backend
PASSED = "opsctl_probe_passed"  # 1 when every threshold held
LAST_RUN = "opsctl_probe_last_run_timestamp_seconds"
SELF_AGREEMENT = "opsctl_probe_self_agreement_ratio"  # {backend}: the noise floor, with --repeat
EXACT_MATCH_THRESHOLD = "opsctl_probe_exact_match_threshold_ratio"  # {backend, reference}: between backends
REPEAT = "opsctl_probe_repeat"  # runs of the golden set per backend

LABEL_BACKEND = "backend"
LABEL_REFERENCE = "reference"
LABEL_PERCENTILE = "percentile"
LABEL_SERVICE = "service"
GOLDEN = "golden"

HELP = {
    EXACT_MATCH: "Share of golden prompts answered exactly like the reference (golden file or another backend).",
    ERROR_RATIO: "Share of golden prompts a backend did not answer after retries.",
    LATENCY: "Probe request latency percentiles per backend.",
    PROMPT_TOKEN_MISMATCH: "Share of prompts whose usage.prompt_tokens differs from the reference.",
    PROMPT_TOKEN_OFFSET: "Constant difference in prompt tokens from the reference (present only when constant).",
    BOS_SUSPECTED: "1 when prompt tokens differ by exactly one on every prompt (missing or doubled BOS token).",
    CASES: "Golden cases in the last probe.",
    PASSED: "1 when the last consistency probe passed every threshold.",
    LAST_RUN: "When the last consistency probe ran (UNIX seconds).",
    SELF_AGREEMENT: "Share of golden prompts a backend answers identically in two of its runs (noise floor).",
    EXACT_MATCH_THRESHOLD: "The exact-match share between two backends below which the probe fails.",
    REPEAT: "Runs of the golden set sent to each backend in the last probe.",
}
