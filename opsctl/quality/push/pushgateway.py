"""Probe figures to a Prometheus Pushgateway: text exposition format, HTTP PUT to the group.

PUT replaces every metric of the grouping key (`/metrics/job/<job>/service/<service>`), so a
probe that no longer reports a figure does not leave a stale one behind. Timestamps are not sent:
the Pushgateway rejects them; it records its own push time.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence
from urllib.parse import quote

from opsctl.errors import OpsctlError
from opsctl.quality.names import HELP
from opsctl.quality.push.base import Sample


def exposition(samples: Sequence[Sample]) -> str:
    """Prometheus text format 0.0.4, gauges grouped by name with HELP and TYPE lines."""
    by_name: dict[str, list[Sample]] = {}
    for sample in samples:
        by_name.setdefault(sample.name, []).append(sample)
    lines = []
    for name in sorted(by_name):
        if name in HELP:
            lines.append(f"# HELP {name} {_escape_help(HELP[name])}")
        lines.append(f"# TYPE {name} gauge")
        for sample in by_name[name]:
            labels = ",".join(f'{k}="{_escape_label(v)}"' for k, v in sorted(sample.labels.items()))
            lines.append(f"{name}{{{labels}}} {_number(sample.value)}" if labels else f"{name} {_number(sample.value)}")
    return "\n".join(lines) + "\n"


def _escape_label(value: str) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


class PushgatewaySink:
    def __init__(self, url: str, *, job: str, grouping: Mapping[str, str] | None = None, timeout: float = 10.0,
                 connect=None):
        path = f"/metrics/job/{quote(job, safe='')}"
        for key, value in (grouping or {}).items():
            path += f"/{quote(key, safe='')}/{quote(value, safe='')}"
        self.url = url.rstrip("/") + path
        self.timeout = timeout
        self.connect = connect  # remote.http_call's transport seam (None: a TCP connection)
        self.description = f"Pushgateway {self.url}"

    def push(self, samples: Sequence[Sample], at: float) -> None:
        import time

        from opsctl.remote import DeadlineExceeded, http_call

        body = exposition(samples).encode()
        try:
            response = http_call("PUT", self.url, body=body, deadline=time.monotonic() + self.timeout,
                                 connect_timeout=self.timeout, connect=self.connect,
                                 headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"})
        except DeadlineExceeded as exc:
            raise OpsctlError(f"the Pushgateway at {self.url} did not answer within {self.timeout:g}s",
                              hint="check quality.push.pushgateway_url or --pushgateway-url") from exc
        except OSError as exc:
            raise OpsctlError(f"cannot push to {self.url}: {type(exc).__name__}",
                              hint="check quality.push.pushgateway_url or --pushgateway-url") from exc
        if response.status not in (200, 202):
            text = response.body.decode("utf-8", errors="replace")
            raise OpsctlError(f"the Pushgateway at {self.url} refused the push (HTTP {response.status}: "
                              f"{' '.join(text.split())[:200]})")
