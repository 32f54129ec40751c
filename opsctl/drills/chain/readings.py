"""What a chain drill asks its components and how it reads their answers: the PromQL of the
faulted backend (the service's matchers on it), the metrics text of Alertmanager and serve, the
RFC 3339 times of the APIs, Prometheus' own firing instant, and the short forms the hops' evidence
quotes."""

from __future__ import annotations

import re
import time

def _selector(metric: str, *matchers: str) -> str:
    return f"{metric}{{{','.join(m for m in matchers if m)}}}"


def recorded_service_matcher(cfg) -> str:
    """`service="<service>"` on the recorded SLO series (they always carry it, slo/rules.py), when the
    config matches its service at all (Config.service_matcher); "" otherwise."""
    from opsctl.slo.conventions import LABEL_SERVICE

    if not cfg.service_matcher:
        return ""
    value = cfg.service.replace("\\", "\\\\").replace('"', '\\"')
    return f'{LABEL_SERVICE}="{value}"'


def burn_query(record: str, backend: str, recorded_scope: str = "") -> str:
    """One recorded SLO series of the faulted backend (the 1h burn read while waiting for a page)."""
    return _selector(record, f'backend="{backend}"', recorded_scope)


def outcomes_query(backend: str, span: int, scope: str = "") -> str:
    """The backend's requests by outcome over the drill (live chain drill); `scope`: the service matcher."""
    from opsctl.metrics.schema import REQUESTS

    selector = _selector(REQUESTS, scope, f'backend="{backend}"')
    return f"sum by (outcome) (increase({selector}[{span}s]))"


BURN_RECORDS = ("slo:sli_error:ratio_rate1h", "slo:error_budget:ratio")


def parse_metrics(text: str) -> dict[str, float]:
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            try:
                samples[name] = float(value)
            except ValueError:
                continue
    return samples


def _sum(samples: dict[str, float], prefix: str, *must: str) -> float:
    return sum(v for k, v in samples.items() if k.startswith(prefix) and all(m in k for m in must))


def _rfc3339(text: str | None) -> float | None:
    from datetime import datetime

    if not text:
        return None
    text = re.sub(r"(\.\d{6})\d+", r"\1", text.replace("Z", "+00:00"))
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None



def _incident_backend(incident: dict) -> str | None:
    """The backend an incident's page was for (the receiver's `details.backend`), None when not said."""
    backend = (incident.get("details") or {}).get("backend")
    return backend or None


def _fired_at(active: float | None, rule: dict, group: dict) -> float:
    """When Prometheus turned the alert firing: the first evaluation at least `for:` after it went
    pending (evaluations come every group interval from activeAt), never after the last evaluation
    seen. Polling the API only tells that it fires by now; this is Prometheus' own instant."""
    import math

    last = _rfc3339(rule.get("lastEvaluation")) or time.time()
    if active is None:
        return last
    interval = float(group.get("interval") or 0)
    hold = float(rule.get("duration") or 0)
    steps = math.ceil(hold / interval - 1e-9) if interval > 0 else 0
    return min(active + steps * interval, last)


def _clock(ts: float) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(ts)) + f".{int(ts * 1000) % 1000:03d}"


def _value(alert: dict) -> str:
    value = alert.get("value")
    if value is None:
        return "?"
    try:
        return f"{float(value):.4g}"
    except (TypeError, ValueError):
        return "?"


def _for(rule: dict) -> str:
    seconds = rule.get("duration")
    return "-" if seconds is None else f"{int(seconds)}s"


def _split(split) -> str:
    if not split:
        return "unset"
    weights = split.get("weights", split) if isinstance(split, dict) else split
    return " ".join(f"{k}={v}" for k, v in weights.items()) if isinstance(weights, dict) else str(weights)
