"""The flagd experiment gate: the split written as a flagd flag and evaluated by the real OpenFeature
flagd provider (in-process, offline file source) over 100,000 users: shares within half a point of
the weights, and 20/80 -> 30/70 moves only the tenth of users that must move."""

from __future__ import annotations

import json
import shutil
import textwrap

import pytest

from opsctl.errors import ConflictError, UsageError
from opsctl.traffic.flagd import FlagdFileActuator, flag_definition
from opsctl.traffic.split import Split

BACKENDS = ["internal", "databricks"]  # the configured order (tests/conftest.write_config)
USERS = 100_000
FLAG = "llm-backend"


def assignments(path, keys: int, flag: str = FLAG) -> list[str]:
    """Each user's backend as the real flagd provider resolves it from the file at `path`."""
    from openfeature.contrib.provider.flagd import FlagdProvider
    from openfeature.contrib.provider.flagd.config import ResolverType
    from openfeature.evaluation_context import EvaluationContext

    provider = FlagdProvider(resolver_type=ResolverType.FILE, offline_flag_source_path=str(path))
    provider.initialize(EvaluationContext())
    try:
        out = []
        for i in range(keys):
            details = provider.resolve_string_details(flag, "unassigned", EvaluationContext(targeting_key=f"user-{i}"))
            assert details.error_code is None, details.error_message
            out.append(details.value)
        return out
    finally:
        provider.shutdown()


def through_the_sdk(path, keys: int) -> list[str]:
    """The same through the OpenFeature SDK's client, as the grammar service would call it."""
    from openfeature import api
    from openfeature.contrib.provider.flagd import FlagdProvider
    from openfeature.contrib.provider.flagd.config import ResolverType
    from openfeature.evaluation_context import EvaluationContext

    api.set_provider_and_wait(FlagdProvider(resolver_type=ResolverType.FILE, offline_flag_source_path=str(path)))
    try:
        client = api.get_client()
        return [client.get_string_value(FLAG, "unassigned", EvaluationContext(targeting_key=f"user-{i}"))
                for i in range(keys)]
    finally:
        api.shutdown()


def flagd_env(make_env, extra: str = ""):
    return make_env(actuator="flagd", extra_traffic=f"flagd: {{flag: {FLAG}}}\n" + extra)


@pytest.mark.slow
def test_shares_within_half_a_point_and_20_80_to_30_70_moves_only_the_tenth_that_must(make_env, tmp_path):
    env = flagd_env(make_env)
    path = env.state / "traffic" / "flags.flagd.json"
    # the configured default is 20/80 already (nothing to write): go through 10/90 to store 20/80
    for split in (("internal=10", "databricks=90"), ("internal=20", "databricks=80")):
        result = env.run("traffic", "set", *split, "--reason", "A/B start", "--yes")
        assert result.exit_code == 0, result.output
    before = tmp_path / "before.json"
    shutil.copy(path, before)
    result = env.run("traffic", "set", "internal=30", "databricks=70", "--reason", "widen the A/B", "--yes")
    assert result.exit_code == 0, result.output
    after = tmp_path / "after.json"
    shutil.copy(path, after)

    first, second = assignments(before, USERS), assignments(after, USERS)
    assert abs(first.count("internal") / USERS * 100 - 20) <= 0.5
    assert abs(first.count("databricks") / USERS * 100 - 80) <= 0.5
    assert abs(second.count("internal") / USERS * 100 - 30) <= 0.5
    moved = [(a, b) for a, b in zip(first, second) if a != b]
    assert abs(len(moved) / USERS * 100 - 10) <= 0.5  # the weight change: 10 points
    assert set(moved) == {("databricks", "internal")}  # nobody moves the other way
    # the SDK's client gives each user the same backend as the provider
    assert through_the_sdk(after, 2000) == second[:2000]


