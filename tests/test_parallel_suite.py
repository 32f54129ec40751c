"""The suite's parallel run (tests/conftest.py's xdist hooks): a module-scoped fixture is built once
however many workers run its file's tests, and `-n auto` means two workers per core."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from tests.conftest import REPO, pytest_xdist_auto_num_workers

MODULE_FIXTURE_FILE = """\
    import os
    import pathlib

    import pytest


    @pytest.fixture(scope="module")
    def built():
        with open(pathlib.Path(os.environ["BUILDS"]), "a") as log:
            log.write(os.environ.get("PYTEST_XDIST_WORKER", "main") + "\\n")


    @pytest.mark.parametrize("n", range(8))
    def test_reads_it(built, n):
        pass
    """

INDEPENDENT_FILE = """\
    import pytest


    @pytest.mark.parametrize("n", range(8))
    def test_on_its_own(n):
        pass
    """


UNUSED_PLUGINS = ("-p", "no:hypothesispytest", "-p", "no:benchmark", "-p", "no:anyio")


@pytest.mark.slow
def test_a_module_fixture_is_built_once_when_two_workers_share_its_files_tests(tmp_path):
    (tmp_path / "test_a.py").write_text(textwrap.dedent(MODULE_FIXTURE_FILE))
    (tmp_path / "test_b.py").write_text(textwrap.dedent(INDEPENDENT_FILE))
    builds = tmp_path / "builds.log"
    env = {**os.environ, "PYTHONPATH": str(REPO), "BUILDS": str(builds)}
    proc = subprocess.run(
        # The installed plugins these files do not use stay out of the three processes (about 6 of
        # the run's 9 s of CPU): what is under test is tests.conftest's grouping over xdist.
        [sys.executable, "-m", "pytest", "-q", "-p", "tests.conftest", "-p", "no:cacheprovider", *UNUSED_PLUGINS,
         "-n", "2", "--dist", "loadgroup", "-c", os.devnull, "--rootdir", str(tmp_path), str(tmp_path)],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "16 passed" in proc.stdout, proc.stdout[-2000:]
    workers = builds.read_text().split()
    assert len(workers) == 1 and workers[0].startswith("gw"), workers


def test_auto_is_two_workers_per_core_unless_the_environment_says(monkeypatch):
    monkeypatch.delenv("PYTEST_XDIST_AUTO_NUM_WORKERS", raising=False)
    assert pytest_xdist_auto_num_workers(None) == 2 * len(os.sched_getaffinity(0))
    monkeypatch.setenv("PYTEST_XDIST_AUTO_NUM_WORKERS", "3")
    assert pytest_xdist_auto_num_workers(None) == 3
