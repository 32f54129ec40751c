"""Tables for a person (issue 35 item 3): on an 80- and a 100-column terminal, `slo report`,
`slo alerts`, `traffic history` and `drill list` fit, their NAME column (what tells the rows apart)
is whole in every row, the other columns wrap or are left out (said on a last line), and `-o wide`
shows every column; the reports say their instant and period. The expected names are read from
the files `opsctl init` wrote, not from opsctl's answers."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from tests.cli.test_tables import _on_a_terminal
from tests.conftest import run_opsctl

END = "2026-11-18T12:00:00Z"
WIDTHS = (80, 100)
TIME_CELL = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d")
REASON = "vendor 5xx at 30% since 11:30, failing over by hand while the vendor looks into it (INC-4711)"


@pytest.fixture(scope="module")
def ops(tmp_path_factory):
    root = tmp_path_factory.mktemp("widths")
    assert run_opsctl("init", root / "ops", cwd=root).exit_code == 0
    cfg = root / "ops" / "opsctl.yaml"
    seeded = run_opsctl("--config", cfg, "sim", "generate", "--days", "3", "--end", END,
                        "--incident", "vendor-5xx@end-30m+30m:rate=0.3", cwd=root)
    assert seeded.exit_code == 0, seeded.output
    for weights in (["databricks=30", "internal=70"], ["databricks=80", "internal=20"]):
        done = run_opsctl("--config", cfg, "traffic", "set", *weights, "--emergency", "--incident", "INC-4711",
                          "--reason", REASON, "--yes", cwd=root)
        assert done.exit_code == 0, done.output
    return cfg


def slo_names(cfg) -> set[str]:
    return {yaml.safe_load(p.read_text())["metadata"]["name"] for p in (cfg.parent / "slos").glob("*.yaml")}


def scenario_names(cfg) -> set[str]:
    return {p.stem for p in (cfg.parent / "chaos").glob("*.yaml")}


def table(cfg, columns: int, *args: str) -> list[str]:
    text = _on_a_terminal(columns, "--config", str(cfg), *args, env={"COLUMNS": str(columns)}, cwd=cfg.parent)
    return text.splitlines()


def rows_of(lines: list[str], header: str) -> tuple[list[str], list[str]]:
    """The table's header lines and the lines of its rows (a row starts in column 0, its wrapped
    continuation lines with spaces), from the header to the first line that is no part of it."""
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rule = next(i for i in range(start, len(lines)) if set(lines[i].replace(" ", "")) == {"-"})
    body = []
    for line in lines[rule + 1:]:
        if not line or line.startswith(("(", "note:", "absent ", "unknown ", "quality ")):
            break
        body.append(line)
    return lines[start:rule], body


def fits(lines: list[str], header: str, columns: int) -> None:
    """The table (its header, rows and the lines saying what was left out) is at most `columns` wide;
    the lines after it (notes, quality alerts) are sentences, which the terminal wraps."""
    head, body = rows_of(lines, header)
    start = lines.index(head[0])
    end = start + len(head) + 1 + len(body)
    if end < len(lines) and lines[end].startswith("("):
        end = next(i for i in range(end, len(lines)) if lines[i].endswith(")")) + 1
    assert max(len(line) for line in lines[start:end]) <= columns, "\n".join(lines)


def first_cells(body: list[str]) -> list[str]:
    return [line.split("  ")[0] for line in body if not line.startswith(" ")]


@pytest.mark.slow
@pytest.mark.parametrize("columns", WIDTHS)
def test_slo_report_fits_and_names_every_slo_whole(ops, columns):
    lines = table(ops, columns, "slo", "report", "--at", END)
    fits(lines, "SLO ", columns)
    assert lines[0] == f"SLOs at {END}, period 28d"
    _, body = rows_of(lines, "SLO ")
    assert sorted(first_cells(body)) == sorted(slo_names(ops))  # 9 names, each whole on its row
    assert len(first_cells(body)) == 9


@pytest.mark.slow
@pytest.mark.parametrize("columns", WIDTHS)
def test_slo_alerts_fits_and_names_the_slo_of_every_firing_alert_whole(ops, columns):
    firing = json.loads(run_opsctl("--config", ops, "slo", "alerts", "--at", END, "-o", "json").stdout)["firing"]
    assert len(firing) >= 4  # the 30% vendor 5xx pages on databricks and the whole service
    lines = table(ops, columns, "slo", "alerts", "--at", END)
    fits(lines, "SLO ", columns)
    assert lines[0] == f"alerts at {END}, period 28d: {len(firing)} firing"
    _, body = rows_of(lines, "SLO ")
    names = first_cells(body)
    assert len(names) == len(firing) and set(names) <= slo_names(ops)
    assert {"databricks-availability", "service-availability"} <= set(names)


@pytest.mark.slow
@pytest.mark.parametrize("columns", WIDTHS)
def test_traffic_history_fits_and_shows_every_changes_time_whole(ops, columns):
    lines = table(ops, columns, "traffic", "history")
    fits(lines, "TIME (UTC)", columns)
    _, body = rows_of(lines, "TIME (UTC)")
    times = first_cells(body)
    assert len(times) == 2 and all(TIME_CELL.fullmatch(t.strip()) for t in times), times
    words = " ".join(" ".join(line.split()) for line in body)
    assert all(word in words for word in REASON.split())  # the reason wrapped, every word kept


@pytest.mark.slow
@pytest.mark.parametrize("columns", WIDTHS)
def test_drill_list_fits_and_names_every_scenario_whole(ops, columns):
    lines = table(ops, columns, "drill", "list")
    fits(lines, "NAME ", columns)
    _, body = rows_of(lines, "NAME ")
    assert sorted(c.strip() for c in first_cells(body)) == sorted(scenario_names(ops))
    assert lines[-1].endswith("column)") and "-o wide shows every" in " ".join(lines[-2:])  # what was left out


@pytest.mark.slow
def test_o_wide_shows_every_column_whole_on_a_narrow_terminal(ops):
    for args, headers in ((("slo", "report", "--at", END), ["SLO", "BACKEND", "GOAL", "SLI", "BUDGET LEFT",
                                                             "WORST BURN", "STATUS", "WHY"]),
                          (("slo", "alerts", "--at", END), ["SLO", "ALERT", "SEVERITY", "BACKEND", "WINDOWS",
                                                             "BURN (LONG / SHORT)", "ABOVE", "TRAFFIC", "CAUSE"]),
                          (("drill", "list"), ["NAME", "FILE", "FAULTS", "EXPECT", "TITLE"])):
        narrow = table(ops, 80, *args)
        wide = table(ops, 80, *args, "-o", "wide")
        head, body = rows_of(wide, headers[0] + " ")
        assert len(head) == 1 and head[0].split("  ") and all(h in head[0] for h in headers), head
        assert not any(line.startswith(" ") for line in body)  # nothing wrapped
        assert max(len(line) for line in wide[:len(head) + 1 + len(body)]) > 80
        fits(narrow, headers[0] + " ", 80)
        assert "-o wide shows every" not in "\n".join(wide)