def test_the_flag_holds_its_change_record_and_version_in_one_write_and_keeps_other_flags(make_env):
    env = flagd_env(make_env)
    path = env.state / "traffic" / "flags.flagd.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    other = {"state": "ENABLED", "variants": {"on": True, "off": False}, "defaultVariant": "off"}
    path.write_text(json.dumps({"flags": {"dark-mode": other}}))
    result = env.run("traffic", "set", "internal=30", "databricks=70", "--reason", "tuning", "--yes")
    assert result.exit_code == 0, result.output
    document = json.loads(path.read_text())
    assert document["flags"]["dark-mode"] == other
    flag = document["flags"][FLAG]
    assert flag["variants"] == {"internal": "internal", "databricks": "databricks"}
    assert flag["targeting"] == {"fractional": [["internal", 30], ["databricks", 70]]}
    assert flag["defaultVariant"] == "databricks"
    assert flag["metadata"]["opsctl.io/version"] == 1
    record = json.loads(flag["metadata"]["opsctl.io/traffic-record"])
    [change] = record["changes"]
    assert change["actor"] == "tester" and change["reason"] == "tuning"
    assert change["after"]["weights"] == {"internal": 30, "databricks": 70}
    status = json.loads(env.run("traffic", "status", "-o", "json").stdout)
    assert status["split"]["weights"] == {"internal": 30, "databricks": 70}
    assert status["target"] == f"flagd flag {FLAG} in {path}"
    result = env.run("traffic", "set", "internal=40", "databricks=60", "--reason", "more", "--yes")
    assert result.exit_code == 0, result.output
    flag = json.loads(path.read_text())["flags"][FLAG]
    assert flag["metadata"]["opsctl.io/version"] == 2
    assert len(json.loads(flag["metadata"]["opsctl.io/traffic-record"])["changes"]) == 2


def test_a_write_planned_against_an_older_version_is_a_conflict(tmp_path):
    actuator = FlagdFileActuator(tmp_path / "flags.json", flag=FLAG, default=None, backends=BACKENDS)
    actuator.write(Split.of({"internal": 20, "databricks": 80}), "0", dry_run=False)
    with pytest.raises(ConflictError, match="version 0 -> 1"):
        actuator.write(Split.of({"internal": 30, "databricks": 70}), "0", dry_run=False)
    assert actuator.read().split == Split.of({"internal": 20, "databricks": 80})


def test_a_gate_cannot_mirror():
    with pytest.raises(UsageError, match="cannot mirror"):
        flag_definition(Split.of({"internal": 100, "databricks": 0}, {"databricks": 5}), BACKENDS, 1, None)


def test_path_and_configmap_together_are_refused(make_env):
    env = make_env(actuator="flagd", extra_traffic="flagd: {path: f.json, configmap: {name: flags}}\n")
    result = env.run("traffic", "status")
    assert result.exit_code == 2 and "traffic.flagd: give either path (a file) or configmap, not both" in result.output


@pytest.mark.slow
def test_the_definition_in_a_configmap_is_patched_with_its_resource_version_and_evaluates(make_env, kube_api, tmp_path):
    ns = "llm"
    seeded = kube_api.seed({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "flags", "namespace": ns},
                            "data": {"other.yaml": "keep: me"}})
    extra = textwrap.dedent(f"""\
        kubernetes: {{host: "{kube_api.url}", namespace: {ns}, timeout: 5}}
        flagd: {{flag: {FLAG}, configmap: {{name: flags, key: flags.flagd.json}}}}
        """)
    env = make_env(actuator="flagd", extra_traffic=extra)
    result = env.run("traffic", "set", "internal=30", "databricks=70", "--reason", "A/B", "--yes")
    assert result.exit_code == 0, result.output
    cm = kube_api.get("", "configmaps", ns, "flags")
    assert cm["data"]["other.yaml"] == "keep: me"
    [patch] = [r for r in kube_api.requests if r.method == "PATCH" and "/configmaps/" in r.path]
    assert patch.body["metadata"]["resourceVersion"] == seeded["metadata"]["resourceVersion"]
    mounted = tmp_path / "mounted.json"  # what flagd reads from the mounted ConfigMap
    mounted.write_text(cm["data"]["flags.flagd.json"])
    users = assignments(mounted, 10_000)
    assert abs(users.count("internal") / 10_000 * 100 - 30) <= 1.5  # 10,000 users: se 0.46 points
    [event] = kube_api.events("flags")
    assert event["reason"] == "TrafficSplitChanged"
