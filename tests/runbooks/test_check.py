"""`opsctl runbook check`: exit 1 naming each stale, missing or extra file when the directory differs
from what the config generates; `generate` brings it back, atomically and deterministically."""

from __future__ import annotations

import json
import re

import yaml

from tests.conftest import REPO
from tests.runbooks.conftest import copy_shipped, read_dir


def generate(opsctl, config, *args):
    result = opsctl("--config", str(config), "runbook", "generate", *args)
    assert result.exit_code == 0, result.output
    return result


def check(opsctl, config, *args):
    return opsctl("--config", str(config), "runbook", "check", *args)


def named(output: str, kind: str) -> set[str]:
    """The files the check names as `kind` (stale, missing, extra)."""
    m = re.search(rf"{kind}: ([^;\n]+)", output)
    return {p.strip().rsplit("/", 1)[1] for p in m.group(1).split(",")} if m else set()


def test_the_committed_runbooks_match_the_shipped_config(opsctl):
    result = opsctl("--config", str(REPO / "opsctl.yaml"), "runbook", "check")
    assert result.exit_code == 0, result.output
    assert "all current" in result.stdout


def test_the_example_catalogs_committed_runbooks_match_each_services_config(opsctl):
    result = opsctl("--catalog", str(REPO / "examples" / "catalog" / "services"), "runbook", "check", "--all-services")
    assert result.exit_code == 0, result.output
    for service in ("chat", "search"):
        assert f"examples/catalog/runbooks/{service}: 15 runbooks, all current" in result.stdout


def test_a_fresh_generation_checks_clean(opsctl, shipped):
    generate(opsctl, shipped)
    result = check(opsctl, shipped)
    assert result.exit_code == 0, result.output


def test_a_changed_vendor_category_makes_exactly_the_runbooks_quoting_it_stale(opsctl, shipped):
    generate(opsctl, shipped)
    before = read_dir(shipped.parent / "runbooks")
    quoting = {n for n, b in before.items() if b"**Model Serving**" in b}
    assert "scenario-vendor-outage.md" in quoting and "llm-inference-databricks-availability-page.md" in quoting
    assert "llm-inference-internal-availability-page.md" not in quoting  # our own pods: no vendor ticket
    shipped.write_text(shipped.read_text().replace("inference: Model Serving", "inference: Serving Endpoints"))

    result = check(opsctl, shipped)
    assert result.exit_code == 1, result.output
    assert named(result.stderr, "stale") == quoting
    assert not named(result.stderr, "missing") and not named(result.stderr, "extra")
    assert "opsctl runbook generate" in result.stderr

    generate(opsctl, shipped)
    assert check(opsctl, shipped).exit_code == 0
    assert b"**Serving Endpoints**" in (shipped.parent / "runbooks" / "scenario-vendor-outage.md").read_bytes()


def test_a_renamed_backend_makes_check_fail_and_the_new_runbooks_use_the_new_name(opsctl, tmp_path):
    config = copy_shipped(tmp_path / "site")
    generate(opsctl, config)
    doc = yaml.safe_load(config.read_text())
    rename = lambda d: {("dbx" if k == "databricks" else k): v for k, v in d.items()}  # noqa: E731
    doc["backends"] = rename(doc["backends"])  # backends.dbx keeps vendor: databricks (the ticket route)
    doc["traffic"]["default_split"] = rename(doc["traffic"]["default_split"])
    doc["traffic"]["destinations"] = rename(doc["traffic"]["destinations"])
    doc["endpoints"] = rename(doc["endpoints"])
    doc["cost"]["backends"] = rename(doc["cost"]["backends"])
    config.write_text(yaml.safe_dump(doc, sort_keys=False))
    for slo in (config.parent / "slos").glob("databricks-*.yaml"):
        slo.write_text(slo.read_text().replace("backend: databricks", "backend: dbx")
                       .replace('backend="databricks"', 'backend="dbx"'))

    result = check(opsctl, config)
    assert result.exit_code == 1, result.output
    stale = named(result.stderr, "stale")
    assert {"scenario-vendor-outage.md", "llm-inference-databricks-availability-page.md",
            "llm-inference-service-availability-page.md", "README.md"} <= stale

    generate(opsctl, config)
    outage = (config.parent / "runbooks" / "scenario-vendor-outage.md").read_text()
    assert 'opsctl traffic failover --from dbx --incident "$INCIDENT"' in outage
    assert "--from databricks" not in outage
    assert "--vendor databricks" in outage  # the vendor (ticket route) did not change


