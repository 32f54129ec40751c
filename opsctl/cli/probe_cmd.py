"""`opsctl probe consistency`: golden-set consistency between backends."""

from __future__ import annotations

import click

from opsctl.cli import complete
from opsctl.cli.output import emit, output_option, render_table
from opsctl.cli.params import choice

MAX_LISTED = 10


@click.group()
def probe():
    """Probe the backends' OpenAI-compatible APIs with a golden set.

    \b
    Examples:
      opsctl probe consistency --golden golden.jsonl
      opsctl probe consistency --golden golden.jsonl --backend internal --backend databricks -o json
      opsctl probe consistency --golden golden.jsonl --push                # figures for an SLO / alert
      opsctl probe consistency --golden golden.jsonl --repeat 5            # noise floor: self-agreement
      opsctl probe consistency --golden golden.jsonl --push --push-to pushgateway \\
          --pushgateway-url http://pushgateway:9091
    """


@probe.command()
@click.option("--golden", "golden_path", required=True, type=click.Path(dir_okay=False),
              help='JSONL, one case a line: {"id": "c1", "prompt": "...", "expected": "...", "prompt_tokens": 12}.')
@click.option("--backend", "backends", multiple=True, metavar="NAME", shell_complete=complete.backends,
              help="Backend to probe (repeatable; default: every backend with an endpoint).")
@click.option("--repeat", type=click.IntRange(1, 20), default=1, show_default=True,
              help="Send the golden set N times to each backend: its self-agreement is the noise floor, and "
                   "backends are compared over every pair of runs.")
@click.option("--push", is_flag=True, help="Write the figures as gauges (target: quality.push.target).")
@click.option("--push-to", type=choice(["embedded", "pushgateway"]), help="Override quality.push.target.")
@click.option("--pushgateway-url", metavar="URL", help="Override quality.push.pushgateway_url.")
@click.option("--dry-run", is_flag=True, help="With --push: show what would be pushed, write nothing.")
@output_option
@click.pass_obj
def consistency(app, golden_path, backends, repeat, push, push_to, pushgateway_url, dry_run, output):
    """Send the golden prompts to each backend and compare the answers.

    Per backend: exact-match rate against the golden answers, latency percentiles, prompt-token
    counts (usage.prompt_tokens) against the golden file; per pair of backends: exact-match rate
    and prompt-token counts. A constant off-by-one in prompt tokens is flagged as a probable
    missing or doubled beginning-of-text token. Thresholds come from quality.probe.

    With --repeat N (N >= 2) each backend answers the golden set N times: its self-agreement
    (mean exact match over pairs of its runs; batching and numerics keep it under 100%) is the
    noise floor, the backends' agreement is the mean over every pair of runs, and
    quality.probe.min_exact_match_between_vs_floor sets that threshold relative to the lower floor.

    Exit 0 when every threshold holds, 1 when one does not (the figures are still pushed), 2 on
    bad input or refused credentials.

    \b
    Example:
      opsctl probe consistency --golden golden.jsonl --backend internal --backend databricks --push
      opsctl probe consistency --golden golden.jsonl --repeat 5 -o json
    """
    from pathlib import Path

    from opsctl.errors import OpsctlError
    from opsctl.quality.endpoints import choose_backends
    from opsctl.quality.golden import load_golden
    from opsctl.quality.probe_run import check_push_flags, mixed_apis, open_push, run_consistency

    check_push_flags(push=push, push_to=push_to, pushgateway_url=pushgateway_url, dry_run=dry_run)
    cfg = app.config
    cases = load_golden(Path(golden_path))
    names = choose_backends(cfg, backends)
    target = open_push(cfg, push_to=push_to, pushgateway_url=pushgateway_url, dry_run=dry_run) if push else None
    warning = mixed_apis(cfg, names)
    if warning:
        click.echo(warning, err=True)
    run = run_consistency(cfg, cases, names, repeat=repeat, push=target)
    if dry_run and output == "table":
        for s in run.pushed or ():
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
            click.echo(f"would push {s.name}{{{labels}}} {s.value:g}", err=True)
    emit(run.to_dict(), output, table=_table)
    if not run.report.passed:
        failed = [c.name for c in run.report.checks if not c.ok]
        raise OpsctlError(f"consistency probe failed {len(failed)} check(s): {', '.join(failed)}")


