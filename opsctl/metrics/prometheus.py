"""Prometheus and anything that speaks its HTTP API (Thanos, Mimir, VictoriaMetrics).

prometheus-api-client retries connection errors with backoff on every query, so with Prometheus
down a report would hang for minutes. Here: one probe that fails fast, no automatic retries,
a per-request timeout, a deadline for the whole batch, bounded concurrency, and every query of a
report pinned to one evaluation instant.

A report asks `sum(increase(SELECTOR[w]))` for many SLOs that differ only in label matchers on a
few metrics. Those are answered with one `sum by (every label any matcher names) (increase(m[w]))`
per metric and window, and each selector is then summed locally over the groups its matchers
select: the same per-series increase() and the same sum, so the same numbers, in a few queries
whatever the number of SLOs. Regex matchers run in Python's `re` (fully anchored, like
Prometheus); exotic RE2-only syntax would differ. Any other query is sent as part of a union
(`q1 or q2 ...`, each tagged with a label).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Sequence

from opsctl.config import PrometheusSource as Settings
from opsctl.errors import NoDataError, SourceUnavailable, UsageError
from opsctl.metrics.promql import RangeQuery, parse_range_query

TAG = "opsctl_query"
BATCH_SIZE = 60


class PrometheusSource:
    def __init__(self, settings: Settings):
        self.settings = settings
        self.url = settings.url.rstrip("/")
        self.description = f"Prometheus at {self.url}"
        self._client = None

    @property
    def client(self):
        if self._client is None:
            from prometheus_api_client import PrometheusConnect
            from urllib3.util.retry import Retry

            auth, headers = None, {}
            a = self.settings.auth
            if a.bearer_token:
                headers["Authorization"] = f"Bearer {a.bearer_token.resolve()}"
            elif a.username:
                auth = (a.username, a.password.resolve())
            self._client = PrometheusConnect(
                url=self.url,
                headers=headers or None,
                auth=auth,
                disable_ssl=not self.settings.verify_tls,
                retry=Retry(total=0, connect=0, read=0, redirect=2, status=0),
                timeout=self.settings.timeout,
                method="POST",
            )
        return self._client

    def check(self) -> None:
        """One fast probe, so a dead Prometheus costs one timeout, not minutes of retries."""
        import requests

        timeout = min(self.settings.timeout, 5.0)
        try:
            response = self.client._session.get(
                f"{self.url}/api/v1/status/buildinfo",
                headers=self.client.headers,
                auth=self.client.auth,
                timeout=timeout,
            )
        except requests.RequestException as exc:
            raise self._unavailable(exc, timeout) from exc
        if response.status_code in (401, 403):
            raise UsageError(
                f"Prometheus at {self.url} refused the credentials (HTTP {response.status_code})",
                hint="set metrics.prometheus.auth (bearer_token or username/password) from env or a file",
            )
        if response.status_code == 404:
            return  # some PromQL-compatible servers lack buildinfo; queries will tell
        if response.status_code >= 400:
            raise SourceUnavailable(f"Prometheus at {self.url} answered HTTP {response.status_code}")

    def default_time(self) -> float:
        return time.time()

    def query_many(self, exprs: Sequence[str], at: float) -> list[float | None]:
        if not exprs:
            return []
        results: list[float | None] = [None] * len(exprs)
        grouped: dict[tuple, list[tuple[int, RangeQuery]]] = {}
        others: list[int] = []
        for index, expr in enumerate(exprs):
            query = _groupable(expr)
            if query is None:
                others.append(index)
            else:
                key = (query.function, query.selector.metric, query.window)
                grouped.setdefault(key, []).append((index, query))

        tasks = [(self._answer_group, key, members) for key, members in grouped.items()]
        tasks += [(self._answer_union, None, others[i:i + BATCH_SIZE]) for i in range(0, len(others), BATCH_SIZE)]
        answers = self._run_all(tasks, exprs, at)
        for answer in answers:
            for index, value in answer:
                results[index] = value
        return results

    def _run_all(self, tasks, exprs, at) -> list[list[tuple[int, float | None]]]:
        """Run the round trips with bounded concurrency under the report deadline."""
        pool = ThreadPoolExecutor(max_workers=max(1, min(self.settings.max_concurrency, len(tasks))))
        try:
            futures = [pool.submit(fn, key, members, exprs, at) for fn, key, members in tasks]
            done, pending = wait(futures, timeout=self.settings.report_deadline)
            if pending:
                raise SourceUnavailable(
                    f"{self.url} did not answer {len(exprs)} queries within the report deadline "
                    f"of {self.settings.report_deadline:g}s",
                    hint="raise metrics.prometheus.report_deadline, or check the server's load",
                )
            return [f.result() for f in futures]
        finally:
            pool.shutdown(wait=False, cancel_futures=True)

    def _answer_group(self, key, members, exprs, at) -> list[tuple[int, float | None]]:
        function, metric, window = key
        labels = sorted({m.label for _, q in members for m in q.selector.matchers})
        expr = f"sum by ({', '.join(labels)}) ({function}({metric}[{window}s]))"
        groups = [(sample.get("metric", {}), float(sample["value"][1])) for sample in self.query_union(expr, at)]
        out = []
        for index, query in members:
            matched = [value for group_labels, value in groups if query.selector.label_matches(group_labels)]
            out.append((index, sum(matched) if matched else None))
        return out

    def _answer_union(self, _key, indexes, exprs, at) -> list[tuple[int, float | None]]:
        values = self._query_batch([exprs[i] for i in indexes], at)
        return list(zip(indexes, values))

    def query_union(self, expr: str, at: float) -> list[dict]:
        """One instant query pinned at `at`; returns Prometheus' result vector."""
        import requests
        from prometheus_api_client import PrometheusApiClientException

        try:
            return self.client.custom_query(expr, params={"time": f"{at:.3f}"})
        except requests.RequestException as exc:
            raise self._unavailable(exc, self.settings.timeout) from exc
        except PrometheusApiClientException as exc:
            text = str(exc)
            if "HTTP Status Code 400" in text or "HTTP Status Code 422" in text:
                raise UsageError(f"Prometheus rejected the query: {text[:300]}") from exc
            if "HTTP Status Code 401" in text or "HTTP Status Code 403" in text:
                raise UsageError(f"Prometheus refused the credentials: {text[:120]}") from exc
            raise SourceUnavailable(f"Prometheus at {self.url} failed: {text[:300]}") from exc

    def _unavailable(self, exc: Exception, timeout: float) -> SourceUnavailable:
        hint = "check --prometheus-url / metrics.prometheus.url and that the server is up"
        if "timed out" in str(exc).lower() or isinstance(exc, TimeoutError):
            return SourceUnavailable(
                f"Prometheus at {self.url} did not answer within {timeout:g}s",
                hint="a slow server: raise metrics.prometheus.timeout, or check its load",
            )
        return SourceUnavailable(f"cannot reach Prometheus at {self.url}: {_cause(exc)}", hint=hint)

    def _query_batch(self, exprs: list[str], at: float) -> list[float | None]:
        union = " or ".join(f'label_replace({e}, "{TAG}", "{i}", "", "")' for i, e in enumerate(exprs))
        values: list[float | None] = [None] * len(exprs)
        for sample in self.query_union(union, at):
            index = sample.get("metric", {}).get(TAG)
            if index is None:
                raise NoDataError(f"unexpected answer from {self.url}: a series without the {TAG} label")
            values[int(index)] = float(sample["value"][1])
        return values


def _groupable(expr: str) -> RangeQuery | None:
    """A `sum(increase|rate(sel[Ns]))` whose matchers name only ordinary labels, else None."""
    try:
        query = parse_range_query(expr)
    except UsageError:
        return None
    if not query.summed or any(m.label.startswith("__") for m in query.selector.matchers):
        return None
    return query


def _cause(exc: Exception) -> str:
    text = str(exc)
    for marker in ("Connection refused", "Name or service not known", "timed out", "No route to host"):
        if marker in text:
            return marker.lower()
    return text.split(":")[-1].strip()[:200] or type(exc).__name__