def test_missing_extra_and_edited_files_are_each_named(opsctl, shipped):
    generate(opsctl, shipped)
    out = shipped.parent / "runbooks"
    (out / "scenario-vendor-latency.md").unlink()
    (out / "notes.md").write_text("hand-written\n")
    edited = out / "llm-inference-internal-latency-1s-page.md"
    edited.write_text(edited.read_text().replace("## Diagnose", "## Diagnose (edited by hand)"))
    (out / "templates").mkdir()  # subdirectories (template overrides) are not runbooks
    (out / ".hidden").write_text("x")

    result = check(opsctl, shipped)
    assert result.exit_code == 1
    assert named(result.stderr, "stale") == {"llm-inference-internal-latency-1s-page.md"}
    assert named(result.stderr, "missing") == {"scenario-vendor-latency.md"}
    assert named(result.stderr, "extra") == {"notes.md"}

    as_json = check(opsctl, shipped, "-o", "json")
    assert as_json.exit_code == 1
    data = json.loads(as_json.stdout)
    assert data["clean"] is False
    assert (data["stale"], data["missing"], data["extra"]) == (
        ["llm-inference-internal-latency-1s-page.md"], ["scenario-vendor-latency.md"], ["notes.md"])


def test_generate_rewrites_what_changed_removes_its_own_leftovers_and_keeps_foreign_files(opsctl, shipped):
    generate(opsctl, shipped)
    out = shipped.parent / "runbooks"
    leftover = out / "llm-inference-retired-slo-page.md"  # an SLO that no longer exists
    leftover.write_text((out / "llm-inference-internal-availability-page.md").read_text())
    foreign = out / "notes.md"
    foreign.write_text("hand-written\n")
    (out / "README.md").write_text("stale\n")
    untouched = out / "scenario-vendor-outage.md"
    mtime = untouched.stat().st_mtime_ns

    preview = generate(opsctl, shipped, "--dry-run", "-o", "json")
    data = json.loads(preview.stdout)
    assert data["written"] == ["README.md"] and data["removed"] == [leftover.name] and data["kept"] == ["notes.md"]
    assert leftover.exists() and (out / "README.md").read_text() == "stale\n"  # a dry run writes nothing

    generate(opsctl, shipped)
    assert not leftover.exists() and foreign.exists()
    assert (out / "README.md").read_text().startswith("<!-- Generated by")
    assert untouched.stat().st_mtime_ns == mtime  # unchanged files are not rewritten
    assert not list(out.glob(".*.tmp"))  # no temp files left behind
    result = check(opsctl, shipped)
    assert result.exit_code == 1 and named(result.stderr, "extra") == {"notes.md"}


def test_same_config_same_bytes_in_any_directory(opsctl, tmp_path):
    first = copy_shipped(tmp_path / "a")
    second = copy_shipped(tmp_path / "elsewhere" / "b")
    generate(opsctl, first)
    generate(opsctl, first, "--out", str(tmp_path / "again"))
    generate(opsctl, second)
    a = read_dir(first.parent / "runbooks")
    assert a == read_dir(tmp_path / "again") == read_dir(second.parent / "runbooks")
    assert a == read_dir(REPO / "runbooks")  # and the committed ones


def test_generate_into_a_file_path_is_refused(opsctl, shipped):
    target = shipped.parent / "afile"
    target.write_text("x")
    result = opsctl("--config", str(shipped), "runbook", "generate", "--out", str(target))
    assert result.exit_code == 2  # click refuses a file for a directory option
