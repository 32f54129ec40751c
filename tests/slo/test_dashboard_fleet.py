"""`opsctl slo dashboard --all-services`: the fleet's overview and each service's board, for two services
in one Prometheus. The overview's queries run on a real Prometheus holding both services' generated
rules and recorded series (synthesized at a 1-minute step with the labels the generated rules give
them, values chosen here): the split never mixes services, SLOs come least budget left first, burn
is matched per service and SLO, and a traffic move is annotated for the service that moved only."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request

import pytest
import yaml

from opsctl.slo.dashboard import panel_queries
from opsctl.slo.dashboard_check import schema_problems
from tests.conftest import REPO, write_config

A, B = "llm-inference", "grammar"
B_SLOS = ("internal-availability", "databricks-availability", "service-availability")
T0 = 1_795_000_020
MOVE = T0 + 20 * 60  # service A's split moves from 30/70 to 60/40 here
END = T0 + 40 * 60
# valid requests/s by (service, backend): before and after the move
RATES = {(A, "internal"): (30.0, 60.0), (A, "databricks"): (70.0, 40.0), (A, "all"): (100.0, 100.0),
         (B, "internal"): (9.0, 9.0), (B, "databricks"): (1.0, 1.0), (B, "all"): (10.0, 10.0)}


def configs(tmp_path):
    (tmp_path / "a").mkdir()
    a = write_config(tmp_path / "a")
    b_slos = tmp_path / "b-slos"
    b_slos.mkdir()
    for name in B_SLOS:
        # the shipped files name no service: B's `service:` is its SLOs' service label
        (b_slos / f"{name}.yaml").write_text((REPO / "slos" / f"{name}.yaml").read_text())
    (tmp_path / "b").mkdir()
    b = write_config(tmp_path / "b", slo_dir=b_slos)
    b.write_text(b.read_text().replace(f"service: {A}", f"service: {B}").replace("period: 28d", "period: 7d"))
    return a, b


DRILL_B = "20261118T081500Z-vendor-outage-b0b0"  # a live drill on service B: spends its budget
DRILL_A = "20261118T081500Z-vendor-outage-a0a0"  # an embedded drill on A: its own metrics, no annotation
DRILL_START, DRILL_END = T0 + 25 * 60 + 10, T0 + 30 * 60 - 5


def drill_state(cfg_dir, run_id, mode):
    run = cfg_dir / "state" / "drills" / run_id
    run.mkdir(parents=True)
    (run / "state.json").write_text(json.dumps({
        "version": 1, "run_id": run_id, "mode": mode, "window": {"start": DRILL_START, "end": DRILL_END}}))


@pytest.fixture
def made(opsctl, tmp_path):
    a, b = configs(tmp_path)
    drill_state(tmp_path / "b", DRILL_B, "live")
    drill_state(tmp_path / "a", DRILL_A, "embedded")
    out = tmp_path / "boards"
    result = opsctl("--config", str(a), "slo", "dashboard", "--all-services", "--service-config", str(a),
                    "--service-config", str(b), "--out-dir", str(out), "--drills-out", str(tmp_path / "drills.om"))
    assert result.exit_code == 0, result.output
    assert "1 drill window(s)" in result.stderr
    rules = {}
    for name, cfg in ((A, a), (B, b)):
        r = opsctl("--config", str(cfg), "slo", "rules", "--out", str(tmp_path / f"{name}-rules.yaml"))
        assert r.exit_code == 0, r.output
        rules[name] = tmp_path / f"{name}-rules.yaml"
    return out, rules


def test_the_overview_and_each_services_board_are_written_with_their_own_uids(made):
    out, _ = made
    assert sorted(p.name for p in out.iterdir()) == [
        "opsctl-slo-fleet.json", "opsctl-slo-grammar.json", "opsctl-slo-llm-inference.json"]
    for path in out.iterdir():
        doc = json.loads(path.read_text())
        assert f"{doc['uid']}.json" == path.name
        assert schema_problems(doc) == []
    for service in (A, B):  # each service's board reads that service's series only
        board = json.loads((out / f"opsctl-slo-{service}.json").read_text())
        exprs = [e for _, e in panel_queries(board)]
        assert all(f'service="{service}"' in e for e in exprs if not e.startswith("vector(")), service
    fleet = json.loads((out / "opsctl-slo-fleet.json").read_text())
    assert [v["name"] for v in fleet["templating"]["list"]] == ["datasource", "service", "slo"]
    assert [a["name"] for a in fleet["annotations"]["list"]] == ["SLO alerts", "Traffic changes", "Drills"]
    titles = [p["title"] for p in fleet["panels"]]
    assert titles[:2] == ["SLOs by error budget left (period)", "Error budget left over time"]
    assert titles[-1] == "Traffic split per service"


def test_the_burn_panels_draw_each_periods_thresholds(made):
    """A 28d and a 7d service: each pair of the table is one panel holding both periods' windows (the
    7d one a quarter as long, to the minute) and both at the 28-day table's factor (issue #24 item 5)."""
    out, _ = made
    fleet = json.loads((out / "opsctl-slo-fleet.json").read_text())
    burn = {p["title"]: sorted(float(t["expr"][7:-1]) for t in p["targets"] if t["expr"].startswith("vector("))
            for p in fleet["panels"] if p["title"].startswith("Burn rate")}
    # 28 days: share x 28 d / long; 7 days: the same factor over long / 4 (1h -> 15m, 5m -> 1m15s -> 1m, ...).
    expected = {
        "Burn rate 1h/5m, 15m/1m (page)": [0.02 * 28 * 24] * 2,
        "Burn rate 6h/30m, 1h30m/8m (page)": [0.05 * 28 * 4] * 2,
        "Burn rate 1d/2h, 6h/30m (ticket)": [0.10 * 28] * 2,
        "Burn rate 3d/6h, 18h/1h30m (ticket)": [0.10 * 28 / 3] * 2,
    }
    assert set(burn) == set(expected)
    for title, factors in expected.items():
        assert burn[title] == pytest.approx(factors, rel=1e-9), title


