"""Every expectation is judged on all it names: for every shipped scenario, a copy that breaks one
named field of one expectation (the wrong slo, an override that did not happen, the wrong category,
a word the page does not say, the wrong guard) fails exactly that expectation, embedded; and one
chain drill (slow) fails exactly the broken one too, judged by the same rules on what the chain's
components showed."""

from __future__ import annotations

import pytest
import yaml

from tests.drills.conftest import AWAITING, CHAOS, SHIPPED

OTHER_SLO = {"databricks-availability": "internal-availability", "internal-availability": "databricks-availability",
             "databricks-latency-1s": "internal-latency-1s", "service-availability": "internal-latency-1s",
             "service-latency-1s": "internal-availability"}
OTHER_CATEGORY = {"inference": "platform", "platform": "inference"}


def breaks(e: dict) -> list[tuple[str, object]]:
    """The named fields of one expectation, each with a value that cannot be met in its scenario."""
    kind = e["expect"]
    out: list[tuple[str, object]] = []
    if kind in ("detected", "slo-recovered") and "slo" in e:
        out.append(("slo", OTHER_SLO[e["slo"]]))
    if kind == "detected" and "alert" in e:
        out.append(("backend", "internal"))
    if kind == "paged":
        out.append(("mentions", [*e.get("mentions", []), "nonexistentword"]))
    if kind == "failover-applied":
        out.append(("overrides", sorted({*e.get("overrides", []), "budget"})))
    if kind in ("vendor-ticket", "vendor-responded") and "category" in e:
        out.append(("category", OTHER_CATEGORY[e["category"]]))
    if kind == "change-refused":
        out.append(("guard", "budget"))
    return out


CASES = [(name, i, field, value) for name in SHIPPED
         for i, e in enumerate(yaml.safe_load((CHAOS / f"{name}.yaml").read_text())["expectations"])
         for field, value in breaks(e)]


def test_every_shipped_scenario_has_a_named_field_broken_here():
    assert {name for name, *_ in CASES} == set(SHIPPED)


@pytest.mark.parametrize("name, index, field, value", [
    pytest.param(*c, marks=pytest.mark.xfail(strict=True, reason=AWAITING[c[0]])) if c[0] in AWAITING else c
    for c in CASES], ids=[f"{n}-{i}-{f}" for n, i, f, _ in CASES])
def test_a_copy_breaking_one_named_field_fails_exactly_that_expectation(drill_env, name, index, field, value):
    broken = {}

    def edit(data):
        e = data["expectations"][index]
        e[field] = value
        broken["name"] = e["name"]

    path = drill_env.scenario(name, edit)
    result = drill_env.run("drill", "run", str(path), "-o", "json")
    assert result.exit_code == 1, result.output
    report = drill_env.report()
    failed = [v["name"] for v in report["expectations"] if v["result"] == "fail"]
    assert failed == [broken["name"]], [(v["name"], v["reason"]) for v in report["expectations"]
                                        if v["result"] != "pass"]
