"""`opsctl metrics ingest|info`: load client-side metrics into the embedded store, and look at it."""

from __future__ import annotations

import click

from opsctl.cli.output import emit, output_option, render_table
from opsctl.cli.params import choice


@click.group()
def metrics():
    """Load the LLM proxy's client-side metrics into the embedded store.

    \b
    Examples:
      opsctl metrics ingest proxy-requests.jsonl
      opsctl metrics ingest backfill.om --format openmetrics --replace
      opsctl metrics info -o json
    """


@metrics.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--format", "fmt", type=choice(["openmetrics", "jsonl"]),
              help="File format (default: detected from the first line).")
@click.option("--replace", is_flag=True,
              help="Overwrite the steps the file covers instead of adding to them.")
@click.option("--dry-run", is_flag=True, help="Validate and summarise, but write nothing.")
@output_option
@click.pass_obj
def ingest(app, file, fmt, replace, dry_run, output):
    """Validate FILE completely, then add its counts to the embedded store.

    \b
    FILE is either
      OpenMetrics text: cumulative counters llm_proxy_requests_total{backend,outcome},
        llm_proxy_request_duration_seconds_bucket{backend,le} / _count / _sum,
        llm_proxy_prompt_tokens_total{backend}, llm_proxy_completion_tokens_total{backend},
        with timestamps in seconds (a series' first sample is its baseline), or
      a JSONL request log of the proxy, one request a line:
        {"ts": "2026-11-20T14:00:03.2Z", "backend": "databricks", "status": 200,
         "latency_ms": 182, "prompt_tokens": 431, "completion_tokens": 210}

    Counts land in the 10-second step ending at or after their time. Any malformed line or
    unknown backend fails with exit 2 (file and line named) and writes nothing.
    """
    from opsctl.metrics.ingest import load_file, write_ingested

    cfg = app.config
    ingested = load_file(file, cfg.backends, fmt)
    mode = "replace" if replace else "add"
    if not dry_run:
        from opsctl.metrics.embedded import EmbeddedStore

        store = EmbeddedStore.open(cfg.state_path / "metrics.sqlite", create=True)
        try:
            write_ingested(store, ingested, mode=mode)
        finally:
            store.close()
    emit(ingested.summary(written=not dry_run, mode=mode), output, table=_ingest_table)


def _ingest_table(summary: dict) -> str:
    verb = {"add": "added", "replace": "replaced"}[summary["mode"]] if summary["written"] else "dry run, not written"
    lines = [f"{summary['file']} ({summary['format']}, {summary['lines']:,} lines): {verb}",
             f"time range: {summary['start']} .. {summary['end']}"]
    if summary["skipped_samples"]:
        lines.append(f"skipped {summary['skipped_samples']:,} samples of other metrics")
    rows = [[b["backend"], f"{b['steps']:,}", f"{b['requests']:,}", b["start"], b["end"]] for b in summary["backends"]]
    return "\n".join(lines + ["", render_table(["backend", "steps", "requests", "start", "end"], rows)])


@metrics.command()
@output_option
@click.pass_obj
def info(app, output):
    """What the embedded store holds: backends, time range, steps, requests. Exit 3 when empty."""
    from opsctl.metrics.embedded import EmbeddedStore
    from opsctl.metrics.ingest import describe_store

    store = EmbeddedStore.open(app.config.state_path / "metrics.sqlite", create=False)
    try:
        data = describe_store(store)
    finally:
        store.close()
    emit(data, output, table=_info_table)


def _info_table(data: dict) -> str:
    rows = [[b["backend"], f"{b['steps']:,}", b["start"], b["end"], f"{b['requests']:,}"] for b in data["backends"]]
    return "\n".join([f"{data['store']}: {data['start']} .. {data['end']}", "",
                      render_table(["backend", "steps", "start", "end", "requests"], rows)])