def recorded_openmetrics(rules: dict) -> tuple[str, dict]:
    """Every series the two services' rules record, with their labels, a sample a minute; the budget
    left of SLO i of a service is 0.9 - 0.1 i (service B: minus 0.05 more), error ratios 1h are
    0.0005 (A) and 0.002 (B) against a budget of 0.0001."""
    series: dict[str, dict[str, list[float]]] = {}
    budget_left: dict[tuple[str, str], float] = {}
    for service, path in rules.items():
        slos = []
        for group in yaml.safe_load(path.read_text())["groups"]:
            for rule in group["rules"]:
                if not rule.get("record", "").startswith("slo:"):
                    continue  # alerts, and the quality records (no SLO)
                labels = rule["labels"]
                assert labels["service"] == service
                if labels["slo"] not in slos:
                    slos.append(labels["slo"])
                i = slos.index(labels["slo"])
                name = rule["record"]
                if name == "slo:period_error_budget_remaining:ratio":
                    value = 0.9 - 0.1 * i - (0.05 if service == B else 0)
                    budget_left[(service, labels["slo"])] = value
                    values = [value] * 41
                elif name == "slo:sli_valid:rate5m":
                    before, after = RATES[(service, labels["backend"])]
                    values = [before if T0 + 60 * k < MOVE else after for k in range(41)]
                elif name == ("slo:sli_error:ratio_rate1h" if service == A else "slo:sli_error:ratio_rate15m"):
                    values = [0.0005 if service == A else 0.002] * 41  # the page pair's long window (B: 7d)
                elif name == "slo:error_budget:ratio":
                    values = [0.0001] * 41
                else:
                    values = [0.5] * 41
                text = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
                series.setdefault(name, {})[f"{name}{{{text}}}"] = values
    lines = []
    for family in series.values():
        for key, values in family.items():
            lines.extend(f"{key} {v!r} {T0 + 60 * k}" for k, v in enumerate(values))
    return "\n".join(lines) + "\n# EOF\n", budget_left


def query(url: str, expr: str, at: float) -> list[dict]:
    expr = expr.replace("$service", f"{A}|{B}").replace("$slo", ".+")
    body = urllib.parse.urlencode({"query": expr, "time": at}).encode()
    with urllib.request.urlopen(f"{url}/api/v1/query", data=body, timeout=10) as response:
        answer = json.loads(response.read())
    assert answer["status"] == "success", (expr, answer)
    return answer["data"]["result"]


