"""The canary restore in the drill's world, through serve's policy engine (drills/automation.py):
the shipped vendor outage with its fault ending by itself, and the drill kept running (the vendor
answers late) so the automation's restore is on the timeline."""

from __future__ import annotations

import json

import pytest

BACK = "-> internal 20 / databricks 80"


def _outage(minutes: int):
    def edit(data: dict) -> None:
        data["method"][0]["fault"]["duration"] = f"{minutes}m"
        data["method"][0]["fault"].pop("live", None)
        data["responders"]["vendor"]["respond-after"] = "100m"
        data["max-duration"] = "2h"
        for e in data["expectations"]:
            if e["expect"] == "vendor-responded":
                e["within"] = "110m"
    return edit


@pytest.mark.slow
@pytest.mark.parametrize("minutes", [10, 60])
def test_a_recovered_vendor_is_back_at_its_saved_share_within_15_minutes_of_the_recovery(drill_env, minutes):
    result = drill_env.run("drill", "run", str(drill_env.scenario("vendor-outage", _outage(minutes))), "-o", "json")
    assert result.exit_code == 0, result.output
    moves = [e for e in json.loads(result.stdout)["timeline"] if e["kind"] in ("failover", "restore")]
    recovered = minutes * 60
    back = [e["offset"] for e in moves if e["kind"] == "restore" and BACK in e["message"]]
    # Back once, after the recovery (no full restore into the outage), within 15 minutes of it.
    assert len(back) == 1 and recovered < back[0] <= recovered + 15 * 60, moves
    # Every canary before the recovery failed back at its next look (a drill tick, 60 s: the fast window).
    canaries = [e["offset"] for e in moves if "restore-canary" in e["message"]]
    failbacks = [e["offset"] for e in moves if "restore-failback" in e["message"]]
    assert canaries and [c + 60 for c in canaries[:len(failbacks)]] == failbacks
    assert all(c < recovered for c in canaries[:-1]) and len(canaries) == len(failbacks) + 1
