"""The drill report's pictures (opsctl/drills/svg.py): valid standalone SVG; the burn rate over the
5m and the 1h window on a log scale with the page thresholds where they belong; the budget spent
below on round ticks with the stop condition drawn; the drill's events marked with labels that
overlap neither each other, nor another event's line, nor the plotted data, and are not clipped;
a chain drill's hop waterfall; the history trend. Positions are read back from the SVG's own axis
labels (the gridline under each tick label), never from the module's constants."""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET

import pytest

from opsctl.drills import svg
from opsctl.drills.report_model import Chart, Hop


def burn_chart(data: dict) -> str:
    """svg.burn_chart of the report's typed chart, read from the data as a stored report holds it."""
    return svg.burn_chart(Chart.parse(data) if data else None)


def hop_waterfall(hops: list[dict]) -> str:
    return svg.hop_waterfall([Hop.parse(h) for h in hops])

NS = "{http://www.w3.org/2000/svg}"
SLO = "llm-inference-databricks-availability"
CHAR = 11 * 0.6  # a conservative width per character at font-size 11 for the overlap checks


def chart(**extra) -> dict:
    points = [{"offset": 60.0 * i, "values": {SLO: {"burn_5m": b5, "burn_1h": b, "spent": s}}}
              for i, (b5, b, s) in enumerate([(0.4, 0.5, 0.0), (300.0, 20.0, 0.01), (50.0, 40.0, 0.03),
                                              (0.1, 2.0, 0.04)])]
    return {"slos": [SLO], "labels": {SLO: "databricks-availability"}, "points": points,
            "markers": [{"offset": 0.0, "label": "fault"}, {"offset": 180.0, "label": "paged"}],
            "page_factor": 14.4, **extra}


def parse(svg: str) -> ET.Element:
    root = ET.fromstring(svg)
    assert root.tag == f"{NS}svg"
    return root


def texts(root: ET.Element) -> list[str]:
    return [t.text or "" for t in root.iter(f"{NS}text")]


def tick_y(root: ET.Element, label: str) -> float:
    """The y of the gridline an axis label names (the label sits 4px below it, right-aligned at x<70)."""
    [t] = [t for t in root.iter(f"{NS}text") if t.text == label and t.get("text-anchor") == "end"]
    return float(t.get("y")) - 4


def dashed(root: ET.Element, pattern: str) -> list[ET.Element]:
    return [e for e in root.iter() if e.get("stroke-dasharray") == pattern and e.tag == f"{NS}line"]


def test_a_chart_without_samples_says_so():
    for empty in ({}, {"slos": [SLO], "points": []}, {"slos": [], "points": chart()["points"]}):
        root = parse(burn_chart(empty))
        assert texts(root) == ["no samples to chart"]


def test_each_slo_draws_its_burn_over_5m_and_1h_and_its_budget_spent_and_is_named_in_the_legend():
    root = parse(burn_chart(chart()))
    lines = list(root.iter(f"{NS}polyline"))
    assert len(lines) == 3  # 1h burn, 5m burn (dashed), budget spent
    assert all(len(line.get("points").split()) == 4 for line in lines)  # one vertex per sample
    assert [line.get("stroke-dasharray") for line in lines].count("3 2") == 1
    # the 5m line reaches 300x at +1m: read its height back against the decade gridlines
    five = next(line for line in lines if line.get("stroke-dasharray") == "3 2")
    y1x, y10x = tick_y(root, "1x"), tick_y(root, "10x")
    y = float(five.get("points").split()[1].split(",")[1])
    assert abs(y - (y1x - math.log10(300) * (y1x - y10x))) < 0.2
    assert {"databricks-availability", "1h window", "5m window"} <= set(texts(root))


