"""The simulator's incidents: the faults it injects (one class per kind), the per-step parameters
they change, and the parser of `--incident KIND@START+DURATION[:key=value,...]`. Split from
opsctl.metrics.simulator, which re-exports it."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, Mapping

from opsctl.errors import UsageError

if TYPE_CHECKING:  # numpy is imported inside the functions that use it (start-up stays light)
    import numpy as np


@dataclass(frozen=True)
class _StepParams:
    """Per-step outcome shares and latency shift of one backend (numpy arrays, mutable contents)."""

    client_error: "np.ndarray"
    throttled: "np.ndarray"
    server_error: "np.ndarray"
    timeout: "np.ndarray"
    log_shift: "np.ndarray"  # added to the log-median latency of answered requests
    prompt_shift: "np.ndarray"  # prompt tokens added to every request (a BOS token dropped: -1)
    changed: "np.ndarray"  # share of answers that differ from the model's usual ones
    suggestions: "np.ndarray"  # suggestions a changed answer holds, relative to an unchanged one
    completion: "np.ndarray"  # completion tokens of a changed answer, relative to an unchanged one
    auth_error: "np.ndarray"  # share of requests the auth layer answers 401/403
    tail_share: "np.ndarray"  # share of answered requests in a slow tail (drills' latency-tail fault)
    tail_shift: "np.ndarray"  # added to the tail's log-median latency, on top of log_shift

    @classmethod
    def fields(cls) -> tuple[str, ...]:
        return tuple(cls.__dataclass_fields__)

    def take(self, index) -> "_StepParams":
        """The parameters of some steps (a slice or mask); a copy when `index` is a mask."""
        return _StepParams(*(getattr(self, f)[index] for f in self.fields()))

    def copy(self) -> "_StepParams":
        return _StepParams(*(getattr(self, f).copy() for f in self.fields()))


def wave_active(elapsed: float, duration: float, on: float = 0.0, off: float = 0.0) -> bool:
    """Whether a fault that began `elapsed` seconds ago and lasts `duration` acts now: inside
    (0, duration], and with waves (`on` and `off` both > 0) inside an on period (0, on] of each
    on + off cycle. The one rule of both drill worlds (the embedded world's simulate() and the
    chain's exporter draw their steps through Incident.window, which is this)."""
    if not 0 < elapsed <= duration:
        return False
    if on > 0 and off > 0:
        return ((elapsed - 1e-9) % (on + off)) < on
    return True


@dataclass(frozen=True)
class Incident:
    """A fault on one backend over [start, end): it touches the steps whose end is in (start, end]."""

    kind: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    backend_kinds: ClassVar[tuple[str, ...]] = ("internal", "vendor")
    default_backend_kind: ClassVar[str] = "vendor"

    backend: str
    start: float
    end: float
    # waves: on for `waves_on` seconds, off for `waves_off`, from `start` (0: always on while it lasts)
    # keyword-only, so a kind's own parameters keep their positions after (backend, start, end)
    waves_on: float = field(default=0.0, kw_only=True)
    waves_off: float = field(default=0.0, kw_only=True)

    def apply(self, params: _StepParams, window: "np.ndarray") -> None:
        raise NotImplementedError

    def options(self) -> dict[str, float]:
        return {}

    def active_at(self, at: float) -> bool:
        """Whether the fault acts on the step ending at `at` (its start, end and waves)."""
        return wave_active(at - self.start, self.end - self.start, self.waves_on, self.waves_off)

    def window(self, timestamps: "np.ndarray") -> "np.ndarray":
        """active_at for every step end in `timestamps` (the mask `apply` changes)."""
        import numpy as np

        elapsed = timestamps.astype(np.float64) - self.start
        inside = (elapsed > 0) & (timestamps <= self.end)
        if self.waves_on > 0 and self.waves_off > 0:
            inside &= ((elapsed - 1e-9) % (self.waves_on + self.waves_off)) < self.waves_on
        return inside

    def spec(self) -> str:
        from opsctl.clock import format_duration, format_rfc3339

        waves = {"waves_on": self.waves_on, "waves_off": self.waves_off} if self.waves_on and self.waves_off else {}
        opts = ",".join([f"backend={self.backend}"] + [f"{k}={v:g}" for k, v in {**self.options(), **waves}.items()])
        return f"{self.kind}@{format_rfc3339(self.start)}+{format_duration(int(self.end - self.start))}:{opts}"

    def to_dict(self) -> dict:
        from opsctl.clock import format_rfc3339

        return {"kind": self.kind, "backend": self.backend, "start": format_rfc3339(self.start),
                "end": format_rfc3339(self.end), **self.options(), "spec": self.spec()}


@dataclass(frozen=True)
class Vendor5xx(Incident):
    kind: ClassVar[str] = "vendor-5xx"
    summary: ClassVar[str] = "a burst of 5xx answers: `rate` of requests get a server error"
    backend_kinds: ClassVar[tuple[str, ...]] = ("vendor",)
    rate: float = 0.2

    def apply(self, params, window):
        import numpy as np

        params.server_error[window] = np.maximum(params.server_error[window], self.rate)

    def options(self):
        return {"rate": self.rate}


@dataclass(frozen=True)
class LatencySpike(Incident):
    kind: ClassVar[str] = "latency-spike"
    summary: ClassVar[str] = "saturation: the latency of answered requests is multiplied by `factor`"
    factor: float = 3.0

    def apply(self, params, window):
        params.log_shift[window] += math.log(self.factor)

    def options(self):
        return {"factor": self.factor}


@dataclass(frozen=True)
class AuthThrottling(Incident):
    kind: ClassVar[str] = "auth-throttling"
    summary: ClassVar[str] = ("the vendor's auth layer answers 429 to `rate` of requests and 401 to `auth_rate`"
                              " of them (an expired or revoked credential)")
    backend_kinds: ClassVar[tuple[str, ...]] = ("vendor",)
    rate: float = 0.3
    auth_rate: float = 0.0

    def apply(self, params, window):
        import numpy as np

        params.throttled[window] = np.maximum(params.throttled[window], self.rate)
        params.auth_error[window] = np.maximum(params.auth_error[window], self.auth_rate)

    def options(self):
        return {"rate": self.rate, **({"auth_rate": self.auth_rate} if self.auth_rate else {})}


@dataclass(frozen=True)
class GpuCapacityLoss(Incident):
    kind: ClassVar[str] = "gpu-capacity-loss"
    summary: ClassVar[str] = ("lost GPU pods: `rate` of requests fail (`timeout_share` of them time out, the "
                              "rest get a 503; default 4/5 and 1/5) and the rest are `factor` times slower")
    backend_kinds: ClassVar[tuple[str, ...]] = ("internal",)
    default_backend_kind: ClassVar[str] = "internal"
    TIMEOUT_SHARE: ClassVar[float] = 0.8
    rate: float = 0.1
    factor: float = 2.0
    timeout_share: float = TIMEOUT_SHARE  # of the failed requests, the share that times out (the rest: 503)

    def apply(self, params, window):
        import numpy as np

        params.timeout[window] = np.maximum(params.timeout[window], self.rate * self.timeout_share)
        params.server_error[window] = np.maximum(params.server_error[window], self.rate * (1 - self.timeout_share))
        params.log_shift[window] += math.log(self.factor)

    def options(self):
        return {"rate": self.rate, "factor": self.factor,
                **({"timeout_share": self.timeout_share} if self.timeout_share != self.TIMEOUT_SHARE else {})}


@dataclass(frozen=True)
class QualityRegression(Incident):
    """A model release that answers differently while every request succeeds (the vendor's tokenizer
    stops prepending the beginning-of-text token): prompt tokens per request shift by `prompt_shift`,
    `rate` of the answers change, and a changed answer holds `suggestions` times the suggestions and
    `completion` times the completion tokens of an unchanged one."""

    kind: ClassVar[str] = "quality-regression"
    summary: ClassVar[str] = ("answers change, nothing fails: prompt tokens per request shift by `prompt_shift`, "
                              "`rate` of answers change and hold `suggestions` x the suggestions")
    prompt_shift: float = -1.0
    rate: float = 0.3
    suggestions: float = 0.5
    completion: float = 1.0

    def apply(self, params, window):
        params.prompt_shift[window] += self.prompt_shift
        params.changed[window] = self.rate
        params.suggestions[window] = self.suggestions
        params.completion[window] = self.completion

    def options(self):
        return {"prompt_shift": self.prompt_shift, "rate": self.rate, "suggestions": self.suggestions,
                "completion": self.completion}


INCIDENT_KINDS: dict[str, type[Incident]] = {
    cls.kind: cls for cls in (Vendor5xx, LatencySpike, AuthThrottling, GpuCapacityLoss, QualityRegression)
}

INCIDENT_SPEC_HELP = """\
\b
Incident SPEC: KIND@START+DURATION[:key=value,...]
  KIND      vendor-5xx         5xx burst: `rate` of requests fail (default 0.2), vendor backend
            latency-spike      saturation: answered requests `factor` times slower (default 3)
            auth-throttling    429s from the vendor's auth layer on `rate` of requests (default 0.3)
                               and 401s on `auth_rate` of them (default 0)
            gpu-capacity-loss  internal backend: `rate` of requests fail (default 0.1), `timeout_share`
                               of them time out (default 0.8) and the rest get 503s, the rest
                               `factor` times slower (default 2)
            quality-regression nothing fails: prompt tokens per request shift by `prompt_shift`
                               (default -1, a dropped BOS token), `rate` of answers change (0.3)
                               and hold `suggestions` x the suggestions (0.5) and `completion`
                               x the completion tokens (1) of an unchanged answer; default: the vendor
  START     RFC 3339 time (2026-11-20T14:00Z) or end-DURATION (before the simulated end)
  DURATION  30s, 5m, 1h30m, 2d; the incident touches the steps ending in (START, START+DURATION]
  waves_on=, waves_off=  seconds: the fault acts in waves (on, then off, from START)
  backend=  the backend hit (default: the vendor backend; the internal one for gpu-capacity-loss)
"""

MAX_INCIDENT_SECONDS = 400 * 86400
_SPEC = re.compile(r"^(?P<kind>[a-z0-9-]+)@(?P<start>.+?)\+(?P<duration>(?:\d+[smhdw])+)(?::(?P<options>.*))?$")


def parse_incident(spec: str, backends: Mapping[str, str], *, end: float | None = None) -> Incident:
    """Parse an incident SPEC (see INCIDENT_SPEC_HELP). `backends` maps names to kinds; `end` resolves
    `end-DURATION` starts. Every problem is a UsageError naming the SPEC and what is wrong."""
    from opsctl.clock import format_rfc3339, parse_duration, parse_rfc3339

    def fail(problem: str) -> UsageError:
        return UsageError(f"incident {spec!r}: {problem}", hint="form: KIND@START+DURATION[:key=value,...], "
                          "e.g. vendor-5xx@2026-11-20T14:00Z+30m:rate=0.2 (see `opsctl sim generate --help`)")

    match = _SPEC.match(spec.strip())
    if not match:
        raise fail("not of the form KIND@START+DURATION[:key=value,...]")
    cls = INCIDENT_KINDS.get(match["kind"])
    if cls is None:
        raise fail(f"unknown kind {match['kind']!r} (known: {', '.join(INCIDENT_KINDS)})")
    start_text = match["start"]
    try:
        if start_text.startswith("end-"):
            if end is None:
                raise fail("a start relative to the end (end-DURATION) needs a simulated end")
            start = float(end) - parse_duration(start_text[4:])
        else:
            start = parse_rfc3339(start_text, require_zone=True)
    except ValueError as exc:
        raise fail(f"start {start_text!r} is neither an RFC 3339 time nor end-DURATION ({exc})")
    duration = parse_duration(match["duration"])
    if not 0 < duration <= MAX_INCIDENT_SECONDS:
        raise fail("the duration must be positive and at most 400d (the longest simulated range)")
    try:  # a time a date cannot hold (e.g. 0001-01-01T00:00+14:00 is in year 0 UTC)
        format_rfc3339(start), format_rfc3339(start + duration)
    except (OverflowError, OSError, ValueError):
        raise fail(f"start {start_text!r} is out of range (years 1 to 9999 UTC)") from None

    allowed = ["backend"] + [f.name for f in cls.__dataclass_fields__.values() if f.name not in ("backend", "start", "end")]
    options: dict[str, str] = {}
    for item in filter(None, (match["options"] or "").split(",")):
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key or not value.strip():
            raise fail(f"option {item!r} is not key=value")
        if key not in allowed:
            raise fail(f"unknown option {key!r} for {cls.kind} (allowed: {', '.join(allowed)})")
        if key in options:
            raise fail(f"option {key!r} given twice")
        options[key] = value.strip()

    backend = options.pop("backend", None)
    if backend is None:
        candidates = [n for n, k in backends.items() if k == cls.default_backend_kind]
        if len(candidates) != 1:
            raise fail(f"name the backend with backend=NAME ({len(candidates)} {cls.default_backend_kind} "
                       f"backends configured: {', '.join(candidates) or 'none'})")
        backend = candidates[0]
    if backend not in backends:
        raise fail(f"unknown backend {backend!r} (known: {', '.join(sorted(backends))})")
    if backends[backend] not in cls.backend_kinds:
        raise fail(f"{cls.kind} applies to {' or '.join(cls.backend_kinds)} backends; "
                   f"{backend!r} is {backends[backend]}")

    values: dict[str, float] = {}
    for key, text in options.items():
        try:
            number = float(text)
        except ValueError:
            raise fail(f"{key}={text!r} is not a number")
        if key == "rate" and not 0 < number <= 1:
            raise fail(f"rate={text} must be in (0, 1]: a share of requests")
        if key in ("timeout_share",) and not 0 <= number <= 1:
            raise fail(f"{key}={text} must be in [0, 1]: a share of the failed requests")
        if key in ("waves_on", "waves_off") and not 0 <= number <= MAX_INCIDENT_SECONDS:
            raise fail(f"{key}={text} must be seconds between 0 and 400d")
        if key == "factor" and not 1 <= number <= 100:
            raise fail(f"factor={text} must be between 1 and 100")
        if key == "prompt_shift" and not (-100 <= number <= 100 and number == int(number)):
            raise fail(f"prompt_shift={text} must be a whole number of tokens between -100 and 100")
        if key in ("suggestions", "completion") and not 0 <= number <= 10:
            raise fail(f"{key}={text} must be between 0 and 10: relative to an unchanged answer")
        values[key] = number
    return cls(backend=backend, start=start, end=start + duration, **values)