def _ms(value):
    return "-" if value is None else f"{value * 1000:.0f} ms"


def _diff_lines(diffs, title):
    lines = [f"{title}: {len(diffs)}"]
    for d in diffs[:MAX_LISTED]:
        where = "no answer" if d["position"] is None else f"@{d['position']}"
        lines.append(f"  {d['case_id']} ({where}): {d['got']!r} vs {d['reference']!r}")
    if len(diffs) > MAX_LISTED:
        lines.append(f"  (+{len(diffs) - MAX_LISTED} more; -o json lists every case)")
    return lines


def _table(data):
    tokens = {(t["backend"], t["reference"]): t for t in data["token_checks"]}
    rows = []
    for b in data["backends"]:
        golden = tokens.get((b["backend"], "golden"))
        if golden is None:
            tok = "-"
        elif golden["mismatched"] == 0:
            tok = "= golden" if golden["compared"] else "no usage"
        elif golden["offset"] is not None:
            tok = f"{golden['offset']:+d} vs golden" + (f" (BOS {golden['bos']}?)" if golden["bos"] else "")
        else:
            tok = f"differs on {golden['mismatched']}"
        rows.append([b["backend"], f"{b['answered']}/{b['cases']}", f"{b['exact_match_golden']:.1%}",
                     _ms(b["latency"]["p50"]), _ms(b["latency"]["p95"]), _ms(b["latency"]["p99"]), tok])
    out = [render_table(["BACKEND", "ANSWERED", "VS GOLDEN", "P50", "P95", "P99", "PROMPT TOKENS"], rows)]
    if data["pairs"]:
        out.append("")
        out.append(render_table(["PAIR", "EXACT MATCH"],
                                [[f"{p['a']} vs {p['b']}", f"{p['exact_match']:.1%}"] for p in data["pairs"]]))
    if data.get("noise"):
        n = data["noise"]
        out += ["", f"Noise floor over {n['repeat']} runs (self-agreement):"]
        out += [f"  {b}: {floor:.1%}" for b, floor in n["floors"].items()]
        out += [f"  {p['a']} vs {p['b']}: {p['exact_match']:.1%} over every pair of runs, threshold "
                f"{p['threshold']:.1%} ({p['threshold_from']})" for p in n["pairs"]]
    for p in data["pairs"]:
        if p["differences"]:
            out += [""] + _diff_lines(p["differences"], f"Differing cases, {p['a']} vs {p['b']}")
    for b in data["backends"]:
        if b["differences"]:
            out += [""] + _diff_lines(b["differences"], f"Differing from golden, {b['backend']}")
        if b["errors"]:
            out += ["", f"Unanswered, {b['backend']}: {len(b['errors'])}"]
            out += [f"  {e['case_id']}: {e['error']}" for e in b["errors"][:MAX_LISTED]]
    findings = [t["message"] for t in data["token_checks"] if t["mismatched"]]
    if findings:
        out += ["", "Prompt tokens:"] + [f"  {m}" for m in findings]
    out += ["", "Checks:"]
    out += [f"  {'ok  ' if c['ok'] else 'FAIL'}  {c['name']}: {c['detail']}" for c in data["checks"]]
    failed = sum(1 for c in data["checks"] if not c["ok"])
    out += ["", "Result: PASS" if data["passed"] else f"Result: FAIL ({failed} of {len(data['checks'])} checks failed)"]
    if "pushed" in data:
        p = data["pushed"]
        out.append(f"{'Would push' if p['dry_run'] else 'Pushed'} {p['samples']} gauges to {p['target']}")
    return "\n".join(out)
