"""Prometheus and anything that speaks its HTTP API (Thanos, Mimir, Cortex, VictoriaMetrics).

Every call has an overall deadline (connect, send, headers and body), not just a per-read
timeout: a server that trickles a byte a second cannot hold a report, a guard or a failover.
One probe fails fast, nothing is retried, concurrency is bounded, and every query of a report is
pinned to one evaluation instant.

Queries are sent as they are written, matchers included: label matching is Prometheus' job (RE2),
and a query never touches more series than its own selector names. To save round trips, up to
BATCH_SIZE queries travel as one union (`q1 or q2 ...`, each tagged with a label); a union the
server refuses as too large is split and retried in halves down to single queries, so one
expensive SLO never hides the others.

Errors map to exit codes: a query Prometheus rejects as malformed is invalid input (2); one it
refuses for its size, a timeout or a limit, an error answer, a page that is not its JSON API, a
dead or slow server are no data (3), each with one line saying what to do next.

An answer is read for what it is, never guessed at: a query that answers several series where one
number is wanted is refused (`ManySeries`, naming the query), never one series kept at random;
a NaN or +/-Inf sample is no data (None) with the reason kept in `problems`; Prometheus'
`warnings` (a Thanos store or a Mimir querier that answered in part) are kept in `warnings` for
the report to show, and a strict source (every guard's, see `bounded`) refuses them as no data:
partial data is no data for a guard.
"""

from __future__ import annotations

import json
import math
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Sequence
from urllib.parse import urlencode

from opsctl.config import PrometheusSource as Settings
from opsctl.errors import SourceUnavailable, UsageError

TAG = "opsctl_query"
BATCH_SIZE = 60
PROBE_TIMEOUT = 5.0


class QueryRefused(SourceUnavailable):
    """Prometheus refused a valid query for its size, a timeout or a limit (exit 3)."""


class ManySeries(UsageError):
    """A query that must answer one number answered several series (exit 2)."""

    def __init__(self, expr: str, count: int, url: str):
        self.expr = expr
        short = expr if len(expr) <= 160 else expr[:157] + "..."
        super().__init__(f"the query {short} answers {count} series at Prometheus at {url}, not one",
                         hint="aggregate it to one series, e.g. sum(...) around it")


