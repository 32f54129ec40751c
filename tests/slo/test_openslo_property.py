"""Any mutation of an OpenSLO file (each of its documents), or of the SLI file another file refers
to: `slo validate` and `slo convert` exit 0, or 2 with one error naming the file, never a traceback."""

from __future__ import annotations

import tempfile
from pathlib import Path

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.cli.inprocess import invoke
from tests.conftest import REPO
from tests.property.helpers import assert_clean, dump_yaml, mutate

EXAMPLES = REPO / "slos" / "examples" / "openslo"
FILES = sorted(EXAMPLES.glob("*.yaml"))
ENV = {"OPSCTL_CONFIG": str(REPO / "opsctl.yaml")}


@settings(max_examples=60, deadline=None)
@given(st.data(), st.sampled_from(FILES))
def test_a_mutated_openslo_file_validates_or_names_the_file(data, original):
    with tempfile.TemporaryDirectory() as d:
        for other in FILES:  # the unmutated files beside it, so references can resolve
            (Path(d) / other.name).write_text(other.read_text())
        docs = [mutate(doc, data.draw) for doc in yaml.safe_load_all(original.read_text())]
        path = Path(d) / original.name
        path.write_text("---\n".join(dump_yaml(doc) for doc in docs))
        result = invoke("slo", "validate", d, env=ENV)
        assert_clean(result, naming=str(path) if result.exit_code else None)
        converted = invoke("slo", "convert", d, "--to", "slo-generator", env=ENV)
        assert_clean(converted)
        assert converted.exit_code == result.exit_code
