"""Shared fixtures: running the CLI in-process, temp configs, and real Prometheus on loopback."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest


def _loopback_bypasses_proxies() -> None:
    """The suite speaks only to 127.0.0.1: a proxy set on the machine running it (HTTP(S)_PROXY,
    which opsctl, httpx and the kubernetes client honour as curl does) must not interpose. Tests of
    proxying pass their own environment to the code under test."""
    if not any(os.environ.get(v) for v in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy",
                                            "ALL_PROXY", "all_proxy")):
        return
    for var in ("NO_PROXY", "no_proxy"):
        have = [h for h in os.environ.get(var, "").replace(" ", ",").split(",") if h]
        os.environ[var] = ",".join(dict.fromkeys([*have, "127.0.0.1", "localhost", "::1"]))


_loopback_bypasses_proxies()

REPO = Path(__file__).resolve().parent.parent
IN_CI = os.environ.get("CI") == "true"


def require_binary(name: str) -> str:
    """Path of a binary; outside CI a missing one skips, under CI=true it fails."""
    path = shutil.which(name)
    if path:
        return path
    if IN_CI:
        pytest.fail(f"{name} is required under CI but is not installed (.ci/run installs it)")
    pytest.skip(f"{name} not installed")


@dataclass
class Result:
    exit_code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def run_opsctl(*args: str, env: dict | None = None, cwd: Path | None = None, input: str | None = None,
               unset: tuple[str, ...] = ("OPSCTL_CONFIG",)) -> Result:
    """Run the real CLI in this process through the console script's `main()`: exit codes, stdout
    and stderr as a user sees them (see tests/cli/inprocess.py). Environment variables starting
    with one of `unset` are removed for the run, as a clean shell would have them."""
    from tests.cli.inprocess import run_main

    return run_main([str(a) for a in args], env=env, cwd=cwd, input=input, unset=unset)


def spawn_opsctl(*args: str, env: dict | None = None, cwd: Path | None = None, input: str | None = None) -> Result:
    """Run the CLI in a child `python -m opsctl`: only for tests where a separate process is the point."""
    inherited = {k: v for k, v in os.environ.items() if k != "OPSCTL_CONFIG"}
    full_env = {**inherited, "PYTHONPATH": str(REPO), **(env or {})}
    proc = subprocess.run(
        [sys.executable, "-m", "opsctl", *args],
        capture_output=True, text=True, env=full_env, cwd=cwd, input=input, timeout=300,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


WORKERS_PER_CORE = 2


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config) -> int:
    """`-n auto` (pyproject.toml): two workers per core, since most slow tests wait on a server, a
    child process or an alert's evaluation rather than compute. PYTEST_XDIST_AUTO_NUM_WORKERS
    overrides it; `-n N` sets it; `-n 0` runs the tests in this process."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS", "").isdigit():
        return int(os.environ["PYTEST_XDIST_AUTO_NUM_WORKERS"])
    return WORKERS_PER_CORE * max(1, len(os.sched_getaffinity(0)))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_setupnodes(config, specs) -> None:
    """Before the workers start: rewrite the test files' asserts once, here, into pytest's pyc cache.
    Each worker collects every file, and with PYTHONDONTWRITEBYTECODE set (as on the CI machine)
    pytest rewrites them in each worker again: about 20 s of CPU a worker on a 2-core machine, paid
    before any test runs. A worker finds the cached file (checked against the source's mtime and
    size) and rewrites nothing. pytest's own cache functions; if they are not there, the workers
    rewrite, as before. Likewise opsctl and the tests' helper modules are byte-compiled once
    (1 s), where each worker and each `python -m opsctl` a test starts would compile what it
    imports (0.2-0.5 s of CPU each)."""
    import compileall

    for package in ("opsctl", "tests"):
        compileall.compile_dir(REPO / package, quiet=2, rx=re.compile(r"(^|/)(test_[^/]*|conftest)\.py$"))
    try:
        from _pytest.assertion.rewrite import PYC_TAIL, _read_pyc, _rewrite_test, _write_pyc, get_cache_dir
        from _pytest.assertion.rewrite import assertstate_key
    except ImportError:
        return
    if config.getoption("assertmode") != "rewrite":
        return
    state = config.stash[assertstate_key]
    for path in _collected_sources(config):
        cache = get_cache_dir(path)
        pyc = cache / (path.name[:-3] + PYC_TAIL)
        if _read_pyc(path, pyc) is not None:
            continue
        try:
            cache.mkdir(parents=True, exist_ok=True)
            stat, code = _rewrite_test(path, config)
            _write_pyc(state, code, stat, pyc)
        except (OSError, SyntaxError):
            continue  # collection reports it
        except (TypeError, AttributeError):
            return  # another pytest's private signatures: the workers rewrite, as before


def _collected_sources(config) -> list[Path]:
    """The test files and conftests the workers will import: those under the run's paths (the
    command line's, or testpaths) and the conftests of the directories above them."""
    found: set[Path] = set()
    for arg in config.args:
        path = (config.invocation_params.dir / arg.split("::", 1)[0]).resolve()
        if path.is_dir():
            found.update(p for p in path.rglob("*.py") if p.name == "conftest.py" or p.name.startswith("test_"))
        elif path.suffix == ".py":
            found.add(path)
        for parent in path.parents:
            if (parent / "conftest.py").is_file():
                found.add(parent / "conftest.py")
            if parent == REPO:
                break
    return sorted(found)


