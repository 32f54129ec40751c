"""The drill report's burn chart (opsctl/drills/svg.py): valid standalone SVG, the burn rate on a
log scale with the page threshold where it belongs, the budget spent below, the drill's events
marked, and nothing that runs or loads from elsewhere. Positions are derived here from the panel
geometry the chart documents (burn panel y 40..220, 1h burn on a log scale from 0.01x)."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

from opsctl.drills.svg import burn_chart

NS = "{http://www.w3.org/2000/svg}"
SLO = "llm-inference-databricks-availability"


def chart(**extra) -> dict:
    points = [{"offset": 60.0 * i, "values": {SLO: {"burn_1h": b, "spent": s}}}
              for i, (b, s) in enumerate([(0.5, 0.0), (20.0, 0.01), (40.0, 0.03), (2.0, 0.04)])]
    return {"slos": [SLO], "labels": {SLO: "databricks-availability"}, "points": points,
            "markers": [{"offset": 0.0, "label": "fault"}, {"offset": 180.0, "label": "paged"}],
            "page_factor": 14.4, **extra}


def parse(svg: str) -> ET.Element:
    root = ET.fromstring(svg)
    assert root.tag == f"{NS}svg"
    return root


def texts(root: ET.Element) -> list[str]:
    return [t.text or "" for t in root.iter(f"{NS}text")]


def test_a_chart_without_samples_says_so():
    for empty in ({}, {"slos": [SLO], "points": []}, {"slos": [], "points": chart()["points"]}):
        root = parse(burn_chart(empty))
        assert texts(root) == ["no samples to chart"]


def test_each_slo_draws_its_burn_and_its_budget_spent_and_is_named_in_the_legend():
    root = parse(burn_chart(chart()))
    lines = list(root.iter(f"{NS}polyline"))
    assert len(lines) == 2  # burn rate above, budget spent below
    assert all(len(line.get("points").split()) == 4 for line in lines)  # one vertex per sample
    assert "databricks-availability" in texts(root)


def test_the_page_threshold_is_dashed_at_its_height_on_the_log_scale():
    root = parse(burn_chart(chart()))
    assert "page threshold 14.4x" in texts(root)
    # The axis runs from 10^-2 to 10^ceil(log10(1.5 x the largest value, 40)) = 10^2, over y 220..40.
    expected_y = 220 - (math.log10(14.4) + 2) / (2 + 2) * (220 - 40)
    dashed = [line for line in root.iter(f"{NS}line") if line.get("stroke-dasharray") == "6 4"]
    assert len(dashed) == 1
    assert float(dashed[0].get("y1")) == float(dashed[0].get("y2")) == round(expected_y, 1)
    assert {"0.01x", "0.1x", "1x", "10x", "100x"} <= set(texts(root))  # one gridline per decade


def test_without_a_threshold_no_threshold_line_is_drawn():
    root = parse(burn_chart(chart(page_factor=None)))
    assert not any(t.startswith("page threshold") for t in texts(root))
    assert not [line for line in root.iter(f"{NS}line") if line.get("stroke-dasharray") == "6 4"]


def test_events_are_marked_and_their_labels_escaped():
    root = parse(burn_chart(chart(markers=[{"offset": 60.0, "label": "<ack & go>"}])))
    assert "<ack & go>" in texts(root)  # parsed back: the text was escaped in the SVG
    assert len([line for line in root.iter(f"{NS}line") if line.get("stroke-dasharray") == "2 3"]) == 1


def test_long_slo_names_are_shortened_in_the_legend():
    long_name = "x" * 50
    data = chart(labels={SLO: long_name})
    legend = [t for t in texts(parse(burn_chart(data))) if t.endswith("x" * 10)]
    assert legend == ["..." + "x" * 29]


def test_the_chart_runs_nothing_and_loads_nothing():
    svg = burn_chart(chart())
    assert "<script" not in svg and "href" not in svg and "http://" not in svg.replace(
        'xmlns="http://www.w3.org/2000/svg"', "")