def test_the_page_thresholds_are_dashed_at_their_heights_on_the_log_scale():
    root = parse(burn_chart(chart(thresholds=[{"window": "5m", "factor": 300}, {"window": "1h", "factor": 14.4}])))
    assert {"page 5m 300x", "page 1h 14.4x"} <= set(texts(root))
    y1x, y10x = tick_y(root, "1x"), tick_y(root, "10x")
    got = sorted(float(line.get("y1")) for line in dashed(root, "6 4"))
    want = sorted(y1x - math.log10(f) * (y1x - y10x) for f in (300, 14.4))
    assert len(got) == 2 and all(abs(g - w) < 0.2 for g, w in zip(got, want))
    assert {"0.01x", "0.1x", "1x", "10x", "100x", "1000x"} <= set(texts(root))  # one gridline per decade


def test_without_a_threshold_no_threshold_line_is_drawn():
    root = parse(burn_chart(chart(page_factor=None)))
    assert not any(t.startswith("page ") for t in texts(root))
    assert not dashed(root, "6 4")


def test_decade_labels_are_plain_numbers():
    data = chart()
    data["points"][1]["values"][SLO]["burn_5m"] = 5000.0
    labels = set(texts(parse(burn_chart(data))))
    assert "10000x" in labels and not any("e+" in t for t in labels)


def _spent_ticks(root) -> list[tuple[str, float]]:
    return sorted(((t.text, float(t.get("y"))) for t in root.iter(f"{NS}text")
                   if t.get("text-anchor") == "end" and (t.text or "").endswith("%")), key=lambda p: -p[1])


def test_budget_ticks_are_round_values_equally_spaced():
    for top, stop, want in ((0.04, None, ["0%", "1%", "2%", "3%", "4%", "5%"]),
                            (0.4, None, ["0%", "10%", "20%", "30%", "40%", "50%"]),
                            (0.079, 0.5, ["0%", "10%", "20%", "30%", "40%", "50%", "60%"]),
                            (0.9, None, ["0%", "20%", "40%", "60%", "80%", "100%"])):
        data = chart(stops=[{"slo": SLO, "label": "databricks-availability", "above": stop, "name": "half"}]
                     if stop else [])
        data["points"][-1]["values"][SLO]["spent"] = top
        ticks = _spent_ticks(parse(burn_chart(data)))
        assert [t for t, _ in ticks] == want, (top, stop)
        gaps = {round(b[1] - a[1], 1) for a, b in zip(ticks, ticks[1:])}
        assert len(gaps) == 1  # equally spaced


def test_the_stop_condition_is_drawn_on_the_budget_chart_at_its_height():
    data = chart(stops=[{"slo": SLO, "label": "databricks-availability", "above": 0.5, "name": "half the budget"}])
    root = parse(burn_chart(data))
    y0, y10 = tick_y(root, "0%"), tick_y(root, "10%")
    [line] = [e for e in dashed(root, "6 4") if e.get("stroke") == "#e65100"
              and float(e.get("x2")) - float(e.get("x1")) > 100]  # the line across the panel, not the legend's
    assert abs(float(line.get("y1")) - (y0 - 5 * (y0 - y10))) < 0.2
    assert "stop 50%" in texts(root)
    assert "stop condition: databricks-availability at 50% spent" in texts(root)


def _event_boxes(root):
    """(x0, x1, y0, y1) of each event label and the x and y-extent of each event line."""
    labels = [t for t in root.iter(f"{NS}text") if t.get("fill") == "#444"]
    boxes = []
    for t in labels:
        x0, y = float(t.get("x")), float(t.get("y"))
        boxes.append((x0, x0 + len(t.text) * CHAR, y - 10, y + 2))
    lines = []
    for p in root.iter(f"{NS}path"):
        if p.get("class") == "event":
            nums = [float(v) for v in re.findall(r"-?\d+(?:\.\d+)?", p.get("d"))]
            lines.append((nums[0], nums[1]))  # x, top of the line
    return boxes, lines


