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
      opsctl metrics ingest proxy-part2.jsonl --add        # a log split inside a 10-second step
      opsctl metrics info -o json
    """


@metrics.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--format", "fmt", type=choice(["openmetrics", "jsonl"]),
              help="File format (default: detected from the first line).")
@click.option("--replace", is_flag=True,
              help="Overwrite the steps the file covers with the file's counts.")
@click.option("--add", "add", is_flag=True,
              help="Add the file's counts to the steps already stored (not idempotent: only for a log "
                   "split inside a 10-second step).")
@click.option("--dry-run", is_flag=True, help="Validate and summarise, but write nothing.")
@output_option
@click.pass_obj
def ingest(app, file, fmt, replace, add, dry_run, output):
    """Validate FILE completely, then write the steps the embedded store does not hold yet.

    \b
    FILE is either
      OpenMetrics text: cumulative counters llm_proxy_requests_total{backend,outcome},
        llm_proxy_request_duration_seconds_bucket{backend,le} / _count / _sum,
        llm_proxy_prompt_tokens_total{backend}, llm_proxy_completion_tokens_total{backend},
        llm_proxy_suggestions_total{backend},
        with timestamps in seconds (a series' first sample is its baseline), or
      a JSONL request log of the proxy, one request a line:
        {"ts": "2026-11-20T14:00:03.2Z", "backend": "databricks", "status": 200,
         "latency_ms": 182, "prompt_tokens": 431, "completion_tokens": 210, "suggestions": 3}

    Counts land in the 10-second step ending at or after their time. Every problem of every
    line is listed (file and line named) with exit 2, and nothing is written.

    Idempotent: a step already stored with the same counts is left as it is (ingesting a file
    twice, or a retried cron job, changes nothing); a step stored with other counts is a
    conflict (exit 5, nothing written) unless --replace or --add says what to do.
    """
    from opsctl.errors import UsageError
    from opsctl.metrics.ingest import load_file, plan_merge, write_ingested

    if replace and add:
        raise UsageError("--replace and --add exclude each other")
    cfg = app.config
    ingested = load_file(file, cfg.backends, fmt)
    mode = "replace" if replace else "add" if add else "merge"
    merge = None
    path = cfg.state_path / "metrics.sqlite"
    if not dry_run or (mode == "merge" and path.exists()):
        from opsctl.metrics.embedded import EmbeddedStore
        from opsctl.statefile import locked

        # One ingest at a time: two retries of one file must not both find its steps missing.
        with locked(path, timeout=120):
            store = EmbeddedStore.open(path, create=True)
            try:
                if mode == "merge":
                    merge = plan_merge(store, ingested)
                if not dry_run:
                    write_ingested(store, ingested, mode=mode, merge=merge)
            finally:
                store.close()
    summary = ingested.summary(written=not dry_run, mode=mode, merge=merge)
    if merge is not None and merge.unchanged:
        click.echo(f"warning: {merge.unchanged:,} step(s) already stored with the same counts were left as they are"
                   + ("; nothing new to write" if not merge.new else ""), err=True)
    emit(summary, output, table=_ingest_table)


def _ingest_table(summary: dict) -> str:
    verbs = {"add": "added", "replace": "replaced", "merge": "merged"}
    verb = verbs[summary["mode"]] if summary["written"] else "dry run, not written"
    if summary["mode"] == "merge" and summary["new_steps"] is not None:
        verb += f" ({summary['new_steps']:,} new steps, {summary['unchanged_steps']:,} already stored)"
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
