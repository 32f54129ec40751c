"""Telling SLO files apart imports no reader: Sloth's and Pyrra's load only when a file's
apiVersion (or Sloth's `version`) names them, so `slo report` on slo-generator files pays for
neither (about 11 ms each). Each check runs in a fresh interpreter, where sys.modules says what
was imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "opsctl" / "defaults" / "slos"

SLOTH = """\
version: "prometheus/v1"
service: "checkout"
slos:
  - name: "requests"
    objective: 99.9
    sli:
      events:
        error_query: sum(rate(llm_proxy_requests_total{outcome="server_error"}[{{.window}}]))
        total_query: sum(rate(llm_proxy_requests_total[{{.window}}]))
    alerting: {name: CheckoutErrors}
"""

PYRRA = """\
apiVersion: pyrra.dev/v1alpha1
kind: ServiceLevelObjective
metadata: {name: requests-errors}
spec:
  target: "99.9"
  window: 4w
  indicator:
    ratio:
      errors: {metric: 'llm_proxy_requests_total{outcome="server_error"}'}
      total: {metric: 'llm_proxy_requests_total'}
"""

PROGRAM = """\
import json, sys
from opsctl.slo.loading import load_slos
slos = load_slos(sys.argv[1:], ["internal", "databricks"])
print(json.dumps({"names": sorted(s.name for s in slos),
                  "sloth": "opsctl.slo.sloth" in sys.modules, "pyrra": "opsctl.slo.pyrra" in sys.modules}))
"""


def load_in_fresh_interpreter(*paths: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", PROGRAM, *map(str, paths)], env=env, capture_output=True, text=True,
                         check=True, timeout=60).stdout
    return json.loads(out)


def test_slo_generator_files_load_without_importing_the_sloth_or_pyrra_reader():
    shipped = sorted(p for p in SHIPPED.glob("*.yaml"))
    got = load_in_fresh_interpreter(*shipped)
    assert len(got["names"]) == len(shipped)
    assert (got["sloth"], got["pyrra"]) == (False, False)


def test_a_sloth_file_loads_the_sloth_reader_only(tmp_path):
    (tmp_path / "sloth.yaml").write_text(SLOTH)
    got = load_in_fresh_interpreter(tmp_path / "sloth.yaml")
    assert got["names"] == ["checkout-requests"]
    assert (got["sloth"], got["pyrra"]) == (True, False)


def test_a_pyrra_file_loads_the_pyrra_reader_only(tmp_path):
    (tmp_path / "pyrra.yaml").write_text(PYRRA)
    got = load_in_fresh_interpreter(tmp_path / "pyrra.yaml")
    assert len(got["names"]) == 1
    assert (got["sloth"], got["pyrra"]) == (False, True)


def test_the_names_loading_tells_formats_apart_by_are_the_readers_own():
    from opsctl.slo import loading, pyrra, sloth

    assert loading.SLOTH_VERSION == sloth.SERVICE_VERSION
    assert loading.SLOTH_API_VERSION == sloth.CRD_API_VERSION
    assert loading.PYRRA_API_VERSION == pyrra.API_VERSION
    for doc in ({"version": sloth.SERVICE_VERSION}, {"apiVersion": sloth.CRD_API_VERSION},
                {"apiVersion": pyrra.API_VERSION}, {"apiVersion": "openslo/v1"}, {"apiVersion": "sre.google.com/v2"},
                ["not", "a", "mapping"]):
        expected = ("sloth" if sloth.is_sloth(doc) else "pyrra" if pyrra.is_pyrra(doc)
                    else "openslo" if doc and isinstance(doc, dict) and str(doc.get("apiVersion", "")).startswith("openslo/")
                    else "slo-generator")
        assert loading.recognise(doc) == (expected, None), doc
    # A document with no marker of any format is refused in one line, not validated as slo-generator's.
    kind, why = loading.recognise({"apiVersion": None})
    assert kind == "" and why is not None and "not an SLO format opsctl reads" in why