LAYOUTS = {
    "vendor-outage": ([(0, "fault"), (120, "detected"), (121, "failover"), (121, "ticket"), (125, "paged"),
                       (130, "escalated"), (305, "ack"), (420, "recovered"), (1021, "vendor")], 1080.0),
    # the last event at the chart's right edge, just after another: its label must go left of its
    # line, and above the earlier event's label rather than through that event's line
    "vendor-latency": ([(0, "fault"), (660, "detected"), (661, "failover"), (661, "ticket"), (665, "paged"),
                        (960, "ack"), (1020, "recovered")], 1020.0),
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_event_labels_never_overlap_each_other_the_other_lines_or_the_data_and_are_not_clipped(layout):
    events, end = LAYOUTS[layout]
    markers = [{"offset": o, "label": lab} for o, lab in events]
    data = chart(markers=markers)
    data["points"].append({"offset": end, "values": {SLO: {"burn_5m": 0.1, "burn_1h": 1.0, "spent": 0.04}}})
    root = parse(burn_chart(data))
    width = float(root.get("width"))
    boxes, lines = _event_boxes(root)
    assert len(boxes) == len(markers) == len(lines)
    for i, a in enumerate(boxes):
        assert 0 <= a[0] and a[1] <= width, a  # "vendor" at the right edge is not clipped
        for b in boxes[i + 1:]:
            assert a[1] <= b[0] or b[1] <= a[0] or a[3] <= b[2] or b[3] <= a[2], (a, b)
        for j, (lx, ltop) in enumerate(lines):
            if a[0] <= lx <= a[1] and ltop < a[3]:
                raise AssertionError(f"event line at x={lx} runs through label {a}")
    # every label is above the burn panel (the top decade gridline), so none is drawn over the data
    top_grid = min(float(t.get("y")) - 4 for t in root.iter(f"{NS}text") if (t.text or "").endswith("x")
                   and t.get("text-anchor") == "end")
    assert all(b[3] <= top_grid for b in boxes)
    # the lane is no taller than the tallest stack of events that are close together needs
    assert len({b[2] for b in boxes}) <= 5


def test_events_are_marked_and_their_labels_escaped():
    root = parse(burn_chart(chart(markers=[{"offset": 60.0, "label": "<ack & go>"}])))
    assert "<ack & go>" in texts(root)  # parsed back: the text was escaped in the SVG
    assert len([p for p in root.iter(f"{NS}path") if p.get("class") == "event"]) == 1


def test_long_slo_names_are_shortened_in_the_legend():
    long_name = "x" * 50
    data = chart(labels={SLO: long_name})
    legend = [t for t in texts(parse(burn_chart(data))) if t.endswith("x" * 10)]
    assert legend == ["..." + "x" * 29]


def test_the_chart_runs_nothing_and_loads_nothing():
    svg = burn_chart(chart()) + hop_waterfall(HOPS)
    assert "<script" not in svg and "href" not in svg and "http://" not in svg.replace(
        'xmlns="http://www.w3.org/2000/svg"', "")


HOPS = [
    {"hop": "exporter", "component": "exporter", "title": "fault exported", "required": True, "passed": True,
     "seconds": 5.0, "failed": None},
    {"hop": "rule-firing", "component": "prometheus", "title": "rule firing", "required": True, "passed": True,
     "seconds": 60.0, "failed": None},
    {"hop": "pagerduty", "component": "pagerduty", "title": "page delivered", "required": True, "passed": True,
     "seconds": 90.0, "failed": None},
    {"hop": "ticket", "component": "serve", "title": "ticket filed", "required": True, "passed": False,
     "seconds": None, "failed": "no ticket channel"},
]


def test_the_hop_waterfall_draws_one_bar_per_hop_from_the_fault_proportional_to_its_time():
    root = parse(hop_waterfall(HOPS))
    bars = [r for r in root.iter(f"{NS}rect") if r.get("class") == "hop"]
    assert len(bars) == 3
    assert len({r.get("x") for r in bars}) == 1  # every bar starts at the fault
    widths = [float(r.get("width")) for r in bars]
    for w, h in zip(widths, HOPS):
        assert abs(w / widths[1] - h["seconds"] / 60.0) < 0.01
    labels = texts(root)
    assert {"0m05s", "1m00s", "1m30s"} <= set(labels)
    assert "fault exported (exporter)" in labels and "ticket filed (serve)" in labels
    missing = [t for t in root.iter(f"{NS}text") if t.get("class") == "missing"]
    assert [t.text for t in missing] == ["never happened: no ticket channel"]
    assert missing[0].get("fill") == "#c62828"