class PrometheusSource:
    speaks_promql = True  # answers any PromQL, recorded series included

    def __init__(self, settings: Settings, *, deadline: float | None = None, strict: bool = False):
        self.settings = settings
        self.url = settings.url.rstrip("/")
        self.description = f"Prometheus at {self.url}"
        self.deadline_seconds = deadline if deadline is not None else settings.report_deadline
        self.strict = strict  # warnings (partial answers) are no data: every guard's source
        self.warnings: list[str] = []  # Prometheus' own warnings, each once
        self.problems: list[str] = []  # answers read as no data (NaN, +/-Inf), each once
        self._lock = threading.Lock()

    def bounded(self, seconds: float) -> "PrometheusSource":
        """The same source with every call (and each batch of calls) bounded by `seconds`, and
        strict: a guard counts an answer with warnings (partial data) as no data."""
        return PrometheusSource(self.settings, deadline=min(seconds, self.deadline_seconds), strict=True)

    def step_seconds(self) -> float | None:
        """The configured sample step (metrics.prometheus.step), or None to find it from the data."""
        step = getattr(self.settings, "step", None)
        return None if step is None else float(step.seconds)

    def _note(self, bucket: list[str], text: str) -> None:
        with self._lock:
            if text not in bucket:
                bucket.append(text)

    # -- HTTP ----------------------------------------------------------------------------------

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json", "User-Agent": "opsctl"}
        a = self.settings.auth
        if a.bearer_token:
            headers["Authorization"] = f"Bearer {a.bearer_token.resolve()}"
        elif a.username and a.password:  # the config holds both or neither
            import base64

            token = base64.b64encode(f"{a.username}:{a.password.resolve()}".encode()).decode()
            headers["Authorization"] = f"Basic {token}"
        if self.settings.tenant:
            headers["X-Scope-OrgID"] = self.settings.tenant
        return headers

    def _extra_params(self) -> dict[str, str]:
        params = {}
        if self.settings.dedup is not None:
            params["dedup"] = "true" if self.settings.dedup else "false"
        if self.settings.partial_response is not None:
            params["partial_response"] = "true" if self.settings.partial_response else "false"
        return params

    def _call(self, path: str, params: dict | None, deadline: float, budget: float) -> dict:
        """POST (or GET without params) one API call; returns the decoded `data`, or raises."""
        from opsctl.remote import DeadlineExceeded, http_call

        headers = self._headers()
        body = None
        method = "GET"
        if params is not None:
            method = "POST"
            body = urlencode({**params, **self._extra_params()}).encode()
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        try:
            answer = http_call(method, self.url + path, headers=headers, body=body, deadline=deadline,
                               connect_timeout=min(self.settings.timeout, PROBE_TIMEOUT),
                               ca_file=self.settings.ca_file, verify_tls=self.settings.verify_tls)
        except DeadlineExceeded as exc:
            raise SourceUnavailable(
                f"Prometheus at {self.url} did not answer within {budget:g}s",
                hint="a slow or overloaded server: check its load, or raise metrics.prometheus.timeout"
                     " / report_deadline",
            ) from exc
        except UsageError:
            raise
        except OSError as exc:
            import ssl

            if isinstance(exc, ssl.SSLCertVerificationError):
                raise UsageError(
                    f"the TLS certificate of {self.url} is not trusted ({exc.verify_message})",
                    hint="set metrics.prometheus.ca_file to the CA bundle that signed it",
                ) from exc
            raise SourceUnavailable(
                f"cannot reach Prometheus at {self.url}: {_cause(exc)}",
                hint="check --prometheus-url / metrics.prometheus.url and that the server is up",
            ) from exc
        return self._decode(answer)

    def _decode(self, answer) -> dict:
        status = answer.status
        if status in (401, 403):
            raise UsageError(
                f"Prometheus at {self.url} refused the credentials (HTTP {status})",
                hint="set metrics.prometheus.auth (bearer_token or username/password) from env or a file",
            )
        try:
            doc = json.loads(answer.body)
        except ValueError:
            kind = answer.headers.get("content-type", "unknown content").split(";")[0]
            raise SourceUnavailable(
                f"{self.url} answered HTTP {status} with {kind}, not Prometheus' JSON API",
                hint="check that the URL is the Prometheus API root (not a login page, proxy or UI path)",
            ) from None
        if not isinstance(doc, dict):
            raise SourceUnavailable(f"{self.url} answered HTTP {status} with JSON that is not Prometheus' API")
        if doc.get("status") == "success" and status < 400:
            data = doc.get("data")
            if data is None:
                raise SourceUnavailable(f"{self.url} answered 'success' without data (HTTP {status})")
            self._warned(doc.get("warnings"))
            return data
        error_type = str(doc.get("errorType") or "")
        error = " ".join(str(doc.get("error") or f"HTTP {status}").split())[:300]
        if error_type == "bad_data" or status == 400:
            raise UsageError(f"Prometheus rejected the query: {error}",
                             hint="check the SLO's selectors (spec.service_level_indicator) in PromQL")
        if error_type in ("timeout", "canceled", "execution", "too_many_samples") or status in (422, 503):
            raise QueryRefused(
                f"Prometheus refused the query ({error_type or status}): {error}",
                hint="it is too large for the server's limits (--query.max-samples, --query.timeout):"
                     " load the recording rules from `opsctl slo rules`, or raise the server's limits",
            )
        if status == 404:
            raise SourceUnavailable(f"{self.url} has no Prometheus query API (HTTP 404)",
                                    hint="check that the URL is the Prometheus API root")
        raise SourceUnavailable(f"Prometheus at {self.url} answered an error ({error_type or status}): {error}")

    def _warned(self, warnings) -> None:
        if not warnings:
            return
        texts = [" ".join(str(w).split())[:300] for w in (warnings if isinstance(warnings, list) else [warnings])]
        for text in texts:
            self._note(self.warnings, f"Prometheus at {self.url} warned: {text}")
        if self.strict:
            raise SourceUnavailable(
                f"Prometheus at {self.url} answered in part (warning: {texts[0]}): partial data is no data for a guard",
                hint="check the stores or queriers behind it (Thanos partial_response, Mimir), then retry")

    # -- MetricSource ----------------------------------------------------------------------------

    def check(self) -> None:
        """One fast probe, bounded like every call, so a dead or trickling server costs seconds."""
        budget = min(self.settings.timeout, PROBE_TIMEOUT, self.deadline_seconds)
        try:
            self._call("/api/v1/status/buildinfo", None, time.monotonic() + budget, budget)
        except SourceUnavailable as exc:
            if "HTTP 404" in exc.message:
                return  # some PromQL-compatible servers lack buildinfo; queries will tell
            raise

    def default_time(self, now: float | None = None) -> float:
        return time.time() if now is None else now

    def query_many(self, exprs: Sequence[str], at: float) -> list[float | None]:
        if not exprs:
            return []
        budget = self.deadline_seconds
        deadline = time.monotonic() + budget
        batches = [list(range(i, min(i + BATCH_SIZE, len(exprs)))) for i in range(0, len(exprs), BATCH_SIZE)]
        results: list[float | None] = [None] * len(exprs)
        workers = max(1, min(self.settings.max_concurrency, len(batches)))
        with ThreadPoolExecutor(max_workers=workers) as pool:
            futures = [pool.submit(self._answer, batch, exprs, at, deadline, budget) for batch in batches]
            for future in futures:
                for index, value in future.result():
                    results[index] = value
        return results

    def newest_sample(self, at: float) -> float | None:
        """The newest request-counter sample at or before `at`: within Prometheus' 5-minute lookback
        first (one sample per series), then over the last day (a 5-minute subquery), so a stale
        source's age can be shown."""
        from opsctl.metrics.schema import REQUESTS

        newest = self.query_many([f"max(timestamp({REQUESTS}))"], at)[0]
        if newest is None:
            newest = self.query_many([f"max_over_time(max(timestamp({REQUESTS}))[1d:5m])"], at)[0]
        return newest

    def data_start(self, selectors: Sequence[str], at: float, span: int) -> list[float | None]:
        """Per selector, the first instant within (at - span, at] where it had a sample, to
        span/672 (1 h for 28 days): a subquery touching one sample per series per step."""
        step = max(60, span // 672)
        exprs = [f"min_over_time(timestamp(count({s}))[{span}s:{step}s])" for s in selectors]
        coarse = self.query_many(exprs, at)
        return [None if start is None else self._first_sample(s, start, step) for s, start in zip(selectors, coarse)]

    def _first_sample(self, selector: str, start: float, step: int) -> float:
        """The first sample itself, where the coarse search found the first step holding one: the
        sample timestamps over that one step, at the data's own resolution (metrics.prometheus.step,
        else 10 s), so `data_since` says when the data starts, not where a subquery step fell."""
        resolution = int(self.step_seconds() or 10)
        first = self.query_many([f"min(min_over_time(timestamp({selector})[{step + resolution}s:{resolution}s]))"],
                                start)[0]
        return start if first is None or first > start else first

    def _answer(self, indexes, exprs, at, deadline, budget) -> list[tuple[int, float | None]]:
        try:
            values = self._query_batch([exprs[i] for i in indexes], at, deadline, budget)
            return list(zip(indexes, values))
        except QueryRefused:
            if len(indexes) == 1:
                raise
        half = len(indexes) // 2
        return (self._answer(indexes[:half], exprs, at, deadline, budget)
                + self._answer(indexes[half:], exprs, at, deadline, budget))

    def query_vector(self, expr: str, at: float, *, deadline: float | None = None) -> list[dict]:
        """One instant query pinned at `at`; returns Prometheus' result vector."""
        budget = self.deadline_seconds
        data = self._call("/api/v1/query", {"query": expr, "time": f"{at:.3f}"},
                          deadline if deadline is not None else time.monotonic() + budget, budget)
        if data.get("resultType") != "vector" or not isinstance(data.get("result"), list):
            raise SourceUnavailable(f"{self.url} answered a {data.get('resultType')!r}, not an instant vector")
        return data["result"]

    def _query_batch(self, exprs: list[str], at: float, deadline: float, budget: float) -> list[float | None]:
        union = " or ".join(f'label_replace({e}, "{TAG}", "{i}", "", "")' for i, e in enumerate(exprs))
        values: list[float | None] = [None] * len(exprs)
        data = self._call("/api/v1/query", {"query": union, "time": f"{at:.3f}"}, deadline, budget)
        result = data.get("result")
        if data.get("resultType") != "vector" or not isinstance(result, list):
            raise SourceUnavailable(f"{self.url} answered a {data.get('resultType')!r}, not an instant vector")
        seen = [0] * len(exprs)
        for index, value in self._samples(result):
            seen[index] += 1
            values[index] = self._finite(exprs[index], value)
        for index, count in enumerate(seen):
            if count > 1:
                raise ManySeries(exprs[index], count, self.url)
        return values

    def query_grouped(self, exprs: Sequence[str], at: float, labels: Sequence[str], *,
                      finite: bool = True) -> list[dict[tuple, float | None]]:
        """Per expression, its series by the values of `labels` (an SLO with a grouping: one SLI
        per group, by design; the recorded series of many SLOs, by service and slo); two series of
        one group are refused like two series of one query. `finite=False` hands NaN and +/-Inf
        back as they are (a recorded ratio is NaN over a window without valid events)."""
        if not exprs:
            return []
        budget = self.deadline_seconds
        deadline = time.monotonic() + budget
        out: list[dict[tuple, float | None]] = [{} for _ in exprs]
        for start in range(0, len(exprs), BATCH_SIZE):
            indexes = list(range(start, min(start + BATCH_SIZE, len(exprs))))
            for index, series in self._grouped_answer(indexes, exprs, at, labels, finite, deadline, budget):
                out[index] = series
        return out

    def _grouped_answer(self, indexes, exprs, at, labels, finite, deadline, budget
                        ) -> list[tuple[int, dict[tuple, float | None]]]:
        """One union of grouped queries; one the server refuses for its size (the fleet's 28-day
        sums come near --query.max-samples) is split and retried in halves down to single queries,
        as `query_many` does."""
        try:
            return self._grouped_batch(indexes, exprs, at, labels, finite, deadline, budget)
        except QueryRefused:
            if len(indexes) == 1:
                raise
        half = len(indexes) // 2
        return (self._grouped_answer(indexes[:half], exprs, at, labels, finite, deadline, budget)
                + self._grouped_answer(indexes[half:], exprs, at, labels, finite, deadline, budget))

    def _grouped_batch(self, indexes, exprs, at, labels, finite, deadline, budget
                       ) -> list[tuple[int, dict[tuple, float | None]]]:
        batch = [exprs[i] for i in indexes]
        union = " or ".join(f'label_replace({e}, "{TAG}", "{i}", "", "")' for i, e in enumerate(batch))
        data = self._call("/api/v1/query", {"query": union, "time": f"{at:.3f}"}, deadline, budget)
        result = data.get("result")
        if data.get("resultType") != "vector" or not isinstance(result, list):
            raise SourceUnavailable(f"{self.url} answered a {data.get('resultType')!r}, not an instant vector")
        found: list[dict[tuple, float | None]] = [{} for _ in batch]
        for sample in result:
            [(index, value)] = self._samples([sample])
            key = tuple(str(sample["metric"].get(label, "")) for label in labels)
            if key in found[index]:
                raise ManySeries(batch[index] + f" (group {key})", 2, self.url)
            found[index][key] = self._finite(batch[index], value) if finite else value
        return list(zip(indexes, found))

    def points_held(self, exprs: Sequence[str], start: float, end: float, step: int) -> list[int]:
        """Per expression, at how many of the instants start, start + step, ... end it answered a
        series: one range query for all of them (`slo alerts` asks where an alert's condition held)."""
        if not exprs:
            return []
        budget = self.deadline_seconds
        union = " or ".join(f'label_replace({e}, "{TAG}", "{i}", "", "")' for i, e in enumerate(exprs))
        data = self._call("/api/v1/query_range", {"query": union, "start": f"{start:.3f}", "end": f"{end:.3f}",
                                                  "step": f"{step}"}, time.monotonic() + budget, budget)
        result = data.get("result")
        if data.get("resultType") != "matrix" or not isinstance(result, list):
            raise SourceUnavailable(f"{self.url} answered a {data.get('resultType')!r}, not a range matrix")
        out = [0] * len(exprs)
        try:
            for series in result:
                out[int(series["metric"][TAG])] += len(series["values"])
        except (KeyError, IndexError, TypeError, ValueError):
            raise SourceUnavailable(f"unexpected answer from {self.url}: a series opsctl cannot read") from None
        return out

    def _samples(self, result) -> list[tuple[int, float]]:
        out = []
        for sample in result:
            try:
                out.append((int(sample.get("metric", {})[TAG]), float(sample["value"][1])))
            except (KeyError, IndexError, TypeError, ValueError, AttributeError):
                raise SourceUnavailable(f"unexpected answer from {self.url}: a sample opsctl cannot read") from None
        return out

    def _finite(self, expr: str, value: float) -> float | None:
        """NaN and +/-Inf are no number of events or ratio: no data, with the reason kept."""
        if math.isfinite(value):
            return value
        short = expr if len(expr) <= 160 else expr[:157] + "..."
        self._note(self.problems, f"Prometheus at {self.url} answered {_spell(value)} for {short}: counted as no data")
        return None


def _spell(value: float) -> str:
    return "NaN" if math.isnan(value) else ("+Inf" if value > 0 else "-Inf")


def _cause(exc: Exception) -> str:
    text = str(exc)
    for marker in ("Connection refused", "Name or service not known", "timed out", "No route to host",
                   "certificate verify failed"):
        if marker in text:
            return marker.lower()
    return (text.split(":")[-1].strip() or type(exc).__name__)[:200]
