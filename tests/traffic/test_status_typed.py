"""`traffic status` is read once into a typed `TrafficStatus` (#26 item 1): its parts are the
change record's typed entries and open failovers, the capacity reading, the freeze spans; the table
and `-o json` are rendered from it (the documents themselves are pinned in test_result_documents.py)."""

from __future__ import annotations

import json


def test_the_status_after_a_failover_is_typed_and_its_document_is_what_the_cli_prints(make_env):
    from opsctl.clock import wall_now
    from opsctl.config import load_config_file
    from opsctl.traffic.change_entry import ChangeEntry
    from opsctl.traffic.record import OpenFailover
    from opsctl.traffic.split import Split
    from opsctl.traffic.status import CapacityStatus, TrafficStatus, traffic_status

    env = make_env()
    assert env.run("traffic", "failover", "--from", "databricks", "--incident", "INC-5", "--reason", "5xx",
                   "--yes").exit_code == 0
    cfg = load_config_file(env.config)
    status = traffic_status(cfg, wall_now())
    assert isinstance(status, TrafficStatus)
    assert status.split == Split.of({"internal": 100})
    assert isinstance(status.last_change, ChangeEntry) and status.last_change.action == "failover"
    [(incident, opened)] = status.open_failovers.items()
    assert incident == "INC-5" and isinstance(opened, OpenFailover)
    assert opened.saved_split == Split.of({"databricks": 80, "internal": 20})  # the default split, saved
    assert isinstance(status.capacity, CapacityStatus) and status.capacity.share_now == 100
    # 10 replicas x 150 rps = 1500 rps for 1000 rps with 25% headroom: 1500 / 1250 = 120%, so all of it
    assert status.capacity.reading is not None and status.capacity.reading.max_share() == 100
    assert status.ramp is None and status.shadow_object is None and status.freezes_active == ()
    printed = env.run("traffic", "status", "-o", "json")
    shown = json.loads(printed.stdout)
    expected = json.loads(json.dumps(status.to_dict(list(cfg.backends))))
    assert shown == expected
