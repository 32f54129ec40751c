"""The simulator's OpenMetrics export: simulated steps as cumulative OpenMetrics text for
`promtool tsdb create-blocks-from openmetrics`. Split from opsctl.metrics.simulator, which
re-exports it."""

from __future__ import annotations

import os
from typing import IO, TYPE_CHECKING, Callable, Iterable, Mapping

from opsctl.metrics import schema

if TYPE_CHECKING:
    from opsctl.metrics.sim_series import SimSeries

STEP = schema.STEP_SECONDS


def _columns(metric: str) -> dict[tuple[tuple[str, str], ...], str]:
    """The store columns of one of the exported metrics (each of _FAMILY_SAMPLES has some)."""
    columns = schema.series_columns(metric)
    assert columns is not None, metric
    return columns


def _labels(pairs: Iterable[tuple[str, str]]) -> str:
    def escape(v: str) -> str:
        return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')

    body = ",".join(f'{k}="{escape(v)}"' for k, v in pairs)
    return "{" + body + "}" if body else ""


_FAMILIES = (
    # family name, type, help, sample name, column per own labels
    (schema.REQUESTS.removesuffix("_total"), "counter", "Requests the LLM proxy sent, by backend and outcome."),
    (schema.DURATION, "histogram", "Client-side latency of every request, in seconds."),
    (schema.PROMPT_TOKENS.removesuffix("_total"), "counter", "Prompt tokens sent."),
    (schema.COMPLETION_TOKENS.removesuffix("_total"), "counter", "Completion tokens received."),
    (schema.SUGGESTIONS.removesuffix("_total"), "counter", "Suggestions parsed from answered requests."),
    (schema.PROBES.removesuffix("_total"), "counter", "Synthetic probes the LLM proxy sent to each backend, by outcome."),
)
_FAMILY_SAMPLES = {
    schema.REQUESTS.removesuffix("_total"): (schema.REQUESTS,),
    schema.DURATION: (schema.DURATION_BUCKET, schema.DURATION_COUNT, schema.DURATION_SUM),
    schema.PROMPT_TOKENS.removesuffix("_total"): (schema.PROMPT_TOKENS,),
    schema.COMPLETION_TOKENS.removesuffix("_total"): (schema.COMPLETION_TOKENS,),
    schema.SUGGESTIONS.removesuffix("_total"): (schema.SUGGESTIONS,),
    schema.PROBES.removesuffix("_total"): (schema.PROBES,),
}


def export_openmetrics(series: Mapping[str, SimSeries], out: "str | IO[str]",
                       progress: "Callable[[int, int, int], None] | None" = None,
                       labels: Mapping[str, str] | None = None) -> int:
    """Write the series as OpenMetrics text for `promtool tsdb create-blocks-from openmetrics`.

    Counters are cumulative, timestamps in seconds; each series starts with an explicit 0 one step
    before its first step, so `increase()` counts the first step without extrapolating. Returns
    the number of samples written. `progress(samples written, samples in all, bytes written)` is
    called after each series (a month at production rates is hundreds of MB). `labels` (the
    service's, Config.service_labels) go on every series, as the proxy's own metrics carry them.
    """
    import numpy as np

    if isinstance(out, (str, os.PathLike)):
        from pathlib import Path

        from opsctl.statefile import atomic_file

        with atomic_file(Path(out), mode=0o666) as handle:  # the umask applies, as for open()
            return export_openmetrics(series, handle, progress, labels)

    total = sum((len(s) + 1) * len(_columns(metric))
                for family, _, _ in _FAMILIES for metric in _FAMILY_SAMPLES[family] for s in series.values() if len(s))
    constant = tuple((labels or {}).items())
    written = 0  # the text is ASCII: characters are bytes
    samples = 0
    for family, kind, help_text in _FAMILIES:
        header = f"# TYPE {family} {kind}\n# HELP {family} {help_text}\n"
        out.write(header)
        written += len(header)
        for metric in _FAMILY_SAMPLES[family]:
            for name, s in series.items():
                if not len(s):
                    continue
                times = [str(int(t)) for t in np.concatenate(([s.timestamps[0] - STEP], s.timestamps)).tolist()]
                for own_labels, column in _columns(metric).items():
                    text_labels = _labels(constant + (("backend", name),) + own_labels)
                    cumulative = np.concatenate(([0], np.cumsum(s.columns[column])))
                    values = cumulative.tolist()
                    if column == "lat_sum":
                        text = [repr(float(v)) for v in values]
                    else:
                        text = [str(int(v)) for v in values]
                    prefix = f"{metric}{text_labels} "
                    chunk = "".join(f"{prefix}{v} {t}\n" for v, t in zip(text, times))
                    out.write(chunk)
                    written += len(chunk)
                    samples += len(values)
                    if progress:
                        progress(samples, total, written)
    out.write("# EOF\n")
    if progress:
        progress(samples, total, written + len("# EOF\n"))
    return samples
