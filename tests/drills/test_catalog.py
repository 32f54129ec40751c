"""Shipped scenarios travel with the package and run by name from any directory."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile

import pytest

from tests.cli.inprocess import invoke
from tests.conftest import REPO, write_config

SHIPPED = sorted(p.name for p in (REPO / "chaos").glob("*.yaml"))


@pytest.fixture
def elsewhere(tmp_path, monkeypatch):
    """A working directory outside the repository, with no opsctl.yaml: the built-in default."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_a_shipped_scenario_runs_by_name_outside_the_repository(elsewhere):
    result = invoke("drill", "run", "vendor-outage", "--quiet", "-o", "json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["outcome"] == "passed" and report["scenario"]["title"].startswith("Vendor outage")


@pytest.mark.parametrize("arg", ["chaos/vendor-outage.yaml", "vendor-outage.yaml", "vendor-outage"])
def test_the_readme_path_and_the_name_find_the_same_packaged_file(elsewhere, arg):
    result = invoke("drill", "run", arg, "--dry-run", "-o", "json")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert plan["file"].endswith("vendor-outage.yaml")
    assert (elsewhere / plan["file"]).resolve() == (REPO / "chaos" / "vendor-outage.yaml").resolve()


def test_drill_list_shows_the_packaged_scenarios_by_name(elsewhere):
    rows = json.loads(invoke("drill", "list", "-o", "json").stdout)
    assert sorted(r["name"] + ".yaml" for r in rows) == SHIPPED
    assert all(r["valid"] for r in rows)


def test_a_config_with_its_own_scenarios_lists_them_first_and_still_finds_the_shipped_ones(tmp_path):
    cfg = write_config(tmp_path, "drills: {scenarios: mine}\n")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "vendor-outage.yaml").write_text((REPO / "chaos" / "vendor-outage.yaml").read_text()
                                                          .replace("title: Vendor outage", "title: Our outage"))
    rows = {r["name"]: r for r in json.loads(invoke("--config", cfg, "drill", "list", "-o", "json").stdout)}
    assert rows["vendor-outage"]["title"].startswith("Our outage")  # the configured one hides the packaged one
    assert rows["vendor-outage"]["origin"] == "config"
    assert set(rows) == {p.removesuffix(".yaml") for p in SHIPPED}


@pytest.mark.parametrize("arg", ["chaos/", "chaos"])
def test_drill_validate_chaos_outside_the_repository_validates_the_packaged_scenarios(elsewhere, arg):
    result = invoke("drill", "validate", arg, "-o", "json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert sorted(r["file"].rsplit("/", 1)[-1] for r in rows) == SHIPPED
    assert all(r["valid"] for r in rows)


def test_drill_validate_of_a_missing_directory_is_exit_2_naming_it(elsewhere):
    result = invoke("drill", "validate", "nowhere/")
    assert result.exit_code == 2 and "nowhere: no such scenario file or directory" in result.stderr


def test_an_unknown_name_is_exit_2_listing_the_known_ones(elsewhere):
    result = invoke("drill", "run", "vendor-outgae")
    assert result.exit_code == 2
    assert "vendor-outgae: no such scenario file, and no scenario of that name" in result.stderr
    assert "vendor-outage" in result.stderr and "`opsctl drill list`" in result.stderr


def test_a_path_in_another_directory_is_never_guessed_by_name(elsewhere):
    result = invoke("drill", "run", "somewhere/vendor-outage.yaml")
    assert result.exit_code == 2 and "no such scenario file" in result.stderr


@pytest.mark.slow
def test_a_wheel_carries_every_shipped_scenario_slo_and_the_default_config(tmp_path):
    # Offline build from a copy of the tracked files (no build isolation: setuptools is installed).
    src = tmp_path / "src"
    src.mkdir()
    archive = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z"], capture_output=True, check=True).stdout
    for name in filter(None, archive.decode().split("\0")):
        source = REPO / name
        target = src / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            target.symlink_to(source.readlink())
        elif source.is_file():
            target.write_bytes(source.read_bytes())
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(tmp_path / "dist")], check=True, capture_output=True, timeout=300)
    [wheel] = (tmp_path / "dist").glob("opsctl-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {f"opsctl/defaults/chaos/{n}" for n in SHIPPED} <= names
    assert {f"opsctl/defaults/slos/{p.name}" for p in (REPO / "slos").glob("*.yaml")} <= names
    assert "opsctl/defaults/opsctl.yaml" in names
