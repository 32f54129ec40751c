"""A config or drill scenario that is not UTF-8 (or holds an impossible YAML value) is a one-line
exit 2 naming the file, never a traceback; in a directory the other files are still checked."""

from __future__ import annotations

import shutil

from tests.cli.inprocess import invoke
from tests.conftest import REPO, write_config


def test_a_config_that_is_not_utf8_is_exit_2_naming_the_file(tmp_path):
    path = tmp_path / "opsctl.yaml"
    path.write_bytes("service: llm-inférence\n".encode("latin-1"))
    result = invoke("--config", path, "config", "validate")
    assert result.exit_code == 2, result.output
    first = result.stderr.splitlines()[0]
    assert first == f"error: {path}: config file is not UTF-8 text (byte 16, line 1: b'\\xe9')"
    assert "Traceback" not in result.output


def test_an_impossible_date_in_a_config_is_exit_2_not_a_traceback(tmp_path):
    path = tmp_path / "opsctl.yaml"
    path.write_text("service: llm-inference\nfreezes: [{name: x, start: 2027-02-30, end: 2027-03-01}]\n")
    result = invoke("--config", path, "config", "validate")
    assert result.exit_code == 2, result.output
    assert str(path) in result.stderr and "day is out of range for month" in result.stderr


def test_a_scenario_that_is_not_utf8_is_listed_with_the_others(tmp_path):
    cfg = write_config(tmp_path)
    chaos = tmp_path / "chaos"
    chaos.mkdir()
    shutil.copy(REPO / "chaos" / "vendor-outage.yaml", chaos / "vendor-outage.yaml")
    before_bad_byte = b"version: 1\ntitle: caf"
    (chaos / "broken.yaml").write_bytes(before_bad_byte + b"\xe9 \xff\n")
    result = invoke("--config", cfg, "drill", "validate", chaos, "-o", "json")
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    import json

    rows = {r["file"].rsplit("/", 1)[-1]: r for r in json.loads(result.stdout)}
    assert set(rows) == {"vendor-outage.yaml", "broken.yaml"}  # one bad file does not stop the listing
    assert not any("UTF-8" in p for p in rows["vendor-outage.yaml"]["problems"])
    assert rows["broken.yaml"]["problems"] == [f"{chaos / 'broken.yaml'}: drill scenario is not UTF-8 text"
                                               f" (byte {len(before_bad_byte)}, line 2: b'\\xe9')"]


def test_drill_run_of_a_scenario_that_is_not_utf8_is_exit_2(tmp_path):
    cfg = write_config(tmp_path)
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(b"\xff\xfe")
    result = invoke("--config", cfg, "drill", "run", bad)
    assert result.exit_code == 2 and f"{bad}: drill scenario is not UTF-8 text" in result.stderr


def test_a_key_holding_control_characters_cannot_forge_an_error_line(tmp_path):
    # Found by tests/property: a key "\x1e" (a line separator to str.splitlines) was echoed raw.
    path = tmp_path / "opsctl.yaml"
    path.write_text('service: llm-inference\n"\\x1e\\nFAKE: ok": 1\n"\\u2028": 2\n')
    result = invoke("--config", path, "config", "validate")
    assert result.exit_code == 2
    assert "\\x1e\\x0aFAKE: ok: unknown key" in result.stderr and "\\u2028: unknown key" in result.stderr
    assert all(line.startswith(("error: ", "  - ")) for line in result.stderr.splitlines()), result.stderr