@pytest.mark.prometheus
@pytest.mark.slow
def test_the_overview_reads_each_service_apart_on_a_real_prometheus(made, prometheus_factory, tmp_path):
    out, rules = made
    om = tmp_path / "recorded.om"
    text, budget_left = recorded_openmetrics(rules)
    drills = (tmp_path / "drills.om").read_text()
    assert drills.endswith("# EOF\n")
    om.write_text(text.removesuffix("# EOF\n") + drills)  # one backfill: the records and the drills
    server = prometheus_factory(openmetrics=om, rule_files=list(rules.values()))
    fleet = json.loads((out / "opsctl-slo-fleet.json").read_text())
    exprs: dict[str, str] = {}
    for where, expr in panel_queries(fleet):
        exprs.setdefault(where, expr)  # a panel's first query
    before, during, after = T0 + 10 * 60, MOVE + 2 * 60, END

    # Both services' rules load together; every query of the overview evaluates (variables by their selector).
    for where, expr in panel_queries(fleet):
        if where.startswith("variable"):
            expr = expr.removeprefix("label_values(").rsplit(",", 1)[0]
        query(server.url, expr, before)
    with urllib.request.urlopen(f"{server.url}/api/v1/rules", timeout=10) as response:
        groups = json.loads(response.read())["data"]["groups"]
    expected_groups = sum(len(yaml.safe_load(p.read_text())["groups"]) for p in rules.values())
    assert len(groups) == expected_groups

    # The split: each backend's share of its own service's traffic.
    split = {(r["metric"]["service"], r["metric"]["backend"]): float(r["value"][1])
             for r in query(server.url, exprs["Traffic split per service"], before)}
    assert split == pytest.approx({(s, b): RATES[(s, b)][0] / RATES[(s, "all")][0]
                                   for (s, b) in RATES if b != "all"})

    # Every SLO of both services, least budget left first.
    rows = query(server.url, exprs["SLOs by error budget left (period)"], before)
    got = [(r["metric"]["service"], r["metric"]["slo"]) for r in rows]
    assert got == sorted(budget_left, key=lambda k: budget_left[k])
    assert len(got) == 9 + len(B_SLOS)

    # Burn over the page pair's long window per service and SLO (A 28d: 1h; B 7d: 15m), each its own
    # error ratio over its own budget, each target reading its own service's SLOs.
    panel = next(p for p in fleet["panels"] if p["title"] == "Burn rate 1h/5m, 15m/1m (page)")
    longs = [t["expr"] for t in panel["targets"] if t["legendFormat"].endswith(("1h", "15m"))]
    burn = [r for expr in longs for r in query(server.url, expr, before)]
    assert len(burn) == len(got)
    assert {r["metric"]["service"]: round(float(r["value"][1]), 9) for r in burn} == {A: 5.0, B: 20.0}

    # The traffic move is annotated for the service that moved, while it shows in the 5m window.
    moves = fleet["annotations"]["list"][1]["expr"]
    assert query(server.url, moves, before) == []
    moved = {(r["metric"]["service"], r["metric"]["backend"]): float(r["value"][1])
             for r in query(server.url, moves, during)}
    assert moved == pytest.approx({(A, "internal"): 0.3, (A, "databricks"): 0.3})
    assert query(server.url, moves, after) == []

    # The live drill on B is annotated over its window (to the minute), the embedded one on A never.
    drill = fleet["annotations"]["list"][2]["expr"]
    minutes = range(T0 // 60 * 60, END + 60, 60)
    shown = {}
    for at in minutes:
        for r in query(server.url, drill, at):
            shown.setdefault((r["metric"]["service"], r["metric"]["run_id"]), []).append(at)
    first, last = DRILL_START // 60 * 60, -(-DRILL_END // 60) * 60
    assert list(shown) == [(B, DRILL_B)]
    at = shown[(B, DRILL_B)]
    # Every minute of the window; nothing before it; after it at most Prometheus' 5m lookback.
    assert at[0] == first and set(range(first, last + 1, 60)) <= set(at) and at[-1] <= last + 300

    # The $service variable lists both services; $slo the SLOs of those picked.
    variable = exprs["variable service"].removeprefix("label_values(").rsplit(",", 1)[0]
    params = urllib.parse.urlencode({"match[]": variable, "start": T0, "end": END})
    with urllib.request.urlopen(f"{server.url}/api/v1/label/service/values?{params}", timeout=10) as response:
        assert sorted(json.loads(response.read())["data"]) == sorted([A, B])


def test_a_service_named_like_the_overview_is_refused_before_anything_is_written(opsctl, tmp_path):
    a, b = configs(tmp_path)
    b.write_text(b.read_text().replace(f"service: {B}", "service: fleet"))
    out = tmp_path / "boards"
    result = opsctl("--config", str(a), "slo", "dashboard", "--all-services", "--service-config", str(a),
                    "--service-config", str(b), "--out-dir", str(out))
    assert result.exit_code == 2, result.output
    assert "two dashboards would have the uid 'opsctl-slo-fleet'" in result.stderr
    assert not out.exists()


def test_the_same_service_twice_is_refused(opsctl, tmp_path):
    a, _ = configs(tmp_path)
    result = opsctl("--config", str(a), "slo", "dashboard", "--all-services", "--service-config", str(a),
                    "--service-config", str(a))
    assert result.exit_code == 2 and f"service {A} given twice" in result.stderr, result.output


def test_all_services_without_configs_is_the_overview_of_this_one(opsctl, tmp_path):
    a, _ = configs(tmp_path)
    result = opsctl("--config", str(a), "slo", "dashboard", "--all-services")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["uid"] == "opsctl-slo-fleet"
    assert len(doc["panels"]) == 2 + 4 + 1  # budget table and history, one burn panel per pair, the split
    assert doc["panels"][0]["title"] == "SLOs by error budget left (28d)"  # one period in use: named