# Parallel runs (pytest-xdist, `-n auto --dist loadgroup` in pyproject.toml): a module- or
# session-scoped fixture is built once per worker that runs a test using it. So every test using a
# module-scoped fixture is sent to the worker of its file, and those using one of these expensive
# session fixtures (keyed by the conftest directory that defines them) to one worker for all.
ONE_WORKER_SESSION_FIXTURES = {("tests/slo", "servers"): "slo-recorded-servers"}


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups (its hook appends them to node ids)
def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.get_closest_marker("xdist_group") is not None:
            continue
        group = _worker_group(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
    if hasattr(config, "workerinput"):
        # xdist hands out the groups first (largest first), then single tests in this order: the
        # slow ones first, so no worker starts a minute-long test while the others finish. (Every
        # worker sorts alike, as xdist requires; a group's tests keep their order.)
        items.sort(key=lambda item: item.get_closest_marker("slow") is None
                   and item.get_closest_marker("xdist_group") is None)


def _worker_group(item) -> str | None:
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    session_group = None
    for name in info.names_closure:
        for fixturedef in info.name2fixturedefs.get(name, ()):
            if fixturedef.scope in ("module", "class", "package"):
                return item.nodeid.split("::", 1)[0]
            if fixturedef.scope == "session":
                session_group = session_group or ONE_WORKER_SESSION_FIXTURES.get((fixturedef.baseid, name))
    return session_group


def budget_area(nodeid: str) -> str:
    """The README's budget area of a test: its directory under tests/, or tests/ for the top level."""
    parts = nodeid.split("::", 1)[0].split("/")
    return "/".join(parts[:2]) if len(parts) > 2 else "tests/ (top level)"


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    """After the slowest tests, every area's summed durations (set-up, call and tear-down), the
    figures the README's time budgets are given in."""
    from collections import Counter

    sums: Counter[str] = Counter()
    for reports in terminalreporter.stats.values():
        for report in reports:
            if getattr(report, "when", None) in ("setup", "call", "teardown") and hasattr(report, "duration"):
                sums[budget_area(report.nodeid)] += report.duration
    if len(sums) < 2:
        return
    terminalreporter.write_sep("=", "summed durations per area (budgets: README, Development)")
    for area, total in sums.most_common():
        terminalreporter.write_line(f"{total:8.1f}s {area}")
    terminalreporter.write_line(f"{sum(sums.values()):8.1f}s in all")


@pytest.fixture(scope="session", autouse=True)
def _parse_cache(tmp_path_factory):
    """opsctl's parsed-YAML cache (opsctl.config.cache) goes to a directory of this session, not
    the user's ~/.cache; every CLI run of the session, in-process or spawned, shares it."""
    previous = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("xdg-cache"))
    yield
    if previous is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = previous


