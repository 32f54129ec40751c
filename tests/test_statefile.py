"""opsctl.statefile: atomic, locked JSON state files."""

from __future__ import annotations

import json
import os

import pytest

from opsctl.errors import OpsctlError
from opsctl.statefile import read_json, updating, write_json_atomic


def test_an_atomic_write_leaves_no_temp_file_and_replaces_the_whole_file(tmp_path):
    path = tmp_path / "state" / "x.json"
    write_json_atomic(path, {"a": 1})
    write_json_atomic(path, {"b": 2})
    assert json.loads(path.read_text()) == {"b": 2}
    assert sorted(p.name for p in path.parent.iterdir()) == ["x.json"]
    assert oct(os.stat(path).st_mode & 0o777) == "0o600"


def test_an_error_inside_an_update_writes_nothing(tmp_path):
    path = tmp_path / "x.json"
    write_json_atomic(path, {"n": 1})
    with pytest.raises(RuntimeError):
        with updating(path, {}) as data:
            data["n"] = 2
            raise RuntimeError("boom")
    assert read_json(path, {}) == {"n": 1}


def test_a_corrupt_state_file_is_an_error_naming_the_file(tmp_path):
    path = tmp_path / "x.json"
    path.write_text("{not json")
    with pytest.raises(OpsctlError, match=str(path)):
        read_json(path, {})
