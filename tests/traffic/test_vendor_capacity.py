"""The vendor's side of capacity (issue #25 item 6): a move toward a vendor listed in
capacity.vendors must fit its provisioned throughput with headroom; a routine move beyond it is
refused (exit 4), a failover toward it is capped at what fits (exit 4, the rest stays).

Worked by hand: the healthy store carries 1000 requests/s (databricks 800, internal 200) and 350
tokens per request (tests/slo/data.py: 300 prompt + 50 completion), so 350,000 tokens/s.
    requests_per_second 1000, headroom 0.2: floor(1000 / (1000 x 1.2) x 100) = 83%
    tokens_per_second 300000, headroom 0.2: floor(300000 / (350000 x 1.2) x 100) = floor(71.4) = 71%
"""

from __future__ import annotations

import json

import pytest


def capacity(vendor: str) -> str:
    return ("capacity:\n  backend: internal\n  source: static\n  replicas: 20\n  rps_per_replica: 100\n"
            "  headroom: 0.25\n  max_replicas: 20\n  vendors:\n" f"    databricks: {vendor}\n")


REQUESTS = "{requests_per_second: 1000, headroom: 0.2}"
TOKENS = "{tokens_per_second: 300000, headroom: 0.2}"


@pytest.mark.parametrize("vendor,fits", [(REQUESTS, 83), (TOKENS, 71)])
def test_a_routine_move_beyond_the_vendors_provisioned_throughput_is_refused(make_env, vendor, fits):
    env = make_env(capacity=capacity(vendor))
    start = env.run("traffic", "set", "databricks=50", "internal=50", "--reason", "less vendor", "--yes")
    assert start.exit_code == 0, start.output  # the vendor loses share: never checked against its throughput
    over = env.run("traffic", "set", f"databricks={fits + 1}", f"internal={99 - fits}", "--reason", "more vendor",
                   "--yes")
    assert over.exit_code == 4, over.output
    assert f"databricks's provisioned throughput carries only {fits}% of current traffic, {fits + 1}% asked" in over.stderr
    assert f"ask for at most {fits}% on databricks" in over.stderr
    assert env.stored()["weights"] == {"internal": 50, "databricks": 50}
    within = env.run("traffic", "set", f"databricks={fits}", f"internal={100 - fits}", "--reason", "fits", "--yes",
                     "-o", "json")
    assert within.exit_code == 0, within.output
    guard = next(g for g in json.loads(within.stdout)["guards"] if g["name"] == "capacity")
    assert guard["ok"] and guard["details"]["max_share"] == fits


def test_a_refused_move_toward_the_vendor_leaves_the_split_alone(make_env):
    env = make_env(capacity=capacity(REQUESTS))
    assert env.run("traffic", "set", "databricks=90", "internal=10", "--reason", "x", "--yes").exit_code == 4
    assert not env.split_file.exists() or env.stored()["weights"] == {"internal": 20, "databricks": 80}
    [entry] = env.audit()
    assert entry["outcome"] == "refused"


def test_a_failover_toward_the_vendor_is_capped_at_its_provisioned_throughput(make_env):
    env = make_env(capacity=capacity(REQUESTS))
    result = env.run("traffic", "failover", "--from", "internal", "--incident", "INC-V", "--yes", "-o", "json")
    assert result.exit_code == 4, result.output
    out = json.loads(result.stdout)
    assert out["after"]["weights"] == {"internal": 17, "databricks": 83}
    assert (out["partial"]["moved"], out["partial"]["not_moved"]) == ({"databricks": 3}, 17)
    assert out["partial"]["capacity_share"] == {"databricks": 83}


def test_a_vendor_without_provisioned_throughput_configured_is_not_checked(make_env):
    env = make_env()  # no capacity.vendors: as before, nothing limits the vendor's share
    result = env.run("traffic", "set", "databricks=95", "internal=5", "--reason", "x", "--yes")
    assert result.exit_code == 0, result.output


def test_capacity_vendors_must_name_a_vendor_backend(make_env):
    env = make_env(capacity=capacity(REQUESTS).replace("    databricks:", "    internal:"))
    result = env.run("traffic", "status")
    assert result.exit_code == 2 and "capacity.vendors: 'internal' is not a configured vendor backend" in result.stderr


def test_provisioned_throughput_needs_exactly_one_figure(make_env):
    env = make_env(capacity=capacity("{requests_per_second: 10, tokens_per_second: 10}"))
    result = env.run("traffic", "status")
    assert result.exit_code == 2 and "give exactly one of requests_per_second, tokens_per_second or query" in result.stderr


def test_status_shows_the_vendors_provisioned_throughput_and_the_share_it_carries(make_env):
    env = make_env(capacity=capacity(REQUESTS))
    result = env.run("traffic", "status", "-o", "json")
    assert result.exit_code == 0, result.output
    vendor = json.loads(result.stdout)["capacity"]["vendors"]["databricks"]
    assert (vendor["provisioned"], vendor["unit"], vendor["max_share"], vendor["share_now"]) == (1000, "requests", 83, 80)
    assert vendor["current"] == pytest.approx(1000)
    table = env.run("traffic", "status")
    assert "capacity    databricks: provisioned 1000 requests/s, carries up to 83% with 20% headroom (now 80%)" in table.stdout


def test_the_provisioned_throughput_can_be_read_from_the_metric_source_with_a_query(make_env):
    # A stand-in for the endpoint's own metric that the embedded store can answer: databricks' 800
    # requests/s now. With no headroom it carries floor(800 / 1000 x 100) = 80% of current traffic.
    query = 'sum(rate(llm_proxy_requests_total{backend=\\"databricks\\"}[300s]))'
    env = make_env(capacity=capacity(f'{{query: "{query}", unit: requests, headroom: 0}}'))
    assert env.run("traffic", "set", "databricks=50", "internal=50", "--reason", "x", "--yes").exit_code == 0
    over = env.run("traffic", "set", "databricks=81", "internal=19", "--reason", "x", "--yes")
    assert over.exit_code == 4 and "carries only 80% of current traffic, 81% asked" in over.stderr
    assert "provisioned for 800 requests/s (query sum(rate(" in over.stderr
    assert env.run("traffic", "set", "databricks=80", "internal=20", "--reason", "x", "--yes").exit_code == 0


def test_a_provisioned_throughput_query_without_data_refuses_a_routine_move(make_env):
    query = 'sum(rate(llm_proxy_requests_total{backend=\\"nowhere\\"}[300s]))'
    env = make_env(capacity=capacity(f'{{query: "{query}"}}'))
    env.run("traffic", "set", "databricks=50", "internal=50", "--reason", "x", "--yes")
    result = env.run("traffic", "set", "databricks=60", "internal=40", "--reason", "x", "--yes")
    assert result.exit_code == 4 and "cannot tell whether databricks can carry 60% of traffic" in result.stderr