@pytest.fixture(autouse=True)
def _state_home(tmp_path_factory, monkeypatch):
    """The built-in default keeps its state under $XDG_STATE_HOME/opsctl/<service>: each test gets
    its own state home, never the user's ~/.local/state, and no test sees another's state."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("xdg-state")))


@pytest.fixture
def opsctl():
    return run_opsctl


def write_config(directory: Path, extra: str = "", *, slo_dir: Path | None = None, source: str = "embedded",
                 prometheus_url: str = "http://127.0.0.1:9090", max_data_age: str = "3650d",
                 base: str | None = None) -> Path:
    """`directory`/opsctl.yaml: a config like the embedded default, with its state under `directory`,
    and `extra` (dedented) after it. Test data sit at fixed past instants, so guards accept old data
    unless a test passes its own `max_data_age`. With `base`, that text instead of the default (the
    fakes' tests start from a bare one, tests/fakes/fixtures.py): the suite's one config writer."""
    path = Path(directory) / "opsctl.yaml"
    if base is not None:
        path.write_text(base + textwrap.dedent(extra))
        return path
    path.write_text(textwrap.dedent(f"""\
        service: llm-inference
        backends:
          internal: {{kind: internal, description: vLLM pods}}
          databricks: {{kind: vendor, vendor: databricks}}
        metrics:
          source: {source}
          prometheus: {{url: "{prometheus_url}", timeout: 5, report_deadline: 30}}
          max_data_age: {max_data_age}
        slos: {{dir: "{slo_dir or REPO / 'slos'}", period: 28d}}
        state_dir: "{directory / 'state'}"
        """) + textwrap.dedent(extra))
    return path


@pytest.fixture
def config_file(tmp_path):
    return write_config(tmp_path)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(condition, timeout: float = 10.0, interval: float = 0.02, what: str = "the condition"):
    """Poll `condition()` until it returns something truthy (returned) or `timeout` seconds pass, then
    fail naming `what`: tests wait on what they need, never on a fixed sleep."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def wait_http(url: str, timeout: float = 30.0, ok_statuses=(200,)) -> None:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status in ok_statuses:
                    return
        except urllib.error.HTTPError as exc:
            if exc.code in ok_statuses:
                return
            last = exc
        except OSError as exc:
            last = exc
        time.sleep(0.1)
    raise RuntimeError(f"{url} not ready after {timeout}s: {last}")


def stop_process(proc: subprocess.Popen) -> None:
    """Terminate a test's server process, kill it if it does not exit within 15 s, and reap it."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


# promtool's default cuts a backfill into 2 h blocks: four days of test data made 49 blocks, 54 s of
# promtool and a Prometheus compacting them while the test queried it. One block of up to 31 days
# (Prometheus' own largest compaction) holds the same samples and takes a tenth of the time.
BACKFILL_BLOCK = "744h"


def backfill_openmetrics(openmetrics: Path, data_dir: Path, *, promtool: str | None = None) -> None:
    """`promtool tsdb create-blocks-from openmetrics` into `data_dir`, in blocks of BACKFILL_BLOCK."""
    subprocess.run(
        [promtool or require_binary("promtool"), "tsdb", "create-blocks-from", "openmetrics", "-q",
         f"--max-block-duration={BACKFILL_BLOCK}", str(openmetrics), str(data_dir)],
        check=True, capture_output=True, timeout=600,
    )


class PrometheusServer:
    """A real Prometheus on 127.0.0.1 with a temp data dir, optionally backfilled by promtool."""

    def __init__(self, workdir: Path, openmetrics: Path | None = None, config_yaml: str | None = None,
                 rule_files: list[Path] | None = None, extra_args: list[str] | None = None,
                 web_config: str | None = None):
        self.binary = require_binary("prometheus")
        self.promtool = require_binary("promtool")
        self.workdir = workdir
        self.data = workdir / "prom-data"
        self.data.mkdir(parents=True, exist_ok=True)
        if openmetrics is not None:
            backfill_openmetrics(openmetrics, self.data, promtool=self.promtool)
        config = workdir / "prometheus.yml"
        rules = "".join(f"\n  - {p}" for p in (rule_files or []))
        config.write_text(config_yaml or ("global:\n  evaluation_interval: 15s\n" + (f"rule_files:{rules}\n" if rules else "")))
        extra_args = list(extra_args or [])
        if web_config:
            (workdir / "web.yml").write_text(web_config)
            extra_args.append(f"--web.config.file={workdir / 'web.yml'}")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(workdir / "prometheus.log", "w")
        self.proc = subprocess.Popen(
            [self.binary, f"--config.file={config}", f"--storage.tsdb.path={self.data}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--storage.tsdb.retention.time=3650d",
             "--web.enable-lifecycle", *(extra_args or [])],
            stdout=self.log, stderr=subprocess.STDOUT,
        )
        try:
            wait_http(f"{self.url}/-/ready", timeout=60, ok_statuses=(200, 401) if web_config else (200,))
        except Exception:
            self.stop()
            raise

    def wait_compacted(self, timeout: float = 240.0) -> None:
        """Until no two of the server's blocks overlap in time: a data dir holding backfilled blocks
        over the same hours (`promtool tsdb create-blocks-from rules` writes 2 h blocks beside the raw
        ones) is vertically compacted at the first compaction tick, a minute after start; queries
        while it merges were seen to miss a series (one CI run in several), so tests wait it out."""
        deadline = time.monotonic() + timeout
        while True:
            spans = sorted(_block_spans(self.data))
            if not any(later[0] < earlier[1] for earlier, later in zip(spans, spans[1:])):
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"Prometheus in {self.data} still holds overlapping blocks after {timeout:.0f} s: {spans}")
            time.sleep(1.0)

    def stop(self) -> None:
        stop_process(self.proc)
        self.log.close()


def _block_spans(data: Path) -> list[tuple[int, int]]:
    """(minTime, maxTime) of every complete block in a Prometheus data dir (not the tmp ones)."""
    import json

    spans = []
    for meta in data.glob("*/meta.json"):
        if "tmp" in meta.parent.name:
            continue
        try:
            doc = json.loads(meta.read_text())
        except (OSError, ValueError):  # a block being deleted between glob and read
            continue
        spans.append((doc["minTime"], doc["maxTime"]))
    return spans


@pytest.fixture
def kube_api():
    """The loopback Kubernetes API server (tests/fakes/kube_api.py), empty, faults cleared at the end."""
    from tests.fakes.kube_api import FakeKubeAPI

    api = FakeKubeAPI().start()
    yield api
    api.clear_faults()
    api.stop()


def split_configmap(name: str, namespace: str, weights: dict) -> dict:
    """The ConfigMap the configmap actuator reads the split from, as `kube_api.seed` takes it."""
    import json

    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace},
            "data": {"split.json": json.dumps({"weights": weights, "shadow": {}})}}


@pytest.fixture
def prometheus_factory(tmp_path):
    servers: list[PrometheusServer] = []

    def start(**kwargs) -> PrometheusServer:
        workdir = tmp_path / f"prom{len(servers)}"
        workdir.mkdir()
        server = PrometheusServer(workdir, **kwargs)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()
