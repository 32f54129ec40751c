"""Configs other than the shipped one: fewer sections, more backends. Generation never fails on what a
config leaves out; it says what is missing instead."""

from __future__ import annotations

import textwrap

from opsctl.config import load_config_file
from opsctl.runbooks.generator import generate, load_plans
from tests.conftest import write_config


def render(config) -> dict[str, str]:
    cfg = load_config_file(config)
    return generate(cfg, load_plans(cfg))


def test_a_minimal_config_still_gets_every_runbook_and_names_what_is_missing(tmp_path):
    files = render(write_config(tmp_path))  # no split, no capacity, no ticket routes, no peak rate
    assert len(files) == 27  # index, 9 SLOs x (page, ticket), 8 scenarios
    outage = files["scenario-vendor-outage.md"]
    assert "no ticket route for vendor 'databricks': add tickets.vendors.databricks" in outage
    assert "opsctl does not model the capacity of internal (no `capacity:` section" in outage
    assert "ticket file" not in outage  # no command that could not work as configured
    assert "not configured (traffic.default_split)" in files["README.md"]


def test_three_backends_get_a_move_off_each_and_a_ticket_route_each(tmp_path):
    config = write_config(tmp_path, textwrap.dedent("""\
        traffic:
          default_split: {databricks: 60, internal: 20, bedrock: 20}
        capacity: {backend: internal, source: static, replicas: 4, rps_per_replica: 40, headroom: 0.25, max_replicas: 4}
        tickets:
          vendors:
            databricks:
              categories: {inference: Model Serving}
              severities: {Sev1: S1, Sev2: S2, Sev3: S3, Sev4: S4}
        runbooks: {peak_rps: 100}
        """))
    config.write_text(config.read_text().replace(
        "databricks: {kind: vendor, vendor: databricks}",
        "databricks: {kind: vendor, vendor: databricks}\n  bedrock: {kind: vendor, vendor: aws}"))
    outage = render(config)["scenario-vendor-outage.md"]
    assert "### databricks" in outage and "### bedrock" in outage
    # failover plan, as `traffic failover` plans it: databricks' 60 split 1:1 between internal and bedrock
    assert "it plans internal 50 / databricks 0 / bedrock 50." in outage
    # ceil(100 x 50% x 1.25 / 40) = ceil(1.5625) = 2 replicas of the 4 configured
    assert "`ceil(100 requests/s x 50% x (1 + 0.25) / 40 requests/s per replica)` = **2**" in outage
    assert "opsctl traffic failover --from bedrock" in outage
    assert "--vendor databricks --category inference --severity Sev1" in outage
    assert "no ticket route for vendor 'aws'" in outage
