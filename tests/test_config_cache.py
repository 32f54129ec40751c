"""The parsed-YAML cache (opsctl.config.cache): a hit skips yaml, a change is re-read, a bad cache
is ignored, and only what JSON carries exactly is stored."""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from opsctl.config import load_config_file
from opsctl.config.cache import cache_dir, cached_parse
from opsctl.config.loading import parse_yaml, read_text
from opsctl.errors import ConfigError
from tests.conftest import REPO, write_config


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg" / "opsctl" / "parsed"


def entries(cache: Path) -> list[Path]:
    return sorted(cache.glob("*.json")) if cache.is_dir() else []


def test_the_cache_lives_under_xdg_cache_home(cache):
    assert cache_dir() == cache


def test_a_second_load_in_a_new_process_does_not_import_yaml(tmp_path, cache):
    path = write_config(tmp_path)
    first = load_config_file(path)
    assert len(entries(cache)) == 1
    probe = (
        "import sys\n"
        "from pathlib import Path\n"
        "from opsctl.config import load_config_file\n"
        f"cfg = load_config_file(Path({str(path)!r}))\n"
        "print(str(cfg.metrics.max_data_age), cfg.state_dir, 'yaml' in sys.modules)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO), "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True).stdout
    assert out.split() == ["3650d", first.state_dir, "False"]


def test_a_changed_file_is_read_again(tmp_path, cache):
    path = write_config(tmp_path)
    assert str(load_config_file(path).metrics.max_data_age) == "3650d"
    write_config(tmp_path, max_data_age="7d")
    assert str(load_config_file(path).metrics.max_data_age) == "7d"


def test_a_rewrite_keeping_size_inode_and_mtime_is_still_seen(tmp_path, cache):
    """A rewrite within one timestamp tick looks unchanged to stat; the stored text tells."""
    path = write_config(tmp_path)
    before = os.stat(path)
    assert str(load_config_file(path).metrics.max_data_age) == "3650d"
    write_config(tmp_path, max_data_age="3649d")  # same length, rewritten in place
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(path)
    assert (after.st_size, after.st_ino, after.st_mtime_ns) == (before.st_size, before.st_ino, before.st_mtime_ns)
    assert str(load_config_file(path).metrics.max_data_age) == "3649d"


def test_a_corrupt_entry_is_ignored_and_replaced(tmp_path, cache):
    path = write_config(tmp_path)
    load_config_file(path)
    [entry] = entries(cache)
    for garbage in ("{not json", "[1, 2]", json.dumps({"key": "x"}), ""):
        entry.write_text(garbage)
        assert str(load_config_file(path).metrics.max_data_age) == "3650d"
        assert json.loads(entry.read_text())["data"]["metrics"]["max_data_age"] == "3650d"


def test_an_unwritable_cache_only_costs_a_parse(tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the cache directory would go")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    path = write_config(tmp_path)
    assert str(load_config_file(path).metrics.max_data_age) == "3650d"
    assert str(load_config_file(path).metrics.max_data_age) == "3650d"


def test_a_refused_file_is_not_cached_and_stays_refused(tmp_path, cache):
    path = write_config(tmp_path, "service: twice\n")  # a duplicate top-level key
    for _ in range(2):
        with pytest.raises(ConfigError, match="duplicate key 'service'"):
            load_config_file(path)
    assert entries(cache) == []


def test_data_json_cannot_carry_exactly_is_parsed_every_time(tmp_path, cache):
    path = tmp_path / "dated.yaml"
    path.write_text("when: 2026-12-20\n200: ok\n")

    def load():
        return cached_parse(path, "test", lambda: read_text(path), lambda text: parse_yaml(text, path))

    assert load() == {"when": datetime.date(2026, 12, 20), 200: "ok"}
    assert entries(cache) == []
    assert load() == {"when": datetime.date(2026, 12, 20), 200: "ok"}


def test_slo_files_are_served_from_the_cache_with_the_same_result(tmp_path, cache):
    from opsctl.slo.loading import load_slos

    first = load_slos([REPO / "slos"], ["internal", "databricks"])
    assert entries(cache)
    again = load_slos([REPO / "slos"], ["internal", "databricks"])
    assert again == first


def test_opsctl_parse_cache_off_parses_every_time_and_writes_nothing(tmp_path, cache, monkeypatch):
    monkeypatch.setenv("OPSCTL_PARSE_CACHE", "off")
    path = write_config(tmp_path)
    assert str(load_config_file(path).metrics.max_data_age) == "3650d"
    assert entries(cache) == []
    monkeypatch.delenv("OPSCTL_PARSE_CACHE")
    load_config_file(path)
    assert len(entries(cache)) == 1
