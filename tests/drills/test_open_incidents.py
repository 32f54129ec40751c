"""Preflight and the `real-incident-open` stop condition list open incidents on the configured pager:
PagerDuty's REST API (through the real client, against the HTTPS fake) and the local ledger. Drill
incidents never count as real ones."""

from __future__ import annotations

from opsctl.drills.safety import check_real_incidents, real_incidents
from opsctl.paging.base import PageEvent
from opsctl.paging.registry import open_pager
from tests.paging.conftest import pd, pd_cfg, pd_config_path, pd_env  # noqa: F401  (fixtures)
from tests.fakes.fixtures import ca, ca_file  # noqa: F401  (fixtures)


def test_pagerduty_open_incidents_asks_for_triggered_and_acknowledged_ones_of_the_service(pd, pd_cfg):
    pager = open_pager(pd_cfg)
    real = pager.trigger(PageEvent(summary="checkout errors", source="oncall"))
    drill = pager.trigger(PageEvent(summary="drill page", source="opsctl drill", drill=True))
    done = pager.trigger(PageEvent(summary="yesterday's incident", source="oncall"))
    pager.resolve(done.dedup_key)
    found = real_incidents(pd_cfg)
    assert [i.dedup_key for i in found] == [real.dedup_key]
    [request] = [r for r in pd.requests_to("GET", "/incidents") if "statuses[]" in r.query]
    assert request.query["statuses[]"] == ["triggered", "acknowledged"]
    assert request.query["service_ids[]"] == ["PSVC001"]
    assert drill.dedup_key.startswith("opsctl-drill-")
    check = check_real_incidents(pd_cfg)
    assert not check.ok and "1 real incident(s) open" in check.message and "'checkout errors'" in check.message


def test_without_a_rest_api_key_preflight_cannot_tell_and_refuses(pd, tmp_path, ca_file, pd_env, monkeypatch):
    from tests.fakes.fixtures import load, write_config
    from tests.paging.conftest import pd_config_text

    monkeypatch.delenv("PD_API_TOKEN")
    cfg = load(write_config(tmp_path, pd_config_text(pd, ca_file)))
    check = check_real_incidents(cfg)
    assert not check.ok and check.message.startswith("cannot tell whether a real incident is open")
