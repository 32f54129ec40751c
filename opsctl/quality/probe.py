"""The golden-set consistency probe: do the backends answer like the reference model, and alike?

`run_probe` sends every golden prompt to every backend (bounded concurrency per backend, one
deadline for the whole run); `analyze` is pure and turns the answers into figures and checks:

  - exact-match rate of each backend against the golden `expected` and of each pair of backends
    (a prompt not answered counts as not matching: missing data is never a match);
  - the differing cases, with a short diff around the first differing character;
  - latency percentiles of the answered prompts (nearest rank);
  - `usage.prompt_tokens` against the golden file's count and between backends. A difference of
    exactly +1 or -1 on every prompt is the signature of a tokenizer that stopped prepending (or
    started doubling) the beginning-of-text token: the model still answers, differently.

Thresholds from `quality.probe` turn the figures into pass or fail. With several runs of the golden
set (`--repeat N`), `apply_repeats` adds each backend's self-agreement (the noise floor) and judges
the backends' agreement against a threshold that may be set relative to it (opsctl.quality.noise).
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from itertools import combinations
from typing import TYPE_CHECKING, Mapping, Sequence

from opsctl.errors import OpsctlError, UsageError
from opsctl.quality import names
from opsctl.quality.golden import GoldenCase

if TYPE_CHECKING:
    from opsctl.config import ProbeSettings
    from opsctl.quality.openai_client import OpenAIClient
    from opsctl.quality.push.base import Sample

PERCENTILES = (0.5, 0.95, 0.99)
SNIPPET = 24  # characters of context each side of the first difference


@dataclass(frozen=True)
class Answer:
    case_id: str
    text: str | None
    prompt_tokens: int | None = None
    latency: float | None = None
    attempts: int = 0
    error: str | None = None


# -- running ---------------------------------------------------------------------------------


def run_probe(cases: Sequence[GoldenCase], clients: Mapping[str, "OpenAIClient"], *, deadline_seconds: float,
              concurrency: int, clock=None) -> dict[str, list[Answer]]:
    """Every case to every backend; returns, per backend, one Answer per case in golden order."""
    from opsctl.clock import WallClock

    clock = clock or WallClock()
    deadline = clock.now() + deadline_seconds
    answers: dict[str, list[Answer]] = {}
    live: dict[str, "OpenAIClient"] = {}
    for backend, client in clients.items():
        # One credential check first, so a refused login fails fast instead of once per prompt.
        try:
            client.token_source.authorization()
        except UsageError:
            raise
        except OpsctlError as exc:
            answers[backend] = [Answer(c.id, None, error=f"auth: {exc.message}") for c in cases]
            continue
        live[backend] = client

    def ask(backend: str, case: GoldenCase) -> Answer:
        from opsctl.quality.openai_client import RequestFailed

        try:
            got = live[backend].complete(case.prompt, deadline=deadline)
        except RequestFailed as exc:
            return Answer(case.id, None, attempts=exc.attempts, error=exc.message)
        except UsageError:
            raise
        except OpsctlError as exc:
            return Answer(case.id, None, error=exc.message)
        return Answer(case.id, got.text, got.prompt_tokens, got.latency, got.attempts)

    if live:
        with ThreadPoolExecutor(max_workers=concurrency * len(live)) as pool:
            futures = {b: [pool.submit(ask, b, case) for case in cases] for b in live}
            for backend, pending in futures.items():
                answers[backend] = [f.result() for f in pending]
    return {b: answers[b] for b in clients}


# -- analysing -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Difference:
    case_id: str
    position: int | None  # first differing character; None when one side has no answer
    got: str
    reference: str


@dataclass(frozen=True)
class TokenCheck:
    backend: str
    reference: str  # "golden" or another backend
    compared: int
    mismatched: int
    offset: int | None  # the difference (backend - reference) when it is the same on every prompt
    bos: str | None  # missing | doubled, on a constant off-by-one
    message: str


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str


@dataclass
class BackendSummary:
    backend: str
    cases: int
    answered: int
    error_rate: float
    exact_match_golden: float
    latency: dict[str, float | None]
    differences: list[Difference] = field(default_factory=list)
    errors: list[dict] = field(default_factory=list)


@dataclass
class PairSummary:
    a: str
    b: str
    exact_match: float
    differences: list[Difference] = field(default_factory=list)


@dataclass
class ProbeReport:
    cases: int
    backends: list[BackendSummary]
    pairs: list[PairSummary]
    token_checks: list[TokenCheck]
    checks: list[Check]
    noise: dict | None = None  # with --repeat: floors per backend and the between figures per pair

    @property
    def passed(self) -> bool:
        return all(c.ok for c in self.checks)

    def to_dict(self) -> dict:
        data = asdict(self)
        data["passed"] = self.passed
        return data


def normalizer(mode: str):
    if mode == "strip":
        return lambda s: None if s is None else s.strip()
    if mode == "none":
        return lambda s: s
    raise UsageError(f"unknown normalize mode {mode!r} (known: strip, none)")


def short_diff(case_id: str, got: str | None, reference: str | None) -> Difference:
    """Where two answers first differ, with a little context on each side."""
    if got is None or reference is None:
        return Difference(case_id, None, _clip(got, 0), _clip(reference, 0))
    position = next((i for i, (x, y) in enumerate(zip(got, reference)) if x != y), min(len(got), len(reference)))
    return Difference(case_id, position, _clip(got, position), _clip(reference, position))


def _clip(text: str | None, position: int) -> str:
    if text is None:
        return "(no answer)"
    start = max(0, position - SNIPPET)
    end = position + SNIPPET
    out = text[start:end]
    return ("…" if start else "") + out + ("…" if end < len(text) else "")


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile; None without values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def token_check(backend: str, reference: str, got: Sequence[int | None], ref: Sequence[int | None]) -> TokenCheck:
    deltas = [g - r for g, r in zip(got, ref) if g is not None and r is not None]
    mismatched = sum(1 for d in deltas if d != 0)
    offset = deltas[0] if deltas and all(d == deltas[0] for d in deltas) else None
    bos = None
    against = "the golden file" if reference == names.GOLDEN else reference
    if not deltas:
        message = f"no prompt-token counts to compare with {against} (usage.prompt_tokens missing)"
    elif mismatched == 0:
        message = f"prompt tokens equal to {against} on all {len(deltas)} prompts"
    elif offset in (1, -1):
        bos = "missing" if offset == -1 else "doubled"
        fewer_more = "fewer" if offset == -1 else "more"
        if reference == names.GOLDEN:
            message = (f"{backend} counts exactly one prompt token {fewer_more} than the golden file on every prompt: "
                       f"probably a {bos} beginning-of-text (BOS) token in its tokenizer")
        else:
            mine, theirs = ("misses", "doubles") if offset == -1 else ("doubles", "misses")
            message = (f"{backend} counts exactly one prompt token {fewer_more} than {reference} on every prompt: "
                       f"{backend} probably {mine} the beginning-of-text (BOS) token (or {reference} {theirs} it)")
    elif offset is not None:
        message = f"{backend} counts {offset:+d} prompt tokens against {against} on every prompt (a different template?)"
    else:
        message = (f"prompt tokens differ from {against} on {mismatched} of {len(deltas)} prompts "
                   f"(a different tokenizer?)")
    return TokenCheck(backend, reference, len(deltas), mismatched, offset, bos, message)


def analyze(cases: Sequence[GoldenCase], answers: Mapping[str, Sequence[Answer]], settings: "ProbeSettings"
            ) -> ProbeReport:
    norm = normalizer(settings.normalize)
    n = len(cases)
    if n == 0:
        raise UsageError("the golden set is empty")
    backends: list[BackendSummary] = []
    token_checks: list[TokenCheck] = []
    checks: list[Check] = []
    texts = {b: [norm(a.text) for a in got] for b, got in answers.items()}

    for backend, got in answers.items():
        answered = [a for a in got if a.error is None]
        diffs = [short_diff(c.id, t, norm(c.expected)) for c, t in zip(cases, texts[backend]) if t != norm(c.expected)]
        latencies = [a.latency for a in answered if a.latency is not None]
        summary = BackendSummary(
            backend=backend,
            cases=n,
            answered=len(answered),
            error_rate=(n - len(answered)) / n,
            exact_match_golden=(n - len(diffs)) / n,
            latency={f"p{int(q * 100)}": percentile(latencies, q) for q in PERCENTILES},
            differences=diffs,
            errors=[{"case_id": a.case_id, "error": a.error, "attempts": a.attempts} for a in got if a.error],
        )
        backends.append(summary)
        checks.append(Check(f"{backend}: errors", summary.error_rate <= settings.max_error_rate,
                            f"{n - len(answered)} of {n} prompts unanswered ({summary.error_rate:.1%}, "
                            f"allowed {settings.max_error_rate:.1%})"))
        if settings.min_exact_match_golden is not None:
            checks.append(Check(f"{backend} vs golden", summary.exact_match_golden >= settings.min_exact_match_golden,
                                f"exact match {summary.exact_match_golden:.1%} "
                                f"(at least {settings.min_exact_match_golden:.1%})"))
        golden_tokens = [c.prompt_tokens for c in cases]
        if any(t is not None for t in golden_tokens):
            token_checks.append(token_check(backend, names.GOLDEN, [a.prompt_tokens for a in got], golden_tokens))

    pairs: list[PairSummary] = []
    for a, b in combinations(list(answers), 2):
        diffs = [short_diff(c.id, x, y) for c, x, y in zip(cases, texts[a], texts[b]) if x is None or x != y]
        pair = PairSummary(a, b, (n - len(diffs)) / n, diffs)
        pairs.append(pair)
        checks.append(Check(f"{a} vs {b}", pair.exact_match >= settings.min_exact_match_between,
                            f"exact match {pair.exact_match:.1%} (at least {settings.min_exact_match_between:.1%})"))
        first, second = _culprit_first(a, b, token_checks)
        tc = token_check(first, second, [x.prompt_tokens for x in answers[first]],
                         [y.prompt_tokens for y in answers[second]])
        if tc.mismatched and first != a:
            tc = replace(tc, message=tc.message + f" ({second} matches the golden file)")
        token_checks.append(tc)

    if settings.fail_on_prompt_token_mismatch:
        for tc in token_checks:
            if tc.mismatched:
                checks.append(Check(f"{tc.backend} vs {tc.reference}: prompt tokens", False, tc.message))
    return ProbeReport(n, backends, pairs, token_checks, checks)


def apply_repeats(report: ProbeReport, cases: Sequence[GoldenCase], runs: Mapping[str, Sequence[Sequence[Answer]]],
                  settings: "ProbeSettings") -> ProbeReport:
    """Noise floors and between-backend agreement over every run; each pair's check is judged on the
    N x N agreement against the absolute or floor-relative threshold."""
    from opsctl.quality.noise import between_threshold, cross_agreement, self_agreement

    norm = normalizer(settings.normalize)
    texts = {b: [[None if a.error is not None else norm(a.text) for a in run] for run in rs] for b, rs in runs.items()}
    repeat = min(len(rs) for rs in runs.values())
    if repeat < 2:
        raise UsageError("a noise floor needs at least two runs of the golden set (--repeat 2 or more)")
    floors = {b: self_agreement(t) for b, t in texts.items()}
    pairs, verdicts = [], {}
    for a, b in combinations(list(runs), 2):
        between = cross_agreement(texts[a], texts[b])
        threshold, how = between_threshold(floors[a], floors[b], settings.min_exact_match_between_vs_floor,
                                           settings.min_exact_match_between)
        pairs.append({"a": a, "b": b, "exact_match": between, "threshold": threshold, "threshold_from": how})
        verdicts[f"{a} vs {b}"] = Check(
            f"{a} vs {b}", between >= threshold,
            f"exact match {between:.1%} over {repeat} x {repeat} runs (at least {threshold:.1%}: {how}); "
            f"noise floors {a} {floors[a]:.1%}, {b} {floors[b]:.1%}")
    report.checks = [verdicts.get(c.name, c) for c in report.checks]
    report.noise = {"repeat": repeat, "floors": floors, "pairs": pairs}
    return report


def _culprit_first(a: str, b: str, checks: Sequence[TokenCheck]) -> tuple[str, str]:
    """Order a pair so the backend the golden file shows to be off comes first, when it says so."""
    golden = {c.backend: c for c in checks if c.reference == names.GOLDEN and c.compared}
    if a in golden and b in golden and golden[a].mismatched == 0 and golden[b].mismatched:
        return b, a
    return a, b


def samples(report: ProbeReport, *, service: str, at: float, between_threshold: float | None = None) -> list["Sample"]:
    """The report as gauges, for an SLO or alert to watch. Between backends: the N x N figure and its
    threshold when the probe ran repeatedly, else the single run's and `between_threshold`."""
    from opsctl.quality.push.base import Sample

    out = [
        Sample(names.CASES, report.cases, {names.LABEL_SERVICE: service}),
        Sample(names.PASSED, 1.0 if report.passed else 0.0, {names.LABEL_SERVICE: service}),
        Sample(names.LAST_RUN, float(at), {names.LABEL_SERVICE: service}),
    ]
    for b in report.backends:
        base = {names.LABEL_SERVICE: service, names.LABEL_BACKEND: b.backend}
        out.append(Sample(names.EXACT_MATCH, b.exact_match_golden, {**base, names.LABEL_REFERENCE: names.GOLDEN}))
        out.append(Sample(names.ERROR_RATIO, b.error_rate, base))
        for key, value in b.latency.items():
            if value is not None:
                quantile = str(int(key[1:]) / 100)
                out.append(Sample(names.LATENCY, value, {**base, names.LABEL_PERCENTILE: quantile}))
    repeated = {(p["a"], p["b"]): p for p in (report.noise or {}).get("pairs", [])}
    for p in report.pairs:
        figure, threshold = p.exact_match, between_threshold
        if (p.a, p.b) in repeated:
            figure, threshold = repeated[(p.a, p.b)]["exact_match"], repeated[(p.a, p.b)]["threshold"]
        for x, y in ((p.a, p.b), (p.b, p.a)):
            labels = {names.LABEL_SERVICE: service, names.LABEL_BACKEND: x, names.LABEL_REFERENCE: y}
            out.append(Sample(names.EXACT_MATCH, figure, labels))
            if threshold is not None:
                out.append(Sample(names.EXACT_MATCH_THRESHOLD, threshold, labels))
    if report.noise:
        out.append(Sample(names.REPEAT, float(report.noise["repeat"]), {names.LABEL_SERVICE: service}))
        for backend, floor in report.noise["floors"].items():
            out.append(Sample(names.SELF_AGREEMENT, floor, {names.LABEL_SERVICE: service, names.LABEL_BACKEND: backend}))
    for tc in report.token_checks:
        if not tc.compared:
            continue
        labels = {names.LABEL_SERVICE: service, names.LABEL_BACKEND: tc.backend, names.LABEL_REFERENCE: tc.reference}
        out.append(Sample(names.PROMPT_TOKEN_MISMATCH, tc.mismatched / tc.compared, labels))
        out.append(Sample(names.BOS_SUSPECTED, 1.0 if tc.bos else 0.0, labels))
        if tc.offset is not None:
            out.append(Sample(names.PROMPT_TOKEN_OFFSET, float(tc.offset), labels))
    return out
